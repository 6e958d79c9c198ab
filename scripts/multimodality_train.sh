#!/usr/bin/env bash
# The multimodality lab's trainings (docs/results/multimodality), resumable: run again after a kill and
# each step picks up where it stopped (corpus and features skip finished utterances, trainings resume
# from last.ckpt, finished trainings are skipped).  Two lanes, one thread each, so they share 2 cores:
#   scripts/multimodality_train.sh corpus        # the varied corpus + features + Festival durations
#   scripts/multimodality_train.sh ar            # lane 1: AR, then its durations, then the distilled NAR
#   scripts/multimodality_train.sh nar           # lane 2: NAR + refiner on Festival durations
#   scripts/multimodality_train.sh block         # lane 2, after nar: the block-wise NAR (issue 22)
#   scripts/multimodality_train.sh kd            # lane 1, after ar: the NAR on the teacher's own speech
#   scripts/multimodality_train.sh aligner       # the learned aligner, its durations, the NAR on them (issue 31)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
PY=.venv/bin/python
DATA=data/slt_varied

# mm_ar: the teacher of mm_nar_distilled and mm_nar_kd.  A machine without its run takes the carried weights
# (carry/mm_ar.pt, fp16, committed: `python -m recipes.carry save exp/mm_ar carry/mm_ar.pt`) and does not retrain it.
TEACHER=exp/mm_ar/checkpoints/last.ckpt
[ ! -e "$TEACHER" ] && [ -e carry/mm_ar.pt ] && TEACHER=carry/mm_ar.pt

train() {  # train EXPERIMENT: resume if a run exists, skip if it reached max_steps
    local name=$1; shift
    local resume=()
    [ -e "exp/$name/checkpoints/last.ckpt" ] && resume=(ckpt_path=last)
    [ -e "exp/$name/DONE" ] && { echo "$name: done"; return 0; }
    $PY -m recipes.train "experiment=$name" trainer.enable_progress_bar=false trainer.log_every_n_steps=50 \
        "${resume[@]}" "$@"
    touch "exp/$name/DONE"
}

# Durations are paired with the tokens of the current text frontend: made again (seconds for Festival's,
# minutes for the teacher's) before every (re)start, so a changed normaliser never leaves them stale.
festival_durations() { $PY -m recipes.extract_durations source=festival name=festival data_root=$DATA; }
teacher_durations() {  # teacher_durations DATA_ROOT [OVERRIDE...]: the teacher's alignment of DATA_ROOT
    local root=$1; shift
    $PY -m recipes.extract_durations checkpoint=$TEACHER data_root=$root name=mm_ar_teacher threads=1 "$@"
}

case "${1:-}" in
  corpus)
    $PY -m data_prep.festival_corpus --n 1500 --out $DATA --jobs 2 --prosody-variation 3 --seed 0
    $PY -m data_prep.features --data $DATA --jobs 2
    festival_durations
    $PY -m data_prep.variability --data $DATA --out docs/results/multimodality/variability.json ;;
  ar)
    [ "$TEACHER" = carry/mm_ar.pt ] || train mm_ar
    teacher_durations $DATA
    train mm_nar_distilled ;;
  nar)
    festival_durations
    train mm_nar ;;
  kd)
    # sequence-level distillation: the mm_ar teacher speaks each training text (its mels are the targets);
    # the distilled corpus has no test split, so only train and val get durations
    $PY -m data_prep.distilled_corpus --teacher $TEACHER --src $DATA --out ${DATA}_kd
    teacher_durations ${DATA}_kd "splits=[train,val]"
    train mm_nar_kd ;;
  aligner)
    # the unsupervised aligner on the varied corpus (1 000 steps: docs/results/durations_aligner), its durations
    # (every token at least one frame), then the NAR on them
    train aligner_varied
    $PY -m recipes.extract_durations source=teacher checkpoint=exp/aligner_varied/checkpoints/last.ckpt \
        data_root=$DATA name=aligner max_skip=0 threads=1
    train mm_nar_aligner ;;
  block)
    festival_durations
    train mm_nar_block ;;
  *) echo "usage: $0 corpus|ar|nar|block|kd|aligner" >&2; exit 2 ;;
esac
