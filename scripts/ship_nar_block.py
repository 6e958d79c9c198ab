"""Ship the block-wise NAR (issue 22) as checkpoints/nar_block.pt without touching the other shipped files.

    .venv/bin/python scripts/ship_nar_block.py exp/nar_block_cpu_small/checkpoints/stepNNNNNNN.ckpt

recipes.release exports every shipped acoustic model again; this adds one: `recipes.release.export_one`
(fp16, provenance: source, sha256, step, steps_before) with the shipped NAR's inference controls (nar.pt's
own K and temperature, so the two differ only in the decoder), then records the file in
checkpoints/release.json (budget checked).  nar.pt, ar.pt, the vocoders and the default voice stay exactly as
they are.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from data_prep.atomic import write_json_atomic
from recipes.release import ReleaseError, export_one
from tts import checkpoint
from tts.paths import CHECKPOINT_DIR

NAME = "nar_block"
MAX_TOTAL_MB = 60.0  # conf/release.yaml max_total_mb


def main(src: str) -> None:
    release = json.loads((CHECKPOINT_DIR / "release.json").read_text())
    nar = checkpoint.load(CHECKPOINT_DIR / "nar.pt").model.inference_spec().defaults
    overrides = {"refine_steps": nar["refine_steps"], "refine_temperature": nar["temperature"]}
    dst = CHECKPOINT_DIR / f"{NAME}.pt"
    entry = export_one(Path(src), dst, half=True, overrides=overrides)
    entry["file"] = str(dst.relative_to(CHECKPOINT_DIR.parent))
    files = {**release["files"], f"{NAME}.pt": entry}
    total = sum(f["mb"] for f in files.values())
    if total > MAX_TOTAL_MB:
        dst.unlink()
        raise ReleaseError(f"shipped checkpoints total {total:.1f} MB > budget {MAX_TOTAL_MB} MB")
    write_json_atomic(CHECKPOINT_DIR / "release.json", {**release, "files": files, "total_mb": total})
    print(f"shipped {dst} ({entry['mb']:.1f} MB, step {entry['global_step']}, from {src}); release total {total:.1f} MB")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
