"""The benchmark run: mel latency, vocoder time, end-to-end RTF, first audio, batch throughput, peak memory."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from recipes.bench.memory import run_memory_probe_subprocess
from recipes.bench.peers import run_peers
from recipes.bench.report import make_plots, to_markdown
from recipes.bench.systems import (DEFAULT_FRAMES_PER_SYMBOL, System, build_random_checkpoint, build_vocoder,
                               is_random_checkpoint, n_params)
from recipes.bench.texts import FIRST_AUDIO_TEXT, SENTENCES, TextPool
from recipes.bench.timing import Bench, BenchmarkError, check_device, machine_facts, median
from tts.errors import CheckpointError
from tts.runtime.torch_engine import TorchEngine


# --------------------------------------------------------------------------------------------------
# quality vs K (read, never restated)
# --------------------------------------------------------------------------------------------------
QUALITY_METRICS = ("mcd_db", "log_f0_rmse_cents", "mel_s")  # per-utterance means taken from a report


def quality_from_report(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """`recipes.evaluate`'s report.json -> {K: {cer, wer, mcd_db, ...}} for its NAR systems.

    A NAR system is one with an integer `refine_steps` (the `nar_ks` expansion); CER / WER are the
    corpus-level figures (total edits / total reference length), the rest are per-utterance means.
    With several NAR checkpoints in one report the K would be ambiguous: that is an error.
    """
    out: dict[str, dict[str, float]] = {}
    owner: dict[str, str] = {}
    for name, spec in report.get("systems", {}).items():
        k = spec.get("refine_steps")
        if spec.get("kind") != "acoustic" or k is None:
            continue
        key = str(int(k))
        if key in out:
            raise BenchmarkError(f"--quality: systems {owner[key]!r} and {name!r} both have K={key}; "
                                 "evaluate one NAR checkpoint per report")
        owner[key] = name
        q: dict[str, float] = {}
        corpus = (report.get("corpus_asr") or {}).get(name) or {}
        for m in ("cer", "wer"):
            if corpus.get(m) is not None:
                q[m] = float(corpus[m])
        for m in QUALITY_METRICS:
            summ = report.get("summary", {}).get(name, {}).get(m)
            if summ is not None:
                q[m] = float(summ["mean"])
        out[key] = q
    if not out:
        raise BenchmarkError("--quality: the report has no NAR system with refine_steps (evaluate with nar_ks)")
    return out


def load_quality(path: str | Path) -> dict[str, dict[str, float]]:
    """--quality FILE: either {K: {metric: value}} or a `recipes.evaluate` report.json."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BenchmarkError(f"--quality {p}: cannot read JSON ({e})") from e
    if isinstance(data, dict) and "systems" in data and "summary" in data:
        return quality_from_report(data)
    if not (isinstance(data, dict) and all(isinstance(v, dict) for v in data.values())):
        raise BenchmarkError(f"--quality {p}: expected {{K: {{metric: value}}}} or a recipes.evaluate report.json")
    return data


# --------------------------------------------------------------------------------------------------
# defaults and sanity
# --------------------------------------------------------------------------------------------------
# Fewer frames per input symbol than this is not speech: an AR that stopped at once (a model that has not
# learned its stop token, or another corpus's) -- its "latency" would compare nothing with the NAR's.
MIN_FRAMES_PER_SYMBOL = 1.0


def shipped_model(kind: str) -> Path:
    from tts.runtime.release import shipped_checkpoint

    try:
        return shipped_checkpoint(kind)
    except CheckpointError as e:
        raise BenchmarkError(f"no --{kind} given and {e}; or pass --random for random models") from e


def shipped_vocoder() -> str:
    from tts.runtime.release import shipped_defaults

    try:
        return str(shipped_defaults()["vocoder"])
    except CheckpointError as e:
        raise BenchmarkError(f"no --vocoder given and {e}") from e


def too_short(system: System, symbols: int, frames: int) -> str | None:
    """A warning when a free-running system made too few frames for its input to be a fair comparison."""
    if system.forced or frames >= MIN_FRAMES_PER_SYMBOL * symbols:
        return None
    why = ("it stopped early: an AR whose stop token fires at once?" if system.kind == "ar"
           else "it predicted near-zero durations: a NAR trained too briefly?")
    return (f"WARNING: {system.name} made {frames} frames for {symbols} symbols ({why}); its latency at this "
            f"length compares no real speech")


# --------------------------------------------------------------------------------------------------
# the benchmark
# --------------------------------------------------------------------------------------------------
def run_benchmark(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    from tts import checkpoint

    check_device(args.device)
    torch.set_num_threads(args.threads)
    device = args.device
    facts = machine_facts(device, torch.get_num_threads())
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp_ctx = tempfile.TemporaryDirectory(prefix="tts-bench-")
    tmp = Path(tmp_ctx.name)
    bench = Bench(args, log)
    notes: list[str] = []

    # ---- models ---------------------------------------------------------------------------------
    paths = {"ar": args.ar, "nar": args.nar}
    sources = {}
    for kind, model_name in (("ar", "autoregressive"), ("nar", "nonautoregressive")):
        if paths[kind] is None and args.random:
            paths[kind] = str(build_random_checkpoint(tmp / f"{kind}.pt", model_name))
            sources[kind] = f"random weights at conf/model/{model_name}.yaml size (--random)"
        elif paths[kind] is None:  # the shipped model of that kind (checkpoints/ar.pt, checkpoints/nar.pt)
            paths[kind] = str(shipped_model(kind))
            sources[kind] = f"{paths[kind]} (shipped; --{kind} not given)"
            log(f"--{kind} not given: the shipped {paths[kind]}")
        else:
            sources[kind] = str(paths[kind])
    loaded = {k: checkpoint.load(p, device) for k, p in paths.items()}
    random_models = {k: is_random_checkpoint(v.meta) for k, v in loaded.items()}
    forced = args.frames_per_symbol is not None or any(random_models.values())
    fps = args.frames_per_symbol or DEFAULT_FRAMES_PER_SYMBOL
    speed_only = any(random_models.values())
    if speed_only:
        which = ", ".join(k for k, v in random_models.items() if v)
        notes.append(f"RANDOM-WEIGHT MODELS ({which}): their numbers measure SPEED ONLY (their audio is noise).")
    if forced:
        notes.append(f"Output length forced to round(symbols x {fps:g}) frames for every system "
                     "(NAR: fixed durations; AR: max_decoder_steps, stop token disabled).")
    else:
        notes.append("Trained models: AR stops by itself, NAR uses its predicted durations (frames recorded).")
    mel_config = loaded["nar"].mel_config
    loaded["ar"].mel_config.check_compatible(mel_config, "AR checkpoint", "NAR checkpoint")
    frontend = loaded["nar"].frontend()
    pool = TextPool(frontend)
    if args.vocoder is None:  # the shipped voice's vocoder (checkpoints/default.json)
        args.vocoder = shipped_vocoder()
        log(f"--vocoder not given: the shipped default, {args.vocoder}")
    vocoder = build_vocoder(args.vocoder, mel_config, device)
    hop, sr = mel_config.hop_length, mel_config.sample_rate

    # every system speaks through THE inference path's stages (tts.runtime TorchEngine), timed one by one
    synths = {kind: TorchEngine(loaded[kind], vocoder, device) for kind in ("ar", "nar")}
    systems = [System("ar", "ar", None, synths["ar"], forced)]
    systems += [System(f"nar_k{k}", "nar", k, synths["nar"], forced) for k in args.ks]
    models_info = {
        "ar": {"source": sources["ar"], "params": n_params(loaded["ar"].model), "random": random_models["ar"],
               "reduction_factor": loaded["ar"].model.r, "length_mode": "forced" if forced else "free (stop token)"},
        "nar": {"source": sources["nar"], "params": n_params(loaded["nar"].model), "random": random_models["nar"],
                "has_refiner": getattr(loaded["nar"].model, "refiner", None) is not None,
                "length_mode": "forced durations" if forced else "predicted durations"},
        "vocoder": {"name": args.vocoder, "class": type(vocoder).__name__, "params": n_params(vocoder)},
    }
    log(f"models: AR {models_info['ar']['params']/1e6:.2f} M params, NAR {models_info['nar']['params']/1e6:.2f} M, "
        f"vocoder {type(vocoder).__name__}; forced length: {forced}")

    def frames_for(n: int) -> int:
        return max(1, round(n * fps))

    # ---- mel latency, vocoder time, end-to-end RTF: one timed pipeline per repeat -----------------
    texts = {n: pool.text_of_length(n) for n in args.lengths}
    mel_latency: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    vocoder_time: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    e2e: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    with torch.inference_mode():
        for n in args.lengths:
            text, ids, used = texts[n]
            frames = [frames_for(n)] if forced else None
            def pipeline(s: System):
                t0 = time.perf_counter()
                for x in used:  # the frontend's real work (uncached); the ids are then cut to n symbols
                    pool.frontend.encode(x)
                batch = [list(ids)]
                bench.sync()
                t1 = time.perf_counter()
                out = s.run(batch, frames)  # pads the ids itself
                bench.sync()
                t2 = time.perf_counter()
                w = s.synth.vocode(out)
                bench.sync()
                t3 = time.perf_counter()
                return (t1 - t0, t2 - t1, t3 - t2, t3 - t0, int(out.lengths[0]), int(w[0].size))

            for s in systems:
                pipeline(s)  # warm-up
            # Repeats are interleaved (system A, B, C, A, B, C, ...) so that a burst of load from other
            # processes hits every system alike and the same-run ratios stay fair.
            all_runs: dict[str, list[tuple]] = {s.name: [] for s in systems}
            for _ in range(args.repeats):
                for s in systems:
                    all_runs[s.name].append(pipeline(s))
            for s in systems:
                runs = all_runs[s.name]
                n_frames = runs[-1][4]
                audio_s = runs[-1][5] / sr
                mel_t = [r[1] for r in runs]
                voc_t = [r[2] for r in runs]
                tot_t = [r[3] for r in runs]
                mel_latency[s.name][str(n)] = {"median_s": median(mel_t), "times_s": mel_t, "frames": n_frames,
                                               "ms_per_frame": 1000 * median(mel_t) / max(n_frames, 1)}
                vocoder_time[s.name][str(n)] = {"median_s": median(voc_t), "times_s": voc_t, "frames": n_frames,
                                                "audio_s": audio_s, "rtf": median(voc_t) / max(audio_s, 1e-9)}
                e2e[s.name][str(n)] = {"median_s": median(tot_t), "text_s": median([r[0] for r in runs]),
                                       "audio_s": audio_s, "rtf": median(tot_t) / max(audio_s, 1e-9)}
                log(f"  len {n:4d} {s.name:8s} mel {median(mel_t)*1000:9.1f} ms ({n_frames} frames)  "
                    f"voc {median(voc_t)*1000:8.1f} ms  e2e RTF {e2e[s.name][str(n)]['rtf']:.3f}")
                warning = too_short(s, n, n_frames)
                if warning:
                    notes.append(warning)
                    log(warning)

    ratios = {}
    for s in systems[1:]:
        ratios[f"ar_over_{s.name}"] = {
            str(n): mel_latency["ar"][str(n)]["median_s"] / mel_latency[s.name][str(n)]["median_s"]
            for n in args.lengths
        }

    # ---- first-audio latency: sentence by sentence, as a streaming synthesiser would ---------------
    from tts.text import split_sentences

    sentences = split_sentences(FIRST_AUDIO_TEXT)
    first_audio: dict[str, Any] = {}
    with torch.inference_mode():
        for s in systems:
            def stream():
                t0 = time.perf_counter()
                first, audio = None, 0
                for sent in sentences:
                    ids = s.synth.encode(sent)
                    w = s.synth.vocode(s.run([ids], [frames_for(len(ids))] if forced else None))
                    bench.sync()
                    audio += int(w[0].size)
                    if first is None:
                        first = time.perf_counter() - t0
                return first, time.perf_counter() - t0, audio / sr

            stream()
            runs = [stream() for _ in range(args.repeats)]
            first_audio[s.name] = {"first_audio_s": median([r[0] for r in runs]), "total_s": median([r[1] for r in runs]),
                                   "audio_s": runs[-1][2], "n_sentences": len(sentences)}
            log(f"  first audio {s.name:8s} {first_audio[s.name]['first_audio_s']*1000:9.1f} ms "
                f"(whole {len(sentences)} sentences {first_audio[s.name]['total_s']*1000:.1f} ms)")

    # ---- batch throughput ---------------------------------------------------------------------------
    batch_len = args.batch_length
    batch_ids = [pool.text_of_length(batch_len, offset=i)[1] for i in range(max(args.batch_sizes))]
    throughput: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    with torch.inference_mode():
        for s in systems:
            for bsz in args.batch_sizes:
                tokens = [list(x) for x in batch_ids[:bsz]]
                frames = [frames_for(batch_len)] * bsz if forced else None

                def batch():
                    w = s.synth.vocode(s.run(tokens, frames))
                    return sum(int(x.size) for x in w)

                samples, times = bench.timeit(batch)
                t = median(times)
                throughput[s.name][str(bsz)] = {"median_s": t, "utterances_per_s": bsz / t,
                                                "audio_s_per_s": samples / sr / t, "symbols_per_utterance": batch_len}
                log(f"  batch {bsz:3d} {s.name:8s} {bsz / t:8.2f} utt/s  {samples / sr / t:8.2f} audio-s/s")

    # ---- peak memory: fresh subprocess per system ------------------------------------------------------
    peak_memory: dict[str, Any] = {}
    if not args.no_memory:
        n_max = max(args.lengths)
        ids_max = texts[n_max][1]
        frames_max = mel_latency["nar_k" + str(args.ks[0])][str(n_max)]["frames"] if args.ks else frames_for(n_max)
        for s in systems:
            spec = {"system": s.name, "kind": s.kind, "k": s.k, "checkpoint": paths[s.kind], "tokens": ids_max,
                    "frames": frames_for(n_max) if forced else frames_max, "forced": forced, "device": device,
                    "threads": torch.get_num_threads()}
            peak_memory[s.name] = run_memory_probe_subprocess(spec, tmp) | {"symbols": n_max}
        spec = {"system": "vocoder", "vocoder": args.vocoder, "mel_config": mel_config.to_dict(), "frames": frames_max,
                "device": device, "threads": torch.get_num_threads()}
        peak_memory["vocoder"] = run_memory_probe_subprocess(spec, tmp) | {"frames": frames_max}
        for k, v in peak_memory.items():
            log(f"  memory {k:8s} " + (f"+{v['rss_delta_mb']:.1f} MiB RSS (peak {v['rss_peak_mb']:.0f} MiB)"
                                       if "error" not in v else v["error"]))

    # ---- peers -------------------------------------------------------------------------------------------
    peers: dict[str, Any] = {}
    if args.peers:
        peers = run_peers(args, bench, loaded, texts, mel_latency, e2e, tmp, log)

    # ---- mel comparison image input --------------------------------------------------------------------
    mel_images = {}
    with torch.inference_mode():
        ids = pool.encode(SENTENCES[0])
        fr = [frames_for(len(ids))] if forced else None
        picks = [systems[0]] + ([systems[1]] if len(systems) > 1 else [])
        if len(systems) > 2:
            picks.append(max(systems[1:], key=lambda s: s.k))
        for s in picks:
            out = s.run([ids], fr)
            mel_images[s.name] = out.mels[0, :, : int(out.lengths[0])].float().cpu()

    result = {
        "meta": {
            "command": " ".join(shlex.quote(a) for a in [sys.executable, "-m", "recipes.benchmark", *args.argv]),
            "argv": args.argv,
            "started": args.started,
            "machine": facts,
            "models": models_info,
            "speed_only": speed_only,
            "random_models": random_models,
            "forced_length": forced,
            "frames_per_symbol": fps if forced else None,
            "notes": notes,
        },
        "settings": {"lengths": args.lengths, "ks": args.ks, "repeats": args.repeats, "warmup": 1,
                     "batch_sizes": args.batch_sizes, "batch_length": batch_len, "device": device,
                     "threads": torch.get_num_threads(), "vocoder": args.vocoder,
                     "sample_rate": sr, "hop_length": hop, "statistic": "median"},
        "mel_latency": mel_latency,
        "ratios": ratios,
        "vocoder": vocoder_time,
        "end_to_end": e2e,
        "first_audio": first_audio,
        "batch_throughput": throughput,
        "peak_memory": peak_memory,
        "peers": peers,
        "load_average_at_end": list(os.getloadavg()),
    }
    if args.quality:
        result["quality"] = load_quality(args.quality)
    result["plots"] = make_plots(result, mel_images, out_dir, mel_config)
    (out_dir / "benchmark.json").write_text(json.dumps(result, indent=2))
    (out_dir / "benchmark.md").write_text(to_markdown(result))
    tmp_ctx.cleanup()
    return result
