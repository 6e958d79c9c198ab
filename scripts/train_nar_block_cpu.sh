#!/usr/bin/env bash
# The block-wise NAR's CPU training (issue 22, experiment=nar_block_cpu_small): warm start from the shipped
# parallel checkpoints/nar.pt (the block prenet starts fresh), Festival durations as nar.pt, ONE intra-op
# thread + 1 loader worker.  Resumable: run it again after a kill and it continues from last.ckpt.
set -euo pipefail
cd "$(dirname "$0")/.."
resume=()
[ -e exp/nar_block_cpu_small/checkpoints/last.ckpt ] && resume=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec .venv/bin/python -m recipes.train experiment=nar_block_cpu_small \
    trainer.enable_progress_bar=false "${resume[@]}" "$@"
