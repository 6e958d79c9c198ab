#!/usr/bin/env bash
# Issue 31: both voices on their corpora's held-out test sentences (first LIMIT=40), beside their recordings
# and their copy-synthesis ceiling, through one vocoder (VOC, default: the shipped one).  Writes
# exp/eval/voices_joe_<tag>/ and exp/eval/voices_slt_<tag>/ (report.md / report.json); reruns skip made wavs.
#   VOC=exp/vocoder_sf_voices/checkpoints/step0032000.ckpt JOE=exp/nar_joe/checkpoints/step0003600.ckpt \
#       TAG=s32k scripts/eval_voices.sh
# ONE thread, nice 5.
set -euo pipefail
cd "$(dirname "$0")/.."
voc=${VOC:-source-filter}
joe=${JOE:-checkpoints/nar_joe.pt}
slt=${SLT:-checkpoints/nar.pt}
tag=${TAG:-shipped}
limit=${LIMIT:-40}
run() { OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python -m recipes.evaluate threads=1 limit="$limit" metrics.mcd=false "$@"; }
run data_root=data/joe out_dir="exp/eval/voices_joe_$tag" '~systems.ar' '~systems.nar' '~systems.copy_griffin_lim' \
    "+systems.copy_sf={kind:copy,vocoder:$voc}" \
    "+systems.joe_k2={kind:acoustic,checkpoint:$joe,vocoder:$voc,refine_steps:2,temperature:0.667}" \
    "+systems.joe_k4={kind:acoustic,checkpoint:$joe,vocoder:$voc,refine_steps:4,temperature:1.0}" \
    "+systems.slt_on_joe_text={kind:acoustic,checkpoint:$slt,vocoder:$voc}"
run data_root=data/slt out_dir="exp/eval/voices_slt_$tag" '~systems.ar' '~systems.nar' '~systems.copy_griffin_lim' \
    "+systems.copy_sf={kind:copy,vocoder:$voc}" \
    "+systems.slt={kind:acoustic,checkpoint:$slt,vocoder:$voc}" \
    "+systems.joe_on_slt_text={kind:acoustic,checkpoint:$joe,vocoder:$voc,refine_steps:2,temperature:0.667}"
