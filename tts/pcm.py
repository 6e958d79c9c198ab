"""16-bit PCM: THE float -> int16 rule of every output, so that the same audio gives the same samples wherever it is
written: the CLI's files (wav, FLAC, an MP3's source) and `--out -`, and the speech server's responses (wav, pcm,
flac: tts.serve.formats).  Torch-free (the CLI's fast start and the server import it).

The rule is libsndfile's own float -> PCM_16 conversion for WAV (the one `soundfile.write` of float audio applies,
e.g. tts.Audio.save), applied once here by a raw 16-bit encode in memory: libsndfile 1.2 scales by 2**31 - 1,
rounds to 32 bits and keeps the top 16 (values within a step round down, 1.0 -> 32767, -1.0 -> -32768), which
`round(x * 32767)` is not (it differed by one step in 47 % of the samples of a sentence).  libsndfile's FLAC encoder
rounds floats another way again, so FLAC is written from these int16 samples too.
"""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf


def pcm16(samples: np.ndarray) -> np.ndarray:
    """float [-1, 1] [N] (any float dtype: taken as float32, clipped) -> the int16 [N] (little-endian) samples every
    output holds."""
    samples = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
    if not samples.size:
        return np.zeros(0, dtype="<i2")
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", samplerate=8000, channels=1, subtype="PCM_16", format="RAW", endian="LITTLE") as f:
        f.write(samples)
    return np.frombuffer(buf.getvalue(), dtype="<i2")
