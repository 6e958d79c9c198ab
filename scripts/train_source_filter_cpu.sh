#!/usr/bin/env bash
# The shipped source-filter vocoder's CPU training (no GAN), resumable: run again after a kill.
# 1 intra-op thread + 1 loader worker, so that a second job can share a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
resume=()
[ -e exp/vocoder_source_filter/checkpoints/last.ckpt ] && resume=(ckpt_path=last)
OMP_WAIT_POLICY=PASSIVE exec .venv/bin/python -m recipes.train_vocoder vocoder=source_filter data=slt \
    name=vocoder_source_filter threads=1 trainer=cpu trainer.enable_progress_bar=false trainer.log_every_n_steps=100 \
    vocoder_data.segment_frames=48 vocoder_data.batch_size=16 vocoder_data.num_workers=1 \
    trainer.max_steps=48000 trainer.val_check_interval=1000 checkpoint_every_n_steps=1000 "${resume[@]}" "$@"
