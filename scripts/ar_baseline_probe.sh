#!/usr/bin/env bash
# Convergence probe of issue 34's AR baseline: one checkpoint speaks the first 8 val sentences
# (`split=val limit=8`, as the stage records of checkpoints/ar.pt) through Griffin-Lim, the Whisper tiny.en
# judge scores them; prints and appends one row to exp/ar_baseline/probe.tsv: run step, total steps (with
# those behind the warm start), CER, WER, AR failures (any / no stop / skip / repeat / low coverage),
# sentences missing a word, missing their LAST word (a stop token cutting the end), mean length ratio.
# ONE thread, nice 10, about 1-2 minutes: safe to run beside the training.
#   scripts/ar_baseline_probe.sh exp/ar_baseline/checkpoints/step0001000.ckpt
#   scripts/ar_baseline_probe.sh checkpoints/ar.pt            # the starting point
#   LIMIT=30 VOCODER=source-filter scripts/ar_baseline_probe.sh CKPT   # more sentences / the default vocoder
#   WINDOW=1,3 scripts/ar_baseline_probe.sh CKPT    # a Transformer AR decoded with its attention window (back, ahead
#       tokens; TransformerAR's attention_window): a copy of CKPT with the window in its model config, label *_win1-3
# Audio and report: exp/ar_baseline/probe/<label>/ (label = checkpoint file name + vocoder + limit).
set -euo pipefail
cd "$(dirname "$0")/.."
ckpt=${1:?usage: scripts/ar_baseline_probe.sh CHECKPOINT [hydra overrides]}
shift
limit=${LIMIT:-8}
vocoder=${VOCODER:-griffin-lim}
[ -f "$ckpt" ] || { echo "no checkpoint $ckpt" >&2; exit 2; }
if [ -n "${WINDOW:-}" ]; then
    windowed="exp/ar_baseline/probe/windowed/$(basename "$ckpt" | sed 's/\.[^.]*$//')_win${WINDOW/,/-}.ckpt"
    mkdir -p "$(dirname "$windowed")"
    .venv/bin/python - "$ckpt" "$windowed" "$WINDOW" <<'EOF'
import sys
from tts.checkpoint import atomic_torch_save, read_raw
from tts.models.transformer_ar import check_attention_window

src, dst, window = sys.argv[1:]
raw = read_raw(src)
model = raw["tts"]["model_config"]
if not str(model.get("_target_", "")).endswith("TransformerAR"):
    sys.exit(f"WINDOW is for a Transformer AR checkpoint; {src} holds {model.get('_target_')}")
model["attention_window"] = list(check_attention_window([int(w) for w in window.split(",")]))
atomic_torch_save(raw, dst)
EOF
    ckpt=$windowed
fi
label="$(basename "$ckpt" | sed 's/\.[^.]*$//')_${vocoder}_val${limit}"
[ "$(basename "$ckpt")" = last.ckpt ] && label="last_$(date +%Y%m%d_%H%M%S)_${vocoder}_val${limit}"
out=exp/ar_baseline/probe/$label
mkdir -p "$out"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
nice -n 10 .venv/bin/python -m recipes.evaluate split=val limit="$limit" threads=1 \
    '~systems.nar' '~systems.copy_griffin_lim' "systems.ar.checkpoint=$ckpt" "systems.ar.vocoder=$vocoder" \
    metrics.mcd=false metrics.f0=false metrics.mos=false out_dir="$out" "$@" > "$out.log" 2>&1 \
    || { tail -30 "$out.log" >&2; exit 1; }
nice -n 10 .venv/bin/python - "$ckpt" "$out/report.json" exp/ar_baseline/probe.tsv "$label" <<'EOF'
import json, re, sys
from pathlib import Path
from tts.checkpoint import global_step, read_raw

ckpt, report, table, label = sys.argv[1:]
raw = read_raw(ckpt)
step = int(global_step(raw) or 0)
before = int((raw["tts"].get("info") or {}).get("steps_before") or 0)
r = json.loads(Path(report).read_text())
rows = r["utterances"]["ar"]
n = len(rows)
def count(key):
    return sum(bool(u.get(key)) for u in rows)
def end_cut(u):  # the judge missed the sentence's last word
    words = re.findall(r"[a-z']+", u["text"].lower())
    return bool(words) and words[-1] in (u.get("missing_words") or [])
corpus = (r.get("corpus_asr") or {}).get("ar") or {}
cer = corpus.get("cer", sum(u["cer"] for u in rows) / n)
wer = corpus.get("wer", sum(u["wer"] for u in rows) / n)
gt = (r.get("corpus_asr") or {}).get("ground_truth") or {}
row = {"label": label, "run_step": step, "total_steps": before + step, "n": n, "cer": round(cer, 4),
       "wer": round(wer, 4), "gt_cer": round(gt.get("cer", float("nan")), 4), "ar_failure": count("ar_failure"),
       "no_stop": count("ar_no_stop"), "skip": count("ar_skip"), "repeat": count("ar_repeat"),
       "low_coverage": count("ar_low_coverage"), "missing_word": count("has_missing_words"),
       "end_cut": sum(end_cut(u) for u in rows),
       "length_ratio": round(sum(u["length_ratio"] for u in rows) / n, 3)}
path = Path(table)
path.parent.mkdir(parents=True, exist_ok=True)
new = not path.exists()
with path.open("a") as f:
    if new:
        f.write("\t".join(row) + "\n")
    f.write("\t".join(str(v) for v in row.values()) + "\n")
print("\t".join(f"{k}={v}" for k, v in row.items()))
EOF
