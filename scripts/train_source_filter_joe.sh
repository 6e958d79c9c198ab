#!/usr/bin/env bash
# Issue 31: a source-filter vocoder for joe alone, fine-tuned from the shipped slt one (INIT= another vocoder
# checkpoint; an earlier two-voice run, lost with its machine, gave joe's copy synthesis 2.82 DistillMOS after
# 30000 steps against its recordings' 4.16): does a per-voice vocoder (1.9 MB fp16, 1.0 MB int8) close the gap,
# and is its phase good enough for a magnitude correction to finish the job?  6000 steps, ONE thread, checkpoints
# every 1000 steps in exp/vocoder_sf_joe/checkpoints/; run it again to resume from last.ckpt.  Score one with
#   python -m recipes.bench.vocoder_headroom --data data/joe --split val --vocoder exp/vocoder_sf_joe/checkpoints/step0001000.ckpt
#   nohup scripts/train_source_filter_joe.sh > /tmp/sf_joe.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
start=(init_from="${INIT:-checkpoints/vocoder/source_filter.pt}")
[ -e exp/vocoder_sf_joe/checkpoints/last.ckpt ] && start=(ckpt_path=last)
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE exec nice -n 10 .venv/bin/python -m recipes.train_vocoder vocoder=source_filter \
    data=joe name=vocoder_sf_joe threads=1 trainer=cpu trainer.enable_progress_bar=false trainer.log_every_n_steps=100 \
    vocoder_data.segment_frames=48 vocoder_data.batch_size=16 vocoder_data.num_workers=1 \
    trainer.max_steps=6000 trainer.val_check_interval=1000 checkpoint_every_n_steps=1000 keep_checkpoints=6 "${start[@]}" "$@"
