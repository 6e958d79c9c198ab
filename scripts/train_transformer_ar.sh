#!/usr/bin/env bash
# Issue 37: the Transformer AR with a KV cache (experiment=tar_cpu_small), ONE intra-op thread + 1 loader worker,
# checkpoints every 250 steps (all kept) in exp/tar_cpu_small/checkpoints/.  Resumable: run it again after a kill
# (or in a later session, with exp/ kept) and it continues from last.ckpt with its optimizer and schedule.  Extra
# Hydra overrides pass through, e.g. `scripts/train_transformer_ar.sh data.num_workers=0` when memory is tight.
#   nohup scripts/train_transformer_ar.sh > /tmp/tar_cpu_small.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
resume=()
[ -e exp/tar_cpu_small/checkpoints/last.ckpt ] && resume=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train experiment=tar_cpu_small \
    trainer.enable_progress_bar=false "${resume[@]}" "$@"
