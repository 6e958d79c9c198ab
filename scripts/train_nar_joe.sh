#!/usr/bin/env bash
# Issue 31's joe voice (experiment=nar_joe): the slt block model fine-tuned on data/joe with Piper's
# durations, ONE thread, checkpoints every 100 steps (~8 min) in exp/nar_joe/checkpoints/.  Resumable: run
# it again after a kill and it continues from last.ckpt; on another machine, from the carried weights.
# Needs: python -m data_prep.piper_corpus --out data/joe --hours 6; python -m data_prep.features --data data/joe;
#        python -m recipes.extract_durations source=piper name=piper data_root=data/joe
#   nohup scripts/train_nar_joe.sh > /tmp/nar_joe.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
# ckpt_path=last, or the warm start from carry/nar_joe.pt (`python -m recipes.carry save exp/nar_joe
# carry/nar_joe.pt` at a session's end, committed) for the steps left, or nothing (recipes.carry start)
start=$(.venv/bin/python -m recipes.carry start nar_joe "$@") || { [ $? -eq 3 ] && exit 0; exit 1; }
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train experiment=nar_joe \
    trainer.enable_progress_bar=false $start "$@"
