#!/usr/bin/env bash
# Issue 22's curve, quality half: the block-wise NAR (checkpoints/nar_block.pt) at B = 8, 16, 32, 64 and the
# whole utterance beside the parallel NAR (checkpoints/nar.pt) and the AR (checkpoints/ar.pt), all through the
# default source-filter vocoder with the shipped controls (K = 2, temperature 0.667), on the 100 held-out test
# sentences, one thread.  Two runs, so that the NAR systems' report exists even if the AR's is still running.
# Resumable (rerun: existing wavs are kept).  Speed half: python -m tts.benchmark blocks (docs/results/blockwise).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
.venv/bin/python -m recipes.evaluate '~systems.ground_truth' '~systems.copy_griffin_lim' '~systems.ar' \
    systems.nar.checkpoint=checkpoints/nar.pt systems.nar.vocoder=source-filter systems.nar.nar_ks=null \
    '+systems.nar_block={kind:acoustic,checkpoint:checkpoints/nar_block.pt,vocoder:source-filter,nar_bs:[8,16,32,64,0]}' \
    name=blockwise threads=1
.venv/bin/python -m recipes.evaluate '~systems.ground_truth' '~systems.copy_griffin_lim' '~systems.nar' \
    systems.ar.checkpoint=checkpoints/ar.pt systems.ar.vocoder=source-filter name=blockwise_ar threads=1
