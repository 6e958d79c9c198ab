"""THE runtime: one pipeline (tts.runtime.pipeline) over interchangeable engines (torch, ONNX), one controls
value (tts.runtime.controls), and the choice of engine for a voice (tts.runtime.release.open_pipeline).
Torch-free at import."""

from tts.runtime.controls import Controls
from tts.runtime.pipeline import ItemResult, Pipeline, SynthesisResult, Timings, Utterance

__all__ = ["Controls", "ItemResult", "Pipeline", "SynthesisResult", "Timings", "Utterance"]
