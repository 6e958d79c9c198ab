"""The benchmark's report: plots and markdown (the JSON is written by recipes.bench.measure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from recipes.bench.texts import SENTENCES


# --------------------------------------------------------------------------------------------------
# plots and markdown
# --------------------------------------------------------------------------------------------------
def make_plots(result: dict[str, Any], mel_images: dict[str, torch.Tensor], out_dir: Path, mel_config) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = {}
    lengths = result["settings"]["lengths"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, per in result["mel_latency"].items():
        ax.plot(lengths, [per[str(n)]["median_s"] * 1000 for n in lengths], marker="o",
                label=name.upper().replace("NAR_K", "NAR K="))
    for name, peer in result["peers"].items():
        if peer.get("status") == "ok" and name.startswith("speechbrain"):
            ran = [n for n in lengths if str(n) in peer["per_length"]]  # a peer may fail at some lengths
            ax.plot(ran, [peer["per_length"][str(n)]["median_s"] * 1000 for n in ran], marker="x",
                    linestyle="--", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("input length (symbols)")
    ax.set_ylabel("mel generation time (ms, median)")
    title = "Mel-generation latency vs input length"
    if result["meta"]["speed_only"]:
        title += " (random weights: speed only)"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = out_dir / "latency_vs_length.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    plots["latency_vs_length"] = str(p)

    if "quality" in result:
        q = result["quality"]
        ks = sorted(q, key=lambda k: int(k))
        fig, ax = plt.subplots(figsize=(6, 4))
        metrics = sorted({m for k in ks for m in q[k]})
        # two y axes: intelligibility and spectral distance when present, else the first two metrics
        preferred = [m for m in ("cer", "mcd_db", "mcd") if m in metrics][:2]
        shown = preferred if len(preferred) == 2 else metrics[:2]
        axes = [ax] + [ax.twinx() for _ in shown[1:2]]
        for i, m in enumerate(shown):
            axes[i].plot([int(k) for k in ks], [q[k].get(m, float("nan")) for k in ks], marker="o",
                         color=f"C{i}", label=m)
            axes[i].set_ylabel(m, color=f"C{i}")
        ax.set_xlabel("refine steps K")
        ax.set_title("Quality vs K")
        fig.tight_layout()
        p = out_dir / "quality_vs_k.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        plots["quality_vs_k"] = str(p)

    if mel_images:
        fig, axes = plt.subplots(len(mel_images), 1, figsize=(8, 2.4 * len(mel_images)), squeeze=False)
        vmin = min(float(m.min()) for m in mel_images.values())
        vmax = max(float(m.max()) for m in mel_images.values())
        for ax, (name, mel) in zip(axes[:, 0], mel_images.items()):
            ax.imshow(mel.numpy(), origin="lower", aspect="auto", interpolation="nearest", vmin=vmin, vmax=vmax)
            ax.set_title(f"{name.upper().replace('NAR_K', 'NAR K=')}  ({mel.shape[1]} frames)", fontsize=9)
            ax.set_ylabel("mel bin")
        axes[-1, 0].set_xlabel(f"frame (hop {mel_config.hop_length})")
        fig.suptitle(f"\"{SENTENCES[0]}\"" + (" -- random weights" if result["meta"]["speed_only"] else ""),
                     fontsize=9)
        fig.tight_layout()
        p = out_dir / "mel_comparison.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        plots["mel_comparison"] = str(p)
    return plots


def _ms(x: float) -> str:
    return f"{x * 1000:.1f}"


def _num(x) -> str:
    """A metric for a table: 4 significant digits, blank when absent."""
    return "" if x is None else f"{x:.4g}" if isinstance(x, (int, float)) else str(x)


# peers timed text -> wave (the rest are SpeechBrain mel generators timed against our mel stage)
TEXT_TO_WAVE_PEERS = {"festival_slt": "Festival SLT HTS", "piper_joe_medium": "Piper joe-medium"}


def to_markdown(r: dict[str, Any]) -> str:
    m, s = r["meta"], r["settings"]
    lengths, names = s["lengths"], list(r["mel_latency"])
    mf = m["machine"]
    lines = ["# TTS benchmark", ""]
    if m["speed_only"]:
        which = ", ".join(k for k, v in m.get("random_models", {}).items() if v) or "some models"
        lines += [f"**RANDOM-WEIGHT MODELS ({which}) -- SPEED ONLY.** Output lengths are forced; their audio is noise.", ""]
    lines += [f"- command: `{m['command']}`", f"- started: {m['started']}",
              f"- machine: {mf['cpu_model']}, {mf['cpu_count']} CPUs, torch {mf['torch_version']} "
              f"({mf['torch_threads']} threads), device {mf['device']}"
              + (f" ({mf.get('cuda_device')})" if "cuda_device" in mf else ""),
              f"- load average at start: {', '.join(f'{x:.2f}' for x in mf['load_average_at_start'])}; "
              f"at end: {', '.join(f'{x:.2f}' for x in r['load_average_at_end'])}",
              f"- AR: {m['models']['ar']['source']} ({m['models']['ar']['params']/1e6:.2f} M params, "
              f"r={m['models']['ar']['reduction_factor']}, {m['models']['ar']['length_mode']})",
              f"- NAR: {m['models']['nar']['source']} ({m['models']['nar']['params']/1e6:.2f} M params, "
              f"{m['models']['nar']['length_mode']})",
              f"- vocoder: {m['models']['vocoder']['name']} ({m['models']['vocoder']['class']}, "
              f"{m['models']['vocoder']['params']/1e6:.2f} M params)",
              f"- statistic: median of {s['repeats']} runs after {s['warmup']} warm-up (latency repeats interleaved "
              "across systems); ratios from this run's medians"]
    lines += [f"- note: {n}" for n in m["notes"]]
    lines += ["", "## Mel-generation latency (ms) vs input length (symbols)", ""]
    ratio_names = list(r["ratios"])
    hdr = ["symbols", "frames"] + names + [k.replace("ar_over_", "AR/").replace("nar_k", "NAR-K") for k in ratio_names]
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for n in lengths:
        row = [str(n), str(r["mel_latency"][names[-1]][str(n)]["frames"])]
        row += [_ms(r["mel_latency"][k][str(n)]["median_s"]) for k in names]
        row += [f"{r['ratios'][k][str(n)]:.1f}x" for k in ratio_names]
        lines.append("| " + " | ".join(row) + " |")
    if not m["forced_length"]:
        lines += ["", "AR frames per length: " + ", ".join(
            f"{n}: {r['mel_latency']['ar'][str(n)]['frames']}" for n in lengths)]

    lines += ["", "## Vocoder time and end-to-end RTF (text frontend + mel + vocoder) / audio seconds", ""]
    hdr = ["symbols", "audio s", "vocoder ms", "vocoder RTF"] + [f"RTF {k}" for k in names]
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for n in lengths:
        v = r["vocoder"][names[-1]][str(n)]
        row = [str(n), f"{v['audio_s']:.2f}", _ms(v["median_s"]), f"{v['rtf']:.3f}"]
        row += [f"{r['end_to_end'][k][str(n)]['rtf']:.3f}" for k in names]
        lines.append("| " + " | ".join(row) + " |")

    lines += ["", "## First-audio latency (multi-sentence text, sentence by sentence)", "",
              "| system | first audio ms | all sentences ms | audio s |", "|---|---|---|---|"]
    for k, v in r["first_audio"].items():
        lines.append(f"| {k} | {_ms(v['first_audio_s'])} | {_ms(v['total_s'])} | {v['audio_s']:.2f} |")

    lines += ["", f"## Batch throughput ({s['batch_length']} symbols per utterance, mel + vocoder)", ""]
    hdr = ["system"] + [f"B={b} utt/s" for b in s["batch_sizes"]] + [f"B={b} audio-s/s" for b in s["batch_sizes"]]
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for k, per in r["batch_throughput"].items():
        row = [k] + [f"{per[str(b)]['utterances_per_s']:.2f}" for b in s["batch_sizes"]]
        row += [f"{per[str(b)]['audio_s_per_s']:.2f}" for b in s["batch_sizes"]]
        lines.append("| " + " | ".join(row) + " |")

    if r["peak_memory"]:
        lines += ["", f"## Peak memory (fresh subprocess per system, longest input {max(lengths)} symbols)", "",
                  "| system | RSS growth MiB | peak RSS MiB | cuda max alloc MiB |", "|---|---|---|---|"]
        for k, v in r["peak_memory"].items():
            if "error" in v:
                lines.append(f"| {k} | error: {v['error'][:80]} | | |")
            else:
                lines.append(f"| {k} | {v['rss_delta_mb']:.1f} | {v['rss_peak_mb']:.0f} | "
                             f"{v.get('cuda_max_allocated_mb', float('nan')):.1f} |")

    if r["peers"]:
        lines += ["", "## Peers (same run)", ""]
        for name, p in r["peers"].items():
            if p.get("status") != "ok":
                lines.append(f"- **{name}**: {p.get('status')} -- {p.get('reason')}")
                continue
            if name in TEXT_TO_WAVE_PEERS:  # whole text -> wave systems: RTF against our end-to-end RTF
                lines += [f"**{TEXT_TO_WAVE_PEERS[name]}** ({p['what']})", "",
                          "| symbols | wall ms | audio s | RTF | ours e2e RTF |", "|---|---|---|---|---|"]
                for n, v in p["per_length"].items():
                    ours = [x for kk, x in v.items() if kk.startswith("ours_e2e_rtf")][0]
                    lines.append(f"| {n} | {v['median_s']*1000:.0f} | {v['audio_s']:.2f} | {v['rtf']:.3f} | {ours:.3f} |")
            else:
                lines += ["", f"**{name}** ({p['params']/1e6:.2f} M params, size {p['size']}, random weights; "
                          f"{p['call']}) vs our {p['compared_with']}", "",
                          "| symbols | frames | peer ms | ours ms | ours/peer |", "|---|---|---|---|---|"]
                for n, v in p["per_length"].items():
                    ours = [x for kk, x in v.items() if kk.startswith("ours_") and kk.endswith("median_s")][0]
                    lines.append(f"| {n} | {v['frames']} | {_ms(v['median_s'])} | {_ms(ours)} | {v['ours_over_peer']:.2f} |")
                for n, why in p.get("failed_lengths", {}).items():
                    lines.append(f"| {n} | – | failed: {why[:120]} | – | – |")
            lines.append("")

    if "quality" in r:
        lines += ["", "## Quality vs K (from --quality)", "", "| K | " + " | ".join(
            sorted({mm for v in r["quality"].values() for mm in v})) + " |"]
        ms_ = sorted({mm for v in r["quality"].values() for mm in v})
        lines.append("|---|" + "---|" * len(ms_))
        for k in sorted(r["quality"], key=int):
            lines.append(f"| {k} | " + " | ".join(_num(r["quality"][k].get(mm)) for mm in ms_) + " |")
    lines += ["", "## Plots", ""] + [f"- {k}: `{v}`" for k, v in r["plots"].items()]
    return "\n".join(lines) + "\n"
