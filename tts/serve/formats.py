"""The response formats of POST /v1/audio/speech (OpenAI's six): mono, 16-bit before encoding, at the voice's
sample rate except opus.  `encoder(fmt, rate)` gives an Encoder: `start()`, `piece(wave)` for each piece of
audio, `finish()`, each returning the bytes to send now.  Measured on libsndfile 1.2.2 (soundfile 0.14.0),
decoded by soundfile in tests/test_serve_openai.py:

  mp3   streamed, constant bit rate (libsndfile / LAME).  LAME's first frame is a Xing/"Info" header that
        libsndfile rewrites at the start of the file when it closes, after the audio has been sent, so it
        is not sent (the rest is a plain MPEG stream; `_Sink(drop_first_write=True)`).  Without that header a
        decoder cannot trim the encoder's delay: the audio starts after 1105 samples (50 ms at 22050 Hz)
        of silence and ends with up to one frame of padding.  Constant, not variable, bit rate: libsndfile's
        reader sizes a header-less VBR stream from its first frame's rate and read a 3 s stream as 0.3 s;
  opus  streamed: Ogg Opus pages as libsndfile fills them (OGG_PAGE_LATENCY_MS of audio each: each piece's
        audio leaves with it but for its last page, which leaves with the next).  Opus takes 8/12/16/24/48 kHz only (libsndfile
        refuses 22050): resampled to 48 kHz (the rate Opus decoders play at) by soxr's streaming
        resampler (librosa's dependency), whose output equals resampling the whole audio at once;
  aac   streamed as ADTS frames (AAC-LC, 64 kb/s) by PyAV's encoder, when PyAV (`av`, installed with the eval
        extra's faster-whisper) is importable; otherwise a request for it is refused with the formats
        there are (FORMATS).  A decoder sees AAC's 1024 priming samples of silence first;
  flac  sent whole when the audio is complete: a FLAC's STREAMINFO carries the total length and MD5, which
        libsndfile writes at the end, and a FLAC streamed with an unknown length does not decode in
        libsndfile (soundfile); the response is still chunked;
  wav   streamed: a 44-byte header whose RIFF and data sizes are 0xFFFFFFFF (the streaming convention for a
        length not known in advance: decoders read to the end of the stream), then PCM as it is made;
  pcm   streamed: raw signed 16-bit little-endian samples (the rate is in the X-Sample-Rate header).
"""

from __future__ import annotations

import importlib.util
import io
import struct

import numpy as np
import soundfile as sf

from tts.pcm import pcm16 as pcm16_samples

HAS_AAC = importlib.util.find_spec("av") is not None  # PyAV: imported only when aac is asked for
ALL_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")  # OpenAI's response formats
FORMATS = tuple(f for f in ALL_FORMATS if f != "aac" or HAS_AAC)  # those made here
DEFAULT_FORMAT = "mp3"  # OpenAI's default when response_format is left out (the official client leaves it out)
MEDIA_TYPES = {"mp3": "audio/mpeg", "opus": "audio/ogg; codecs=opus", "aac": "audio/aac", "flac": "audio/flac",
               "wav": "audio/wav", "pcm": "audio/L16"}
OPUS_RATE = 48_000
# an Ogg page is written once it holds this much audio (libsndfile's default, 1 s, held a one-sentence
# answer's audio until the end; 200 ms costs a 27-byte page header 5 times a second)
OGG_PAGE_LATENCY_MS = 200.0
SFC_SET_OGG_PAGE_LATENCY_MS = 0x1302  # sndfile.h
AAC_BIT_RATE = 64_000
MP3_COMPRESSION = 0.5  # libsndfile's compression level: constant 80 kb/s at 22050 Hz mono
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


class _Sink(io.RawIOBase):
    """The file an encoder library writes into, handing on what it appends (`take()`).  A write over bytes
    already written is a header rewritten at close: allowed only inside the dropped first write (MP3's
    Info frame), anything else is an error (those bytes were sent)."""

    def __init__(self, drop_first_write: bool = False) -> None:
        super().__init__()
        self.pos = self.end = 0
        self.dropped = -1 if drop_first_write else 0  # -1: the first write is still to come
        self.pending: list[bytes] = []

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # nothing written is read back by the encoders
        return 0

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.end}[whence] + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def write(self, b) -> int:
        data = bytes(b)
        if self.pos < self.end:
            if self.pos + len(data) > self.dropped:
                raise RuntimeError(f"the encoder rewrote bytes {self.pos}..{self.pos + len(data)} after they were sent")
        elif self.pos > self.end:
            raise RuntimeError("the encoder wrote past the end of its stream")
        elif self.dropped < 0:
            self.dropped = len(data)
            self.end += len(data)
        else:
            self.pending.append(data)
            self.end += len(data)
        self.pos += len(data)
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self.pending)
        self.pending.clear()
        return data


class Encoder:
    """pcm: the samples as they come.  `rate` is the encoded audio's sample rate (X-Sample-Rate); `costly`:
    encoding takes CPU time (tens of ms a sentence), worth a worker thread rather than the event loop."""

    costly = False

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = self.rate = sample_rate

    def start(self) -> bytes:
        return b""

    def piece(self, wave: np.ndarray) -> bytes:
        return pcm16(wave)

    def finish(self) -> bytes:
        return b""


class WavEncoder(Encoder):
    def start(self) -> bytes:
        return wav_stream_header(self.sample_rate)


class FlacEncoder(Encoder):
    """The whole audio, kept as 16-bit (half of float32), encoded by finish()."""

    def __init__(self, sample_rate: int) -> None:
        super().__init__(sample_rate)
        self._pieces: list[bytes] = []

    def piece(self, wave: np.ndarray) -> bytes:
        self._pieces.append(pcm16(wave))
        return b""

    def finish(self) -> bytes:
        buf = io.BytesIO()
        samples = np.frombuffer(b"".join(self._pieces), dtype="<i2")
        self._pieces.clear()
        sf.write(buf, samples, self.sample_rate, format="FLAC", subtype="PCM_16")
        return buf.getvalue()


def set_ogg_page_latency(file: sf.SoundFile, ms: float) -> bool:
    """libsndfile's SFC_SET_OGG_PAGE_LATENCY_MS (soundfile has no call for it: its cffi handles); False (pages
    at libsndfile's default of 1 s) where soundfile's internals are not there."""
    ffi, lib = getattr(sf, "_ffi", None), getattr(sf, "_snd", None)
    if ffi is None or lib is None:
        return False
    return lib.sf_command(file._file, SFC_SET_OGG_PAGE_LATENCY_MS, ffi.new("double *", ms), ffi.sizeof("double")) == 0


class SndfileStreamEncoder(Encoder):
    """mp3 or opus, written by libsndfile into a _Sink piece by piece (opus through a streaming resampler)."""

    costly = True

    def __init__(self, fmt: str, sample_rate: int) -> None:
        super().__init__(sample_rate)
        self._sink = _Sink(drop_first_write=fmt == "mp3")
        self._resampler = None
        if fmt == "opus":
            import soxr

            self.rate = OPUS_RATE
            self._resampler = soxr.ResampleStream(sample_rate, OPUS_RATE, 1, dtype="float32", quality="HQ")
            self._file = sf.SoundFile(self._sink, "w", OPUS_RATE, 1, format="OGG", subtype="OPUS")
            set_ogg_page_latency(self._file, OGG_PAGE_LATENCY_MS)
        else:
            self._file = sf.SoundFile(self._sink, "w", sample_rate, 1, format="MP3", subtype="MPEG_LAYER_III",
                                      bitrate_mode="CONSTANT", compression_level=MP3_COMPRESSION)

    def _write(self, wave: np.ndarray, last: bool = False) -> bytes:
        samples = to_int16(wave)
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples.astype(np.float32) / 32768, last=last)
        if samples.size:
            self._file.write(samples)
        return self._sink.take()

    def piece(self, wave: np.ndarray) -> bytes:
        return self._write(wave)

    def finish(self) -> bytes:
        data = self._write(np.zeros(0, np.int16), last=True)
        self._file.close()
        return data + self._sink.take()


class AacEncoder(Encoder):
    """ADTS AAC-LC by PyAV (libavcodec's native encoder), muxed into a _Sink frame by frame."""

    costly = True

    def __init__(self, sample_rate: int) -> None:
        import av

        super().__init__(sample_rate)
        self._av = av
        self._sink = _Sink()
        self._container = av.open(self._sink, "w", format="adts")
        self._stream = self._container.add_stream("aac", rate=sample_rate, layout="mono")
        self._stream.bit_rate = AAC_BIT_RATE

    def _encode(self, frame) -> bytes:
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        return self._sink.take()

    def piece(self, wave: np.ndarray) -> bytes:
        samples = to_int16(wave)
        if not samples.size:
            return b""
        frame = self._av.AudioFrame.from_ndarray(samples[None, :], format="s16", layout="mono")
        frame.sample_rate = self.sample_rate
        return self._encode(frame)

    def finish(self) -> bytes:
        data = self._encode(None)
        self._container.close()
        return data + self._sink.take()


def encoder(fmt: str, sample_rate: int) -> Encoder:
    """The Encoder of a response format (one of FORMATS) for audio at `sample_rate`."""
    if fmt not in FORMATS:
        raise ValueError(f"response_format must be one of {list(FORMATS)}, got {fmt!r}")
    if fmt in ("mp3", "opus"):
        return SndfileStreamEncoder(fmt, sample_rate)
    return {"pcm": Encoder, "wav": WavEncoder, "flac": FlacEncoder, "aac": AacEncoder}[fmt](sample_rate)
