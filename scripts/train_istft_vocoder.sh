#!/usr/bin/env bash
# Issue 31, vocoder: the iSTFT-head vocoder (conf/vocoder/istft.yaml, Vocos style) on a corpus, adversarial from
# the start with the light discriminator, ONE thread, checkpoints every 1000 batches (2000 optimizer steps) in
# exp/vocoder_istft_<corpus>/checkpoints/; run it again to resume from last.ckpt.  Loss weights as Vocos
# (mel L1 x 45, feature matching x 2, LSGAN x 1) plus the multi-resolution STFT term of the light recipe.
#   CORPUS=slt nohup scripts/train_istft_vocoder.sh > /tmp/istft_slt.log 2>&1 &
# Score a checkpoint's copy synthesis against the recordings and the source-filter vocoder:
#   python -m recipes.evaluate ... '+systems.copy_istft={kind:copy,vocoder:exp/vocoder_istft_slt/checkpoints/last.ckpt}'
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${CORPUS:-slt}
resume=()
[ -e "exp/vocoder_istft_$corpus/checkpoints/last.ckpt" ] && resume=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train_vocoder vocoder=istft \
    sf_discriminator=light data="$corpus" name="vocoder_istft_$corpus" threads=1 trainer=cpu \
    trainer.enable_progress_bar=false trainer.log_every_n_steps=100 \
    vocoder_data.segment_frames=48 vocoder_data.batch_size=16 vocoder_data.num_workers=1 \
    source_filter.optimizer.lr=5.0e-4 source_filter.discriminator_optimizer.lr=5.0e-4 \
    source_filter.loss.mel_weight=45.0 source_filter.loss.feature_weight=2.0 source_filter.loss.adversarial_weight=1.0 \
    trainer.max_steps=200000 trainer.val_check_interval=1000 checkpoint_every_n_steps=2000 keep_checkpoints=4 \
    "${resume[@]}" "$@"
