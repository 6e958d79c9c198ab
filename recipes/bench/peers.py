"""Peers timed in the same run: Festival SLT HTS, Piper (joe-medium, ONNX, one thread) and SpeechBrain's
Tacotron2 / FastSpeech2."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
import wave
from pathlib import Path
from typing import Any

import torch

from recipes.bench.systems import n_params
from tts.runtime.torch_engine import forced_durations, pad_tokens
from recipes.bench.timing import Bench, median

FESTIVAL_VOICE = "voice_cmu_us_slt_arctic_hts"


# --------------------------------------------------------------------------------------------------
# peers
# --------------------------------------------------------------------------------------------------
PEER_TINY = {
    "ar": dict(embedding_dim=32, encoder_dim=32, prenet_dim=16, attention_rnn_dim=32, decoder_rnn_dim=32,
               attention_dim=16, postnet_channels=16, location_filters=4, reduction_factor=3),
    "nar": dict(d_model=32, encoder_layers=1, decoder_layers=1, ffn_channels=64, predictor_channels=32),
}


def _cfg_get(cfg: dict[str, Any], key: str, cls) -> Any:
    import inspect

    if key in cfg:
        return cfg[key]
    return inspect.signature(cls.__init__).parameters[key].default


def build_sb_tacotron2(our_cfg: dict[str, Any], n_symbols: int, n_mels: int):
    """SpeechBrain's Tacotron2 at the size of our Tacotron2 config (random weights)."""
    from speechbrain.lobes.models.Tacotron2 import Tacotron2 as SBTacotron2

    from tts.models.autoregressive import Tacotron2

    g = lambda k: _cfg_get(our_cfg, k, Tacotron2)  # noqa: E731
    enc = int(g("encoder_dim"))
    kwargs = dict(
        mask_padding=True, n_mel_channels=n_mels, n_symbols=n_symbols,
        symbols_embedding_dim=enc,  # SpeechBrain's encoder convs take the embedding: the two must be equal
        encoder_kernel_size=int(g("encoder_kernel_size")), encoder_n_convolutions=int(g("encoder_n_convs")),
        encoder_embedding_dim=enc, attention_rnn_dim=int(g("attention_rnn_dim")),
        attention_dim=int(g("attention_dim")), attention_location_n_filters=int(g("location_filters")),
        attention_location_kernel_size=int(g("location_kernel_size")),
        n_frames_per_step=int(g("reduction_factor")), decoder_rnn_dim=int(g("decoder_rnn_dim")),
        prenet_dim=int(g("prenet_dim")), max_decoder_steps=1000, gate_threshold=0.5,
        p_attention_dropout=float(g("attention_dropout")), p_decoder_dropout=float(g("decoder_dropout")),
        postnet_embedding_dim=int(g("postnet_channels")), postnet_kernel_size=int(g("postnet_kernel_size")),
        postnet_n_convolutions=int(g("postnet_layers")), decoder_no_early_stopping=True,
    )
    torch.manual_seed(0)
    return SBTacotron2(**kwargs).eval(), kwargs


def build_sb_fastspeech2(our_cfg: dict[str, Any], n_symbols: int, n_mels: int):
    """SpeechBrain's FastSpeech2 at the size of our FastSpeech2 config (random weights)."""
    from speechbrain.lobes.models.FastSpeech2 import FastSpeech2 as SBFastSpeech2

    from tts.models.nonautoregressive import FastSpeech2

    g = lambda k: _cfg_get(our_cfg, k, FastSpeech2)  # noqa: E731
    d = int(g("d_model"))
    kwargs = dict(
        enc_num_layers=int(g("encoder_layers")), enc_num_head=int(g("n_heads")), enc_d_model=d,
        enc_ffn_dim=int(g("ffn_channels")), enc_k_dim=d, enc_v_dim=d, enc_dropout=float(g("dropout")),
        dec_num_layers=int(g("decoder_layers")), dec_num_head=int(g("n_heads")), dec_d_model=d,
        dec_ffn_dim=int(g("ffn_channels")), dec_k_dim=d, dec_v_dim=d, dec_dropout=float(g("dropout")),
        normalize_before=bool(g("pre_norm")), ffn_type="1dcnn",
        ffn_cnn_kernel_size_list=[int(g("ffn_kernel_size")), int(g("ffn_kernel_size_out"))],
        n_char=n_symbols, n_mels=n_mels,
        # SpeechBrain's FastSpeech2 always has a postnet (ours has the refiner instead): d_model channels, 5 convs
        postnet_embedding_dim=d, postnet_kernel_size=5, postnet_n_convolutions=5, postnet_dropout=0.5,
        padding_idx=0, dur_pred_kernel_size=int(g("predictor_kernel_size")),
        pitch_pred_kernel_size=int(g("predictor_kernel_size")),
        energy_pred_kernel_size=int(g("predictor_kernel_size")),
        variance_predictor_dropout=float(g("predictor_dropout")),
    )
    torch.manual_seed(0)
    return SBFastSpeech2(**kwargs).eval(), kwargs


def festival_available() -> str | None:
    """None if text2wave with the SLT HTS voice works, else the reason."""
    if shutil.which("text2wave") is None or shutil.which("festival") is None:
        return "text2wave / festival not on PATH"
    try:
        r = subprocess.run(["festival", "-b", f"({FESTIVAL_VOICE})"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"festival failed to start: {e}"
    if r.returncode != 0 or "not defined" in (r.stdout + r.stderr).lower():
        return f"festival voice {FESTIVAL_VOICE} not available: {(r.stdout + r.stderr).strip()[:300]}"
    return None


def festival_once(text: str, tmp: Path) -> tuple[float, float]:
    """(wall seconds of the whole text2wave process, seconds of audio it wrote)."""
    txt, wav = tmp / "festival.txt", tmp / "festival.wav"
    txt.write_text(text + "\n")
    wav.unlink(missing_ok=True)
    t0 = time.perf_counter()
    r = subprocess.run(["text2wave", "-eval", f"({FESTIVAL_VOICE})", "-o", str(wav), str(txt)],
                       capture_output=True, text=True, timeout=600)
    dt = time.perf_counter() - t0
    if r.returncode != 0 or not wav.is_file():
        raise RuntimeError(f"text2wave failed (rc {r.returncode}): {r.stderr.strip()[:300]}")
    with wave.open(str(wav), "rb") as w:
        audio_s = w.getnframes() / w.getframerate()
    return dt, audio_s


def time_piper(args, bench: Bench, texts, e2e, ref: str, log) -> dict[str, Any]:
    """Piper's in-process text -> wave time per length (its optional extra missing: 'unavailable')."""
    from recipes.peers.piper import PeerMissingError, PiperPeer

    try:
        peer = PiperPeer(threads=1)
    except PeerMissingError as e:
        return {"status": "unavailable", "reason": str(e)}
    per = {}
    try:
        for n in args.lengths:
            text = texts[n][0]
            audio, times = bench.timeit(lambda: peer(text))  # noqa: B023 - called at once
            t, audio_s = median(times), audio.wave.size / audio.sample_rate
            per[str(n)] = {"median_s": t, "audio_s": audio_s, "rtf": t / max(audio_s, 1e-9), "text": text,
                           "ours_e2e_rtf_" + ref: e2e[ref][str(n)]["rtf"]}
            log(f"  peer piper len {n:4d}: {t*1000:.0f} ms for {audio_s:.2f} s audio, RTF {t/audio_s:.3f}")
    except Exception as e:  # noqa: BLE001 - a peer failing must not fail the run
        return {"status": "failed", "reason": f"{type(e).__name__}: {e}", "per_length": per}
    return {"status": "ok", "what": "PiperVoice.synthesize in-process, 1 onnxruntime thread, on the full "
            "sentences our inputs were cut from", "per_length": per}


def run_peers(args, bench: Bench, loaded, texts, mel_latency, e2e, tmp: Path, log) -> dict[str, Any]:
    peers: dict[str, Any] = {}
    ref = "nar_k" + str(args.ks[0]) if args.ks else "ar"
    device = args.device

    # Festival SLT HTS: whole-process wall time per utterance, audio length from its output
    reason = festival_available()
    if reason is not None:
        peers["festival_slt"] = {"status": "unavailable", "reason": reason}
    else:
        per = {}
        try:
            for n in args.lengths:
                text = texts[n][0]
                festival_once(text, tmp)  # warm-up (page cache)
                runs = [festival_once(text, tmp) for _ in range(args.repeats)]
                t, audio_s = median([r[0] for r in runs]), runs[-1][1]
                per[str(n)] = {"median_s": t, "audio_s": audio_s, "rtf": t / max(audio_s, 1e-9), "text": text,
                               "ours_e2e_rtf_" + ref: e2e[ref][str(n)]["rtf"]}
                log(f"  peer festival len {n:4d}: {t*1000:.0f} ms for {audio_s:.2f} s audio, RTF {t/audio_s:.3f}")
            peers["festival_slt"] = {"status": "ok", "what": f"text2wave -eval '({FESTIVAL_VOICE})' whole process, "
                                     "on the full sentences our inputs were cut from", "per_length": per}
        except Exception as e:  # noqa: BLE001 - a peer failing must not fail the run
            peers["festival_slt"] = {"status": "failed", "reason": f"{type(e).__name__}: {e}", "per_length": per}

    # Piper joe-medium, in-process, one onnxruntime thread: text -> wave on the full sentences
    peers["piper_joe_medium"] = time_piper(args, bench, texts, e2e, ref, log)

    # SpeechBrain modules at matched (or tiny) size, random weights, their own inference calls
    n_symbols = loaded["nar"].meta.build_kwargs["n_symbols"]
    n_mels = loaded["nar"].meta.build_kwargs["n_mels"]
    for name, kind, builder in (("speechbrain_tacotron2", "ar", build_sb_tacotron2),
                                ("speechbrain_fastspeech2", "nar", build_sb_fastspeech2)):
        cfg = dict(loaded[kind].meta.model_config)
        if args.peer_size == "tiny":
            cfg.update(PEER_TINY[kind])
        try:
            model, kwargs = builder(cfg, n_symbols, n_mels)
            model = model.to(device)
            per: dict[str, dict] = {}
            failed: dict[str, str] = {}  # length -> why the peer could not run it
            ours = "ar" if kind == "ar" else ref
            with torch.inference_mode():
                for n in args.lengths:
                    ids = texts[n][1]
                    tokens, lengths = pad_tokens([ids], device)
                    frames = mel_latency[ref][str(n)]["frames"]  # the same output length as our NAR
                    if kind == "ar":
                        r = kwargs["n_frames_per_step"]
                        model.decoder.max_decoder_steps = math.ceil(frames / r)
                        model.decoder.early_stopping = False
                        fn = lambda: model.infer(tokens, lengths.int())  # noqa: E731
                    else:
                        d = torch.tensor([forced_durations(n, frames / n)], device=device)
                        fn = lambda: model(tokens, durations=d)  # noqa: E731
                    try:
                        out, times = bench.timeit(fn)
                    except RuntimeError as e:  # e.g. SpeechBrain FastSpeech2's 2500-frame positional table
                        failed[str(n)] = f"{type(e).__name__}: {e}"
                        log(f"  peer {name} len {n:4d}: could not run: {e}")
                        continue
                    got = out[0].shape[-1] if kind == "ar" else out[1].shape[1]
                    t = median(times)
                    per[str(n)] = {"median_s": t, "frames": int(got),
                                   "ours_" + ours + "_median_s": mel_latency[ours][str(n)]["median_s"],
                                   "ours_over_peer": mel_latency[ours][str(n)]["median_s"] / t}
                    log(f"  peer {name} len {n:4d}: {t*1000:.1f} ms ({got} frames); ours/peer "
                        f"{per[str(n)]['ours_over_peer']:.2f}")
            peers[name] = {"status": "ok", "params": n_params(model), "compared_with": ours,
                           "size": args.peer_size, "constructor": kwargs,
                           "call": "Tacotron2.infer(tokens, lengths), early stopping off, max_decoder_steps forced"
                           if kind == "ar" else "FastSpeech2.forward(tokens, durations=forced)",
                           "per_length": per, "failed_lengths": failed}
            if not per:
                peers[name]["status"] = "failed"
                peers[name]["reason"] = "; ".join(f"{n}: {why}" for n, why in failed.items())
        except Exception as e:  # noqa: BLE001 - report, don't fail the run
            peers[name] = {"status": "failed", "reason": f"{type(e).__name__}: {e}"}
            log(f"  peer {name} could not run: {e}")
    return peers
