#!/usr/bin/env bash
# Issue 31: ONE source-filter vocoder for both voices (joe and slt), fine-tuned from the shipped slt vocoder
# on the two corpora's train splits together (vocoder_data.extra_roots).  The slt-only vocoder gives joe's
# recordings DistillMOS 1.92 in copy synthesis against their own 4.16 (exp/eval/joe_copy_sf, 40 test
# sentences): it never heard a male voice.  ONE thread, checkpoints every 1000 steps in
# exp/vocoder_sf_voices/checkpoints/; run it again to resume from last.ckpt.
#   nohup scripts/train_source_filter_voices.sh > /tmp/sf_voices.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
resume=(init_from=checkpoints/vocoder/source_filter.pt)
[ -e exp/vocoder_sf_voices/checkpoints/last.ckpt ] && resume=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train_vocoder vocoder=source_filter \
    data=joe '+vocoder_data.extra_roots=[data/slt]' name=vocoder_sf_voices threads=1 trainer=cpu \
    trainer.enable_progress_bar=false trainer.log_every_n_steps=100 \
    vocoder_data.segment_frames=48 vocoder_data.batch_size=16 vocoder_data.num_workers=1 \
    trainer.max_steps=24000 trainer.val_check_interval=1000 checkpoint_every_n_steps=1000 "${resume[@]}" "$@"
