"""The torch engine: an acoustic checkpoint (any model) and a vocoder (any), run eagerly by their own
`infer` / `forward` (tts.runtime.engine describes the interface; tts.runtime.pipeline drives it)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from tts import checkpoint
from tts.durations import attention_durations
from tts.errors import CheckpointError
from tts.noise import item_noise_seed
from tts.runtime.controls import Controls
from tts.runtime.engine import Capabilities, MelBatch, StreamPiece, TextEncoding, timed_pieces
from tts.text import TextFrontend
from tts.vocoder.base import Vocoder
from tts.vocoder.registry import load_vocoder


def forced_durations(n_symbols: int, fps: float) -> list[int]:
    """Integer frames per symbol summing to round(n * fps), spread evenly (forced NAR output lengths)."""
    edges = [round(i * fps) for i in range(n_symbols + 1)]
    return [max(b - a, 0) for a, b in zip(edges[:-1], edges[1:])]


def pad_tokens(ids: Sequence[Sequence[int]], device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists -> (tokens [B, L] long, zero-padded; lengths [B]) on `device`."""
    lengths = torch.tensor([len(x) for x in ids], device=device)
    tokens = torch.zeros(len(ids), int(lengths.max()), dtype=torch.long, device=device)
    for b, seq in enumerate(ids):
        tokens[b, : len(seq)] = torch.tensor(list(seq), device=device)
    return tokens, lengths


class TorchEngine(TextEncoding):
    """One acoustic checkpoint + one vocoder on a torch device.  `vocoder` may be None for a mel-only engine
    (the benchmark's memory probe of the acoustic model alone); `vocode` then raises."""

    name = "torch"

    def __init__(self, acoustic: checkpoint.LoadedCheckpoint, vocoder: Vocoder | None, device: str = "cpu") -> None:
        if acoustic.meta.kind != "acoustic":
            raise CheckpointError(f"expected an acoustic checkpoint, got kind {acoustic.meta.kind!r}")
        if not hasattr(acoustic.model, "infer"):  # the aligner (tts.models.aligner) makes durations, not speech
            raise CheckpointError(f"a {type(acoustic.model).__name__} checkpoint does not synthesise speech (it makes "
                                  f"durations: python -m recipes.extract_durations source=teacher checkpoint=...)")
        if vocoder is not None:
            vocoder.check_mel_config(acoustic.mel_config, "acoustic checkpoint")
            vocoder = vocoder.to(device).eval()
        self.model = acoustic.model.to(device).eval()
        self.frontend: TextFrontend = acoustic.frontend()
        self.vocoder = vocoder
        self.mel_config = acoustic.mel_config
        self.sample_rate = acoustic.mel_config.sample_rate
        self.hop_length = acoustic.mel_config.hop_length
        self.device = device
        spec = self.model.inference_spec()  # what the model declares it takes, and its own defaults
        self.capabilities = Capabilities(
            controls=spec.controls, block_mode=spec.block_mode, autoregressive=spec.autoregressive,
            streaming=hasattr(self.model, "stream_mels") and hasattr(vocoder, "stream"),
            forced_lengths=True)
        self.defaults = Controls(**spec.defaults)
        self.item_noise_seeds = spec.item_noise_seeds  # the model's infer takes noise_seeds (one per item)

    @classmethod
    def from_paths(cls, acoustic_path: str | Path, vocoder: str, device: str = "cpu") -> "TorchEngine":
        acoustic = checkpoint.load(acoustic_path, device)
        return cls(acoustic, load_vocoder(vocoder, acoustic.mel_config, device=device), device)

    @torch.inference_mode()
    def mels(self, ids: Sequence[Sequence[int]], indices: Sequence[int], controls: Controls,
             forced_frames: Sequence[int] | None = None, ar_options: dict | None = None) -> MelBatch:
        """THE acoustic-model call.  The NAR refiner's noise of item b comes from (seed, indices[b]) (tts.noise).
        An AR model whose spec says item_noise_seeds (the Transformer AR) gets the same per-item seeds; Tacotron 2's
        prenet dropout uses torch's global RNG: it is seeded from (seed, indices[0]) inside a forked RNG state
        (batch 1 is then reproducible per item; the caller's RNG is untouched).
        forced_frames: per-item output frames for models whose stop token / durations mean nothing (random
        weights): the NAR gets evenly spread durations summing to them, the AR decodes ceil(max / r) steps
        with its stop token disabled (so up to r - 1 frames more).  ar_options: more keywords of an AR model's
        `infer` (the speculative engine's `speculation`; tts.runtime.speculative)."""
        tokens, lengths = pad_tokens(ids, self.device)
        if len(indices) != len(ids):
            raise ValueError(f"{len(indices)} item indices for a batch of {len(ids)}")
        if self.capabilities.autoregressive:
            kwargs: dict = dict(ar_options or {})
            if forced_frames is not None:
                kwargs |= dict(max_decoder_steps=math.ceil(max(forced_frames) / self.model.r),
                              stop_threshold=1.1)  # a probability never exceeds 1: the decoder never stops
            if self.item_noise_seeds:  # one RNG per item: an item sounds the same in any batch
                out = self.model.infer(tokens, lengths, **kwargs,
                                       noise_seeds=[item_noise_seed(controls.seed, i) for i in indices])
            else:
                cuda = [torch.device(self.device)] if torch.device(self.device).type == "cuda" else []
                with torch.random.fork_rng(devices=cuda):
                    torch.manual_seed(item_noise_seed(controls.seed, indices[0]))
                    out = self.model.infer(tokens, lengths, **kwargs)
        else:
            if ar_options:
                raise ValueError(f"options {sorted(ar_options)} are for an autoregressive model; this voice is not one")
            durations = None
            if forced_frames is not None:
                durations = torch.zeros_like(tokens)  # [B, L] frames per token, zero on padding
                for b, n in enumerate(lengths.tolist()):
                    durations[b, :n] = torch.tensor(forced_durations(n, forced_frames[b] / max(n, 1)))
            out = self.model.infer(tokens, lengths, refine_steps=controls.refine_steps, temperature=controls.temperature,
                                   speed=controls.speed, pitch_shift=controls.pitch_shift, durations=durations,
                                   block_frames=controls.block_frames,
                                   noise_seeds=[item_noise_seed(controls.seed, i) for i in indices])
        self._sync()
        truncated = getattr(out, "truncated", None)
        mel_lengths = out.mel_lengths.cpu().numpy().astype(np.int64)
        if self.capabilities.autoregressive:
            durations = attention_durations(out.alignments.float().cpu().numpy(), mel_lengths,
                                            lengths.cpu().numpy(), self.model.r)
        else:
            durations = out.durations.cpu().numpy().astype(np.int64)
        return MelBatch(out.mels, mel_lengths,
                        np.zeros(len(ids), bool) if truncated is None else truncated.cpu().numpy(),
                        getattr(out, "failures", None), getattr(out, "refine_steps_taken", None), durations)

    @torch.inference_mode()
    def vocode(self, batch: MelBatch) -> list[np.ndarray]:
        if self.vocoder is None:
            raise ValueError("this engine was built without a vocoder (mel-only)")
        out = self.vocoder(batch.mels, torch.as_tensor(batch.lengths, device=self.device))
        self._sync()
        wave = out.wave.float().cpu().numpy()
        return [wave[b, : int(n)] for b, n in enumerate(out.lengths.tolist())]

    def stream_part(self, ids: Sequence[int], index: int, controls: Controls) -> Iterator[StreamPiece] | None:
        """A NAR part's audio block by block (`FastSpeech2.stream_mels` -> the vocoder's `stream()`); None for
        a part the frame guard cut (the pipeline speaks it whole, which repairs it)."""
        if not self.capabilities.streaming:
            return None
        tokens, lengths = pad_tokens([ids], self.device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            plan = self.model.prepare(tokens, lengths, speed=controls.speed, pitch_shift=controls.pitch_shift)
        if bool(plan.truncated[0]):
            return None
        return self._stream(plan, index, controls, time.perf_counter() - t0)

    def _stream(self, plan, index: int, controls: Controls, prepare_s: float) -> Iterator[StreamPiece]:
        voc = self.vocoder.stream()

        def chunks() -> Iterator[torch.Tensor]:
            mels = self.model.stream_mels(plan, controls.block_frames, controls.refine_steps, controls.temperature,
                                          noise_seeds=[item_noise_seed(controls.seed, index)])
            while True:
                with torch.inference_mode():
                    chunk = next(mels, None)
                self._sync()
                if chunk is None:
                    return
                yield chunk.mels

        def audio(wave: torch.Tensor) -> np.ndarray:
            self._sync()
            return wave[0].float().cpu().numpy()

        def push(mel: torch.Tensor) -> np.ndarray:
            with torch.inference_mode():
                return audio(voc.push(mel))

        def finish() -> np.ndarray:
            with torch.inference_mode():
                return audio(voc.finish())

        return timed_pieces(chunks(), push, finish, prepare_s, plan.durations[0].cpu().numpy().astype(np.int64))

    def _sync(self) -> None:
        """Wait for queued CUDA work, so that a wall-clock reading covers the stage it follows."""
        if torch.device(self.device).type == "cuda":
            torch.cuda.synchronize(self.device)
