#!/usr/bin/env bash
# Issue 31, vocoder: the iSTFT-head vocoder (conf/vocoder/istft.yaml, Vocos style) on a corpus, ONE thread.
# Two stages, as Parallel WaveGAN's discriminator_train_start_steps (a GAN batch costs ~10-30x a generator-only
# one on this CPU: the spectrogram discriminator's 2-D convolutions, measured at batch 16 x 48 frames, one
# thread: generator forward+backward 0.6 s, a discriminator step 4-16 s):
#   stage 1 (default): multi-resolution STFT + mel L1 + the anti-wrapped phase losses of the parallel phase head
#     (APNet; PHASE_WEIGHT, default 1; 0 = spectral losses only), exp/vocoder_istft_<corpus>[_<extra>]/, 40k batches;
#   stage 2 (GAN=1): from stage 1's last.ckpt, + the light discriminator (16 channels per spectrogram
#     resolution), LSGAN x 1 + feature matching x 2, exp/vocoder_istft_<corpus>_gan/.
# Checkpoints every 1000 batches; run it again to resume from last.ckpt.
# EXTRA=slt adds that corpus's train split (one vocoder for both voices; validation stays on CORPUS's).
#   CORPUS=joe EXTRA=slt nohup scripts/train_istft_vocoder.sh > /tmp/istft_joe_slt.log 2>&1 &
# Score a checkpoint's copy synthesis against the recordings and the source-filter vocoder:
#   python -m recipes.evaluate ... '+systems.copy_istft={kind:copy,vocoder:exp/vocoder_istft_slt/checkpoints/last.ckpt}'
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${CORPUS:-slt}
extra=${EXTRA:-}
name=vocoder_istft_$corpus${extra:+_$extra}
data=(data="$corpus" frame_vocoder.loss.phase_weight="${PHASE_WEIGHT:-1.0}")
[ -n "$extra" ] && data+=("+vocoder_data.extra_roots=[data/$extra]")
stage=(trainer.max_steps=40000 trainer.val_check_interval=1000 checkpoint_every_n_steps=1000)
start=()
if [ "${GAN:-0}" = 1 ]; then
    start=(init_from="exp/$name/checkpoints/last.ckpt")
    name=${name}_gan
    # optimizer steps = 2 x batches with a discriminator
    stage=(sf_discriminator=light frame_vocoder.discriminator.spectrogram_channels=16
           frame_vocoder.discriminator_optimizer.lr=2.0e-4 frame_vocoder.loss.feature_weight=2.0
           trainer.max_steps=40000 trainer.val_check_interval=1000 checkpoint_every_n_steps=2000)
fi
[ -e "exp/$name/checkpoints/last.ckpt" ] && start=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train_vocoder vocoder=istft \
    "${data[@]}" name="$name" threads=1 trainer=cpu trainer.enable_progress_bar=false trainer.log_every_n_steps=100 \
    vocoder_data.segment_frames=48 vocoder_data.batch_size=16 vocoder_data.num_workers=1 \
    frame_vocoder.optimizer.lr=5.0e-4 keep_checkpoints=10 "${stage[@]}" "${start[@]}" "$@"
