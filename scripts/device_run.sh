#!/usr/bin/env bash
# One prepared run on a lent GPU machine (the `device` tool; nothing in the project depends on it):
#   1. AR and NAR, 200 training steps each at bf16-mixed on the small acoustic shard: steps per second;
#   2. three vocoder trainings at once, each for $MINUTES minutes on the vocoder shard:
#      sf_gpu      source-filter, no GAN, from scratch (batch 64)
#      sf_gpu_gan  source-filter, no GAN for the first 40 %, then the adversarial stage (light discriminator)
#      hifigan_gan HiFi-GAN V3's GAN phase, warm-started from the shipped generator (checkpoints/vocoder/hifigan_v3.pt)
#   3. fp16 exports of the three vocoders and a JSON summary of the logged metrics, into $OUT.
# Shards: python scripts/make_device_shard.py (see its docstring).  Missing wheels travel in .whl/.
# Local smoke test on CPU:  ACCEL=cpu MINUTES=0.3 STEPS=4 OUT=/tmp/devout bash scripts/device_run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ACCEL=${ACCEL:-gpu}
MINUTES=${MINUTES:-6}
STEPS=${STEPS:-200}
PY=${PY:-python3}
OUT=${OUT:-/tmp/devout}
mkdir -p "$OUT" /tmp/exp
if [ -d .whl ] && [ "$ACCEL" = gpu ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 HYDRA_FULL_ERROR=1
$PY -c "import torch, torchaudio, lightning, hydra, soundfile; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" || exit 1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
hms() { local s; s=$($PY -c "print(int(float('$1') * 60))"); printf '00:00:%02d:%02d' $((s / 60)) $((s % 60)); }
common_tts="data.root=gpu_shard/tts data.num_workers=4 trainer.accelerator=$ACCEL trainer.devices=1 trainer.max_steps=$STEPS trainer.enable_progress_bar=false trainer.log_every_n_steps=10 trainer.val_check_interval=100000 checkpoint_every_n_steps=100000 threads=4"
[ "$ACCEL" = gpu ] && common_tts="$common_tts trainer.precision=bf16-mixed"
for exp in ar_cpu_small nar_cpu_small; do
  extra=""; [ $exp = nar_cpu_small ] && extra="data.durations_dir=gpu_shard/tts/durations/festival"
  /usr/bin/time -f "$exp wall %e s" $PY -m recipes.train experiment=$exp name=$exp exp_dir=/tmp/exp/$exp $common_tts $extra > "$OUT/$exp.log" 2>&1 || tail -30 "$OUT/$exp.log"
  tail -1 "$OUT/$exp.log"
done
[ "${SKIP_VOCODERS:-0}" = 1 ] && { $PY scripts/device_summary.py /tmp/exp "$OUT"; exit 0; }
common_voc="data.root=gpu_shard/slt vocoder_data.cache_in_memory=true vocoder_data.num_workers=4 vocoder_data.max_val_utterances=4 trainer.accelerator=$ACCEL trainer.devices=1 trainer.enable_progress_bar=false trainer.log_every_n_steps=50 keep_checkpoints=1 threads=4"
sf="vocoder=source_filter vocoder_data.segment_frames=48 vocoder_data.batch_size=64 trainer.val_check_interval=500 checkpoint_every_n_steps=500"
$PY -m recipes.train_vocoder $sf name=sf_gpu exp_dir=/tmp/exp/sf_gpu +trainer.max_time=$(hms "$MINUTES") $common_voc > "$OUT/sf_gpu.log" 2>&1 &
p1=$!
( $PY -m recipes.train_vocoder $sf name=sf_gpu_pre exp_dir=/tmp/exp/sf_gpu_pre +trainer.max_time=$(hms "$($PY -c "print($MINUTES * 0.4)")") $common_voc \
  && $PY -m recipes.train_vocoder $sf sf_discriminator=light name=sf_gpu_gan exp_dir=/tmp/exp/sf_gpu_gan \
       frame_vocoder.optimizer.lr=2.0e-4 frame_vocoder.loss.stft_weight=2.5 frame_vocoder.loss.mel_weight=10 \
       frame_vocoder.loss.feature_weight=10 \
       init_from=/tmp/exp/sf_gpu_pre/checkpoints/last.ckpt vocoder_data.batch_size=32 checkpoint_every_n_steps=1000 \
       trainer.val_check_interval=500 +trainer.max_time=$(hms "$($PY -c "print($MINUTES * 0.6)")") $common_voc ) > "$OUT/sf_gpu_gan.log" 2>&1 &
p2=$!
$PY -m recipes.train_vocoder vocoder=hifigan_v3 name=hifigan_gan exp_dir=/tmp/exp/hifigan_gan init_from=checkpoints/vocoder/hifigan_v3.pt \
  vocoder_data.segment_frames=32 vocoder_data.batch_size=16 trainer.val_check_interval=500 checkpoint_every_n_steps=1000 \
  +trainer.max_time=$(hms "$MINUTES") $common_voc > "$OUT/hifigan_gan.log" 2>&1 &
p3=$!
wait $p1; echo "sf_gpu exit $?"; wait $p2; echo "sf_gpu_gan exit $?"; wait $p3; echo "hifigan_gan exit $?"
for f in sf_gpu sf_gpu_gan hifigan_gan; do grep -E "Error|error" "$OUT/$f.log" | tail -3; done
$PY scripts/device_summary.py /tmp/exp "$OUT"
ls -la "$OUT"
