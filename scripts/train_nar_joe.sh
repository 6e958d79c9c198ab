#!/usr/bin/env bash
# Issue 31's joe voice (experiment=nar_joe): the slt block model fine-tuned on data/joe with Piper's
# durations, ONE thread, checkpoints every 100 steps (~8 min) in exp/nar_joe/checkpoints/.  Resumable: run
# it again after a kill (or in a later session, with exp/ kept) and it continues from last.ckpt.
# Needs: python -m data_prep.piper_corpus --out data/joe --hours 6; python -m data_prep.features --data data/joe;
#        python -m recipes.extract_durations source=piper name=piper data_root=data/joe
#   nohup scripts/train_nar_joe.sh > /tmp/nar_joe.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
resume=()
[ -e exp/nar_joe/checkpoints/last.ckpt ] && resume=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train experiment=nar_joe \
    trainer.enable_progress_bar=false "${resume[@]}" "$@"
