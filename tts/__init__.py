"""tts: autoregressive vs non-autoregressive speech synthesis with a shared vocoder."""

__version__ = "0.1.0"

_API = ("load", "voices", "Voice", "Audio")


def __getattr__(name: str):
    """`tts.load`, `tts.Voice`, `tts.Audio` come from tts.api on first use, so that `import tts` stays cheap
    (no torch, no model): see tts/api.py."""
    if name in _API:
        from tts import api

        return getattr(api, name)
    raise AttributeError(f"module 'tts' has no attribute {name!r}")
