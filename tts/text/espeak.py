"""Run the espeak-ng executable to get IPA for words missing from the lexicon.

One subprocess per batch: espeak-ng reads stdin line by line and writes one line of phonemes
per input line, so N words cost one process start (~10 ms) instead of N.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


class EspeakError(RuntimeError):
    """espeak-ng failed, timed out, or gave output that does not line up with the input."""


class EspeakUnavailableError(EspeakError):
    """The espeak-ng executable cannot be started at all (missing, not executable)."""


def espeak_ipa(
    words: Sequence[str], executable: str, voice: str, timeout_s: float
) -> list[str]:
    """IPA of each word, phonemes separated by "_", stress marks before vowels.

    Words must be single tokens of letters/apostrophes (no newlines).  Raises EspeakError.
    """
    if not words:
        return []
    if any("\n" in w or not w.strip() for w in words):
        raise EspeakError("words passed to espeak-ng must be non-empty and single-line")
    cmd = [executable, "-q", "--ipa", "--sep=_", "-v", voice]
    try:
        result = subprocess.run(
            cmd,
            input="\n".join(words) + "\n",
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout_s,
            check=False,
        )
    except OSError as exc:  # not found, not executable
        raise EspeakUnavailableError(f"cannot run {executable!r}: {exc}") from exc
    except subprocess.SubprocessError as exc:  # timeout
        raise EspeakError(f"{executable!r} failed: {exc}") from exc
    if result.returncode != 0:
        raise EspeakError(
            f"{executable!r} exited with status {result.returncode}: {result.stderr.strip()[:200]}"
        )
    lines = [line.strip() for line in result.stdout.splitlines()]
    if len(lines) != len(words):
        raise EspeakError(
            f"{executable!r} returned {len(lines)} line(s) for {len(words)} word(s)"
        )
    return lines
