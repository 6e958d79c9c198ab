#!/usr/bin/env bash
# Issue 34's distilled NAR, from a fresh machine to its checkpoint, resumable at every stage (run it again after
# a kill): the slt corpus (10 500 sentences) and its features skip finished utterances, the shipped AR teacher
# (checkpoints/ar.pt) aligns data/slt (~25 min on 2 cores; utterances already aligned are skipped), then
# experiment=nar_teacher trains from last.ckpt, or from carry/nar_teacher.pt on another machine.
#   THREADS=2 nohup scripts/train_nar_teacher.sh > /tmp/nar_teacher.log 2>&1 &
# THREADS (default 2): one per core; 1 when another training shares the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE
PY=".venv/bin/python"
DATA=data/slt
$PY -m data_prep.festival_corpus --n 10500 --out $DATA --jobs "$THREADS"
$PY -m data_prep.features --data $DATA --jobs "$THREADS"
$PY -m recipes.extract_durations checkpoint=checkpoints/ar.pt data_root=$DATA threads="$THREADS"
start=$($PY -m recipes.carry start nar_teacher "$@") || { [ $? -eq 3 ] && exit 0; exit 1; }
exec nice -n 10 $PY -m recipes.train experiment=nar_teacher threads="$THREADS" \
    trainer.enable_progress_bar=false $start "$@"
