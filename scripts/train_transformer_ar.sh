#!/usr/bin/env bash
# Issue 37: the Transformer AR with a KV cache (experiment=tar_cpu_small), ONE intra-op thread, no loader worker,
# checkpoints every 250 steps (all kept) in exp/tar_cpu_small/checkpoints/.  It takes several sessions, and a
# session's machine may be gone at the next one, so the run is carried in the repository:
#   - exp/tar_cpu_small/checkpoints/last.ckpt exists: resume it (optimizer, schedule, step);
#   - else carry/tar_cpu_small.pt exists (`python -m recipes.carry save exp/tar_cpu_small carry/tar_cpu_small.pt`
#     at the end of a session, committed): warm-start from its weights with the schedule offset by the steps
#     behind them (optim.scheduler.offset) and a 200-step warm-up for Adam's fresh moments, for the steps left;
#   - else the first start: encoder and postnet from ar.pt (conf/experiment/tar_cpu_small.yaml).
# Extra Hydra overrides pass through, e.g. `scripts/train_transformer_ar.sh data.num_workers=0` when memory is tight.
#   nohup scripts/train_transformer_ar.sh > /tmp/tar_cpu_small.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
# ckpt_path=last, or the carried warm start, or nothing (recipes.carry start); status 3: all steps done
start=$(.venv/bin/python -m recipes.carry start tar_cpu_small "$@") || { [ $? -eq 3 ] && exit 0; exit 1; }
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train experiment=tar_cpu_small \
    trainer.enable_progress_bar=false $start "$@"
