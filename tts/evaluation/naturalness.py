"""Reference-free quality predictors: DistillMOS (naturalness MOS) and DNSMOS (artifact/noise score).

Both run offline from weights shipped inside their PyPI wheels (measured: nothing is downloaded):

* ``distillmos`` 0.9.1: ``ConvTransformerSQAModel`` with ``weights/distill_mos_v7.pt``; 16 kHz input,
  output MOS in 1..5.  The model peak-normalises its input, so the level does not matter.
* ``speechmos`` 0.0.1.1: the DNSMOS P.835 ONNX models (``dnsmos_models/sig_bak_ovr.onnx`` and the
  P.808 ``model_v8.onnx``) run with onnxruntime.  We build the sessions ourselves with one thread
  (speechmos' own ``run`` uses all cores, which was ~30x slower on the busy 2-core machine) and reuse
  speechmos' scoring code.  DNSMOS was trained on noisy/enhanced speech: read it as an artifact /
  background-noise score, not as TTS naturalness.

A missing package raises `QualityModelMissingError` naming it: no score is ever made up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from tts.evaluation.asr import resample_to_16k

MOS_SAMPLE_RATE = 16000


class QualityModelMissingError(RuntimeError):
    pass


class DistillMOS:
    """DistillMOS predictor, loaded once."""

    def __init__(self) -> None:
        try:
            import distillmos
        except ImportError as e:
            raise QualityModelMissingError("predict_mos needs the PyPI package 'distillmos' (pip install distillmos==0.9.1)") from e
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):  # it prints the weight path
            self.model = distillmos.ConvTransformerSQAModel().eval()

    def __call__(self, wave, sample_rate: int) -> float:
        import torch

        x = torch.from_numpy(resample_to_16k(wave, sample_rate))[None]
        if x.shape[1] == 0:
            raise ValueError("empty waveform")
        with torch.inference_mode():
            return float(self.model(x).reshape(-1)[0])


_DISTILLMOS: DistillMOS | None = None


def predict_mos(wave, sample_rate: int) -> float:
    """DistillMOS naturalness MOS (1..5) of one utterance; the model is loaded on first use."""
    global _DISTILLMOS
    if _DISTILLMOS is None:
        _DISTILLMOS = DistillMOS()
    return _DISTILLMOS(wave, sample_rate)


@dataclass(frozen=True)
class DNSMOSScore:
    ovrl: float  # overall quality (P.835 OVRL)
    sig: float  # speech signal quality
    bak: float  # background noise (higher = cleaner)
    p808: float  # P.808 overall MOS


class DNSMOS:
    """DNSMOS P.835 (+ P.808) from the ONNX models bundled in ``speechmos``, single-threaded."""

    def __init__(self, threads: int = 1) -> None:
        try:
            import onnxruntime as ort
            import speechmos
            from speechmos import dnsmos as _dnsmos
        except ImportError as e:
            raise QualityModelMissingError(
                "DNSMOS needs the PyPI packages 'speechmos' and 'onnxruntime' "
                "(pip install speechmos==0.0.1.1 onnxruntime)"
            ) from e
        root = os.path.dirname(os.path.abspath(speechmos.__file__))
        primary = os.path.join(root, "dnsmos_models", "sig_bak_ovr.onnx")
        p808 = os.path.join(root, "dnsmos_models", "model_v8.onnx")
        for p in (primary, p808):
            if not os.path.isfile(p):
                raise QualityModelMissingError(f"speechmos is installed but its model {p} is missing")
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = threads
        impl = _dnsmos.DNSMOS.__new__(_dnsmos.DNSMOS)  # its __init__ would use all cores
        impl.primary_model_path = primary
        impl.onnx_sess = ort.InferenceSession(primary, so, providers=["CPUExecutionProvider"])
        impl.p808_onnx_sess = ort.InferenceSession(p808, so, providers=["CPUExecutionProvider"])
        self._impl = impl

    def __call__(self, wave, sample_rate: int) -> DNSMOSScore:
        x = resample_to_16k(wave, sample_rate).astype(np.float32)
        if x.size == 0:
            raise ValueError("empty waveform")
        x = np.clip(x, -1.0, 1.0)
        d = self._impl(x, MOS_SAMPLE_RATE, False)
        return DNSMOSScore(ovrl=float(d["ovrl_mos"]), sig=float(d["sig_mos"]), bak=float(d["bak_mos"]),
                           p808=float(d["p808_mos"]))
