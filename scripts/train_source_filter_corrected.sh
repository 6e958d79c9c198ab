#!/usr/bin/env bash
# Issue 31, vocoder: the shipped source-filter vocoder fine-tuned with its magnitude correction
# (vocoder=source_filter_corrected; tts/vocoder/source_filter.py "Magnitude correction": the correction starts
# as the identity, so the run starts at the shipped vocoder's quality), on a corpus, ONE thread, no GAN,
# checkpoints every 1000 batches in exp/vocoder_sf_corrected_<corpus>/checkpoints/; run again to resume.
# EMA=0.999: the checkpoints hold the moving average of the weights (ema_decay), in exp/vocoder_sf_corrected_ema_<corpus>/:
# the raw weights' quality swung by ~0.15 DistillMOS from one checkpoint to the next (docs/results/vocoder_headroom).
#   CORPUS=slt EMA=0.999 nohup scripts/train_source_filter_corrected.sh > /tmp/sf_corrected.log 2>&1 &
# joe, from the source-filter vocoder fine-tuned on joe (scripts/train_source_filter_joe.sh):
#   CORPUS=joe EMA=0.999 INIT=exp/vocoder_sf_joe/checkpoints/step0002000.ckpt nohup scripts/train_source_filter_corrected.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${CORPUS:-slt}
ema=${EMA:-}
name=vocoder_sf_corrected${ema:+_ema}_$corpus
extra=()
[ -n "$ema" ] && extra=(ema_decay="$ema")
start=(init_from="${INIT:-checkpoints/vocoder/source_filter.pt}")  # INIT: another plain vocoder to start from
[ -e "exp/$name/checkpoints/last.ckpt" ] && start=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train_vocoder \
    vocoder=source_filter_corrected data="$corpus" name="$name" threads=1 trainer=cpu trainer.enable_progress_bar=false \
    trainer.log_every_n_steps=100 vocoder_data.segment_frames=48 vocoder_data.batch_size=16 vocoder_data.num_workers=1 \
    frame_vocoder.optimizer.lr=5.0e-4 trainer.max_steps=20000 trainer.val_check_interval=1000 \
    checkpoint_every_n_steps=1000 keep_checkpoints=10 "${extra[@]}" "${start[@]}" "$@"
