"""ONNX against eager torch on the default voice: `python -m recipes.benchmark onnx --out docs/results/onnx`.

For texts of several symbol lengths (the benchmark's sentence pool, recipes.bench.texts), both runtimes speak
the same token ids with the same seed and the voice's own controls (its checkpoint config, which the export's
manifest copies), one utterance at a time, through each engine's stages (`engine.mels`, `engine.vocode`):
  * parity: mel max |onnx - eager| (natural-log units), equal frame counts, wave max |difference| and
    relative RMS error;
  * speed at each of `--threads` (default 1 and 2): median over `--repeats` runs after one warm-up of the
    acoustic stage (mels), the vocoder stage and their sum, eager torch (torch.set_num_threads) and
    onnxruntime (intra-op threads), and the speed-up eager / onnx.
The export is `--onnx-dir` (default checkpoints/onnx), made first when it is missing or stale (untimed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tts.paths import REPO_ROOT


def _median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    fn()  # warm-up
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run(onnx_dir: Path, lengths: list[int], threads: list[int], repeats: int, seed: int = 0,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    import torch

    from recipes.bench.texts import TextPool
    from tts.export import export
    from tts.runtime.onnx_engine import OnnxEngine, export_is_current
    from tts.runtime.release import shipped_checkpoint, shipped_defaults
    from tts.runtime.torch_engine import TorchEngine

    if not export_is_current(onnx_dir):
        log(f"setup (untimed): python -m tts.export --out {onnx_dir}")
        export(onnx_dir)
    defaults = shipped_defaults()
    eager = TorchEngine.from_paths(shipped_checkpoint(defaults["acoustic"]), defaults["vocoder"])
    controls = eager.defaults.replace(seed=seed)  # the checkpoint's own controls; the export's manifest copies them
    pool = TextPool(eager.frontend)
    items = []
    for n in lengths:
        text, ids, _ = pool.text_of_length(n)
        items.append((n, text, ids))
    result: dict[str, Any] = {"parity": [], "speed": [], "settings": {
        "lengths": lengths, "threads": threads, "repeats": repeats, "seed": seed, "onnx_dir": str(onnx_dir),
        "controls": {k: v for k, v in dataclasses.asdict(controls).items() if k != "seed"}, "cpu_count": os.cpu_count()}}
    torch_threads = torch.get_num_threads()
    try:
        for t in threads:
            torch.set_num_threads(t)
            onnx = OnnxEngine.load(onnx_dir, threads=t)
            if onnx.defaults.replace(seed=seed) != controls:
                log(f"note: the export's controls {onnx.defaults} differ from the checkpoint's {eager.defaults}; "
                    "both engines are run with the checkpoint's")
            for n, text, ids in items:
                e_mel_s, e_mels = _median_time(lambda: eager.mels([ids], [0], controls), repeats)
                e_voc_s, e_waves = _median_time(lambda: eager.vocode(e_mels), repeats)
                o_mel_s, o_mels = _median_time(lambda: onnx.mels([ids], [0], controls), repeats)
                o_voc_s, o_waves = _median_time(lambda: onnx.vocode(o_mels), repeats)
                audio_s = e_waves[0].size / eager.sample_rate
                row = {"symbols": n, "threads": t, "audio_s": round(audio_s, 3),
                       "eager_mel_s": e_mel_s, "eager_vocoder_s": e_voc_s, "eager_total_s": e_mel_s + e_voc_s,
                       "onnx_mel_s": o_mel_s, "onnx_vocoder_s": o_voc_s, "onnx_total_s": o_mel_s + o_voc_s}
                row["speedup_total"] = row["eager_total_s"] / row["onnx_total_s"]
                row["speedup_mel"] = e_mel_s / o_mel_s
                result["speed"].append(row)
                log(f"threads {t}, {n} symbols ({audio_s:.2f} s audio): eager {row['eager_total_s'] * 1e3:.0f} ms "
                    f"(mel {e_mel_s * 1e3:.0f}), onnx {row['onnx_total_s'] * 1e3:.0f} ms (mel {o_mel_s * 1e3:.0f}), "
                    f"x{row['speedup_total']:.2f}")
                if t == threads[0]:
                    a, b = e_waves[0], o_waves[0]
                    same_len = a.shape == b.shape
                    e_mel = e_mels.mels.float().cpu().numpy()
                    parity = {"symbols": n, "text": text, "frames_eager": int(e_mels.lengths[0]),
                              "frames_onnx": int(o_mels.lengths[0]),
                              "mel_max_abs": float(np.abs(o_mels.mels - e_mel).max())
                              if o_mels.mels.shape == e_mel.shape else None,
                              "wave_max_abs": float(np.abs(a - b).max()) if same_len else None,
                              "wave_rel_rms": float(np.sqrt(np.mean((a - b) ** 2)) / np.sqrt(np.mean(a**2)))
                              if same_len else None}
                    result["parity"].append(parity)
                    log(f"parity {n} symbols: mel max abs {parity['mel_max_abs']:.2e}, wave max abs "
                        f"{parity['wave_max_abs']:.2e}, wave relative RMS {parity['wave_rel_rms']:.2e}")
    finally:
        torch.set_num_threads(torch_threads)
    return result


def to_markdown(r: dict[str, Any]) -> str:
    s = r["settings"]
    lines = [f"Default voice (controls {s['controls']}), seed {s['seed']}, median of {s['repeats']} runs after a "
             f"warm-up, batch 1, {s['cpu_count']} CPU cores; load average (1, 5, 15 min) "
             f"{tuple(round(x, 2) for x in s.get('load_average_before', ()))} before and "
             f"{tuple(round(x, 2) for x in s.get('load_average_after', ()))} after the runs.", "",
             "Parity (onnxruntime vs eager torch, same ids and seed):", "",
             "| symbols | frames eager / onnx | mel max abs | wave max abs | wave relative RMS |", "|---|---|---|---|---|"]
    for p in r["parity"]:
        lines.append(f"| {p['symbols']} | {p['frames_eager']} / {p['frames_onnx']} | {p['mel_max_abs']:.2e} | "
                     f"{p['wave_max_abs']:.2e} | {p['wave_rel_rms']:.2e} |")
    lines += ["", "Speed (ms; mel = acoustic model incl. refiner, total = mel + vocoder):", "",
              "| threads | symbols | audio s | eager mel | eager total | onnx mel | onnx total | speed-up (total) |",
              "|---|---|---|---|---|---|---|---|"]
    for x in r["speed"]:
        lines.append(f"| {x['threads']} | {x['symbols']} | {x['audio_s']:.2f} | {x['eager_mel_s'] * 1e3:.1f} | "
                     f"{x['eager_total_s'] * 1e3:.1f} | {x['onnx_mel_s'] * 1e3:.1f} | {x['onnx_total_s'] * 1e3:.1f} | "
                     f"x{x['speedup_total']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.benchmark onnx", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--onnx-dir", type=Path, default=REPO_ROOT / "checkpoints" / "onnx")
    p.add_argument("--lengths", default="25,100,300", help="symbols per text (comma list)")
    p.add_argument("--threads", default="1,2", help="thread counts (comma list)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="write onnx_benchmark.json and onnx_benchmark.md here")
    args = p.parse_args(argv)
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
        threads = [int(x) for x in args.threads.split(",") if x.strip()]
    except ValueError:
        p.error("--lengths and --threads take comma-separated integers")
    if not lengths or not threads or min(lengths) < 1 or min(threads) < 1 or args.repeats < 1:
        p.error("--lengths, --threads and --repeats must be positive")
    load_before = os.getloadavg()
    result = run(args.onnx_dir, lengths, threads, args.repeats, args.seed)
    # on a shared machine the absolute times move with the load; both runtimes are timed back to back
    result["settings"]["load_average_before"], result["settings"]["load_average_after"] = load_before, os.getloadavg()
    result["argv"] = ["python", "-m", "recipes.benchmark", "onnx", *(argv if argv is not None else sys.argv[2:])]
    result["started"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "onnx_benchmark.json").write_text(json.dumps(result, indent=1) + "\n")
        (args.out / "onnx_benchmark.md").write_text(to_markdown(result))
        print(f"wrote {args.out / 'onnx_benchmark.json'} and {args.out / 'onnx_benchmark.md'}")
    return 0
