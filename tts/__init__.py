"""tts: autoregressive vs non-autoregressive speech synthesis with a shared vocoder."""

__version__ = "0.1.0"
