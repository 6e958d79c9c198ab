#!/usr/bin/env bash
# Issue 34's distilled NAR, from a fresh machine to its checkpoint, resumable at every stage (run it again after
# a kill): the slt corpus (10 500 sentences and, since 2026-12-07, the short pool) and its features skip finished utterances, the shipped AR teacher
# (checkpoints/ar.pt) aligns data/slt (~25 min on 2 cores; utterances already aligned are skipped), then the
# experiment trains from last.ckpt, or from carry/EXPERIMENT.pt on another machine.
#   THREADS=2 nohup scripts/train_nar_teacher.sh > /tmp/nar_teacher.log 2>&1 &
# THREADS (default 2): one per core; 1 when another training shares the machine.
# EXPERIMENT (default nar_teacher): nar_teacher trains on the attention's own first boundary (data/slt/durations/
# ar_teacher, first_token_onset=false, as it was made), nar_teacher_onset on durations whose first token reaches
# into the speech (data/slt/durations/ar_teacher_onset; checkpoints/README.md, "The NAR distilled from the AR teacher"),
# nar_teacher_trim on the same durations with each utterance's leading pause cut (data.lead_pause_frames), 1000 steps
# fine-tuned from nar_teacher's weights (carry/nar_teacher.pt).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
EXPERIMENT=${EXPERIMENT:-nar_teacher}
case "$EXPERIMENT" in
    nar_teacher) durations=(first_token_onset=false) ;;
    nar_teacher_onset|nar_teacher_trim) durations=(name=ar_teacher_onset first_token_onset=true) ;;
    *) echo "EXPERIMENT must be nar_teacher, nar_teacher_onset or nar_teacher_trim, not $EXPERIMENT" >&2; exit 2 ;;
esac
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE
PY=".venv/bin/python"
DATA=data/slt
$PY -m data_prep.festival_corpus --n 10500 --short --out $DATA --jobs "$THREADS"
$PY -m data_prep.features --data $DATA --jobs "$THREADS"
$PY -m recipes.extract_durations checkpoint=checkpoints/ar.pt data_root=$DATA threads="$THREADS" "${durations[@]}"
start=$($PY -m recipes.carry start "$EXPERIMENT" "$@") || { [ $? -eq 3 ] && exit 0; exit 1; }
exec nice -n 10 $PY -m recipes.train experiment="$EXPERIMENT" threads="$THREADS" \
    trainer.enable_progress_bar=false $start "$@"
