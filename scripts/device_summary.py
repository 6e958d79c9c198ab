"""Summarise the runs of scripts/device_run.sh: fp16 exports of the vocoders and every logged scalar's
last value, count and steps per second (from the TensorBoard event wall times) into OUT/summary.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tts import checkpoint


def scalars(tb_dir: Path) -> dict[str, dict[str, float]]:
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["scalars"]:
        ev = acc.Scalars(tag)
        entry = {"last": ev[-1].value, "last_step": ev[-1].step, "n": len(ev)}
        if len(ev) > 2 and ev[-1].wall_time > ev[1].wall_time:  # skip the first: start-up
            entry["steps_per_s"] = (ev[-1].step - ev[1].step) / (ev[-1].wall_time - ev[1].wall_time)
        out[tag] = entry
    return out


def main() -> None:
    exp, out = Path(sys.argv[1]), Path(sys.argv[2])
    summary = {}
    for run in sorted(p for p in exp.iterdir() if p.is_dir()):
        tb = run / "tb"
        summary[run.name] = scalars(tb) if tb.is_dir() else {}
        last = run / "checkpoints" / "last.ckpt"
        if last.exists() and run.name in ("sf_gpu", "sf_gpu_gan", "hifigan_gan"):
            checkpoint.export(last, out / f"{run.name}.pt", half=True)
            summary[run.name]["_checkpoint_info"] = checkpoint.read_raw(last)["tts"]["info"]
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    for name, tags in summary.items():
        keys = [k for k in tags if k.startswith(("val/", "train/loss", "train/mel_l1", "train/g_loss"))]
        print(name, {k: round(tags[k]["last"], 4) for k in keys},
              {k: round(v["steps_per_s"], 2) for k, v in tags.items() if "steps_per_s" in v and k.startswith("train/")})


if __name__ == "__main__":
    main()
