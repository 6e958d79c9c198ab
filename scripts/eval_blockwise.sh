#!/usr/bin/env bash
# Issue 22's curve, quality half: the block-wise NAR (checkpoints/nar_block.pt) at B = 8, 16, 32, 64 and the
# whole utterance beside the parallel NAR (checkpoints/nar.pt) and the AR (checkpoints/ar.pt), all through the
# default source-filter vocoder with the shipped controls (K = 2, temperature 0.667), on the 100 held-out test
# sentences, one thread per run.  Scoring (Whisper, WORLD, DistillMOS) takes ~7-11 s an utterance on a loaded
# 2-core machine, so the systems are scored by four runs at once (the wavs of a system are made once, under
# exp/eval/blockwise/, and linked into the run that scores it).  Resumable (existing wavs are kept).
# Speed half: python -m recipes.benchmark blocks (docs/results/blockwise/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
evaluate() { .venv/bin/python -m recipes.evaluate '~systems.ground_truth' '~systems.copy_griffin_lim' "$@" threads=1; }
block='{kind:acoustic,checkpoint:checkpoints/nar_block.pt,vocoder:source-filter'
nar=(systems.nar.checkpoint=checkpoints/nar.pt systems.nar.vocoder=source-filter systems.nar.nar_ks=null)
# 1. synthesis of every NAR system (cheap), in one folder
evaluate '~systems.ar' "${nar[@]}" "+systems.nar_block=$block,nar_bs:[8,16,32,64,0]}" name=blockwise \
    metrics.asr=false metrics.mcd=false metrics.f0=false metrics.mos=false
# 2. scoring, four runs at once
link() { mkdir -p "exp/eval/$1"; for s in "${@:2}"; do ln -sfn "../blockwise/$s" "exp/eval/$1/$s"; done; }
link blockwise_a nar_block_b8 nar_block_b16
link blockwise_b nar_block_b32 nar_block_b64
link blockwise_c nar nar_block_bwhole
evaluate '~systems.ar' '~systems.nar' "+systems.nar_block=$block,nar_bs:[8,16]}" name=blockwise_a &
evaluate '~systems.ar' '~systems.nar' "+systems.nar_block=$block,nar_bs:[32,64]}" name=blockwise_b &
evaluate '~systems.ar' "${nar[@]}" "+systems.nar_block=$block,nar_bs:[0]}" name=blockwise_c &
evaluate '~systems.nar' systems.ar.checkpoint=checkpoints/ar.pt systems.ar.vocoder=source-filter name=blockwise_ar &
wait
