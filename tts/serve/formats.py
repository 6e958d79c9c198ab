"""The response formats of POST /v1/audio/speech: 16-bit mono at the voice's sample rate.

  wav   streamed: a 44-byte header whose RIFF and data sizes are 0xFFFFFFFF (the streaming convention for a
        length not known in advance: decoders read to the end of the stream), then PCM as it is made;
  pcm   streamed: raw signed 16-bit little-endian samples (the rate is in the X-Sample-Rate header);
  flac  sent whole when the audio is complete: a FLAC's STREAMINFO carries the total length and MD5, which
        libsndfile writes at the end, and a FLAC streamed with an unknown length does not decode in
        libsndfile (soundfile); the response is still chunked.
"""

from __future__ import annotations

import io
import struct

import numpy as np
import soundfile as sf

from tts.pcm import pcm16 as pcm16_samples

FORMATS = ("wav", "pcm", "flac")
MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/L16", "flac": "audio/flac"}
STREAMING_SIZE = 0xFFFFFFFF  # RIFF/data chunk size meaning "to the end of the stream"


def to_int16(wave: np.ndarray) -> np.ndarray:
    """float [-1, 1] [N] -> little-endian int16 by the one rule of every output (tts.pcm.pcm16: the CLI's, so that
    the server and `tts.synthesize --out -` give the same bytes for the same audio; `round(x * 32767)` here
    differed by one step in about half the samples of speech); int16 in is returned as it is."""
    if wave.dtype == np.dtype("<i2"):
        return wave
    return pcm16_samples(wave)


def pcm16(wave: np.ndarray) -> bytes:
    """float [-1, 1] or int16 [N] -> little-endian int16 bytes."""
    return to_int16(wave).tobytes()


def wav_stream_header(sample_rate: int) -> bytes:
    """RIFF/WAVE header for 16-bit mono PCM of unknown length (sizes STREAMING_SIZE)."""
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, sample_rate * 2, 2, 16)  # PCM, mono, rate, bytes/s, align, bits
    return (b"RIFF" + struct.pack("<I", STREAMING_SIZE) + b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
            + b"data" + struct.pack("<I", STREAMING_SIZE))


class Encoder:
    """Audio pieces in (float or int16), response bytes out: `start()`, `piece(wave)` for each piece, `finish()`."""

    def __init__(self, fmt: str, sample_rate: int) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"response_format must be one of {list(FORMATS)}, got {fmt!r}")
        self.fmt, self.sample_rate = fmt, sample_rate
        self._flac: list[bytes] = []  # the whole audio until finish(): kept as 16-bit, half of float32

    def start(self) -> bytes:
        return wav_stream_header(self.sample_rate) if self.fmt == "wav" else b""

    def piece(self, wave: np.ndarray) -> bytes:
        if self.fmt == "flac":
            self._flac.append(pcm16(wave))
            return b""
        return pcm16(wave)

    def finish(self) -> bytes:
        if self.fmt != "flac":
            return b""
        buf = io.BytesIO()
        samples = np.frombuffer(b"".join(self._flac), dtype="<i2")
        self._flac.clear()
        sf.write(buf, samples, self.sample_rate, format="FLAC", subtype="PCM_16")
        return buf.getvalue()
