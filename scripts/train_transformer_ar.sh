#!/usr/bin/env bash
# Issue 37: the Transformer AR with a KV cache (experiment=tar_cpu_small), ONE intra-op thread + 1 loader worker,
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
carried=carry/tar_cpu_small.pt
start=()
if [ -e exp/tar_cpu_small/checkpoints/last.ckpt ]; then
    start=(ckpt_path=last)
elif [ -e "$carried" ]; then
    steps_done=$(.venv/bin/python -m recipes.carry steps "$carried")
    total=$(.venv/bin/python -c "from hydra import compose, initialize_config_dir; import os
with initialize_config_dir(os.path.abspath('conf'), version_base=None):
    print(compose('train', ['experiment=tar_cpu_small']).trainer.max_steps)")
    [ "$steps_done" -lt "$total" ] || { echo "$carried: $steps_done of $total steps done, nothing left to train"; exit 0; }
    start=(init_from="$carried" '~init_from_only' optim.scheduler.offset="$steps_done" optim.scheduler.warmup_steps=200
           trainer.max_steps=$((total - steps_done)))
fi
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train experiment=tar_cpu_small \
    trainer.enable_progress_bar=false "${start[@]}" "$@"
