#!/usr/bin/env bash
# Issue 34's converged AR baseline (experiment=ar_baseline): Tacotron 2 trained on from the shipped
# checkpoints/ar.pt, ONE intra-op thread + 1 loader worker, checkpoints every 250 steps (all kept) in
# exp/ar_baseline/checkpoints/.  Resumable: run it again after a kill (or in a later session, with exp/ kept)
# and it continues from last.ckpt with its optimizer and schedule.  Extra Hydra overrides pass through,
# e.g. `scripts/train_ar_baseline.sh data.num_workers=0` when memory is tight, or `trainer.max_steps=8000`.
# On a machine without exp/ar_baseline (a fresh session): the run starts again from checkpoints/ar.pt.
#   nohup scripts/train_ar_baseline.sh > /tmp/ar_baseline.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
resume=()
[ -e exp/ar_baseline/checkpoints/last.ckpt ] && resume=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train experiment=ar_baseline \
    trainer.enable_progress_bar=false "${resume[@]}" "$@"
