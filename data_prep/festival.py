"""One long-running `festival` process that synthesises sentences on request.

Loading the SLT HTS voice costs far more than one sentence, so a process is started once per shard and
fed `(synth_one "ID" "TEXT" "WAVPATH")` calls (DESIGN.md section 3). The Scheme function defined in
`SCHEME_PRELUDE` writes the 32 kHz wav and prints a line protocol on stdout:

    SEG<TAB>phone<TAB>end_seconds<TAB>word     one per Segment item (word is "0" for pauses)
    TOK                                        start of a Token item
    DTR<TAB>w|p<TAB>name                       a daughter of that token: w = in the Word relation,
                                               p = punctuation that Festival split off the token
    OK<TAB>ID   or   FAIL<TAB>ID               end of the reply (FAIL: a Scheme error, caught)

stdout is made line-buffered with coreutils `stdbuf` (Festival's stdio would otherwise hold replies in a
4 kB buffer), stderr is merged into it so "SIOD ERROR" lines become the failure reason. A reply that
takes longer than `timeout_s`, or a process that dies, is a failure of that one sentence; the process
is restarted for the next one.
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

VOICE = "cmu_us_slt_arctic_hts"

SCHEME_PRELUDE = r"""
(define (synth_one_body id text wavpath)
  (let ((utt (SynthText text)) (tok nil))
    (utt.save.wave utt wavpath 'riff)
    (mapcar
      (lambda (s)
        (format t "SEG\t%s\t%f\t%s\n" (item.name s) (item.feat s "end")
                (item.feat s "R:SylStructure.parent.parent.name")))
      (utt.relation.items utt 'Segment))
    (set! tok (utt.relation.first utt 'Token))
    (while tok
      (format t "TOK\n")
      (mapcar
        (lambda (w) (format t "DTR\t%s\t%s\n" (if (item.relation w 'Word) "w" "p") (item.name w)))
        (item.daughters tok))
      (set! tok (item.next tok)))
    (format t "OK\t%s\n" id)))
(define (synth_one id text wavpath)
  (unwind-protect (synth_one_body id text wavpath) (format t "FAIL\t%s\n" id)))
(define tts_base_hts_params hts_engine_params)
(define (synth_one_rate id text wavpath rate)
  (set! hts_engine_params (append tts_base_hts_params (list (list "-r" rate))))
  (synth_one id text wavpath)
  (set! hts_engine_params tts_base_hts_params))
"""


class FestivalError(RuntimeError):
    """Festival could not synthesise one sentence (the process itself may still be usable)."""


def scheme_string(text: str) -> str:
    """`text` as a Scheme string literal: backslashes and double quotes escaped, whitespace collapsed.

    Newlines/tabs would be harmless inside a Scheme string but would make the one-call-per-line
    protocol ambiguous; parentheses need no escaping inside a string literal.
    """
    flat = " ".join(text.split())
    return '"' + flat.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class PhoneSegment:
    phone: str
    end: float  # seconds from the start of the wav
    word: str | None  # None for pauses


@dataclass(frozen=True)
class TokenDaughter:
    is_word: bool
    name: str


@dataclass
class SynthResult:
    segments: list[PhoneSegment] = field(default_factory=list)
    tokens: list[list[TokenDaughter]] = field(default_factory=list)  # one list per Token item

    @property
    def words(self) -> list[str]:
        """Festival's word sequence (Word relation members of the token daughters, in order)."""
        return [d.name for tok in self.tokens for d in tok if d.is_word]

    def normalised_text(self) -> str:
        """Festival's expansion of the text, with the punctuation it split off put back in place.

        E.g. `It costs $3.50 (really), Mr. Smith's.` -> `It costs three dollars fifty (really), Mr Smith's.`
        Punctuation before a token's first word is a prefix, after its last word a suffix; a token
        made only of punctuation ("--" becomes ",") is glued to the previous word.
        """
        out: list[str] = []
        for tok in self.tokens:
            n_words = sum(d.is_word for d in tok)
            if n_words == 0:
                punct = "".join(d.name for d in tok)
                if out:
                    out[-1] += punct
                continue
            prefix, suffix, words = "", "", []
            for d in tok:
                if d.is_word:
                    words.append(d.name)
                elif words:
                    suffix += d.name
                else:
                    prefix += d.name
            joined = words[0]
            for w in words[1:]:
                joined += w if w.startswith("'") else " " + w  # "Smith" + "'s" -> "Smith's"
            out.append(prefix + joined + suffix)
        return " ".join(out)


def parse_reply(lines: list[str]) -> SynthResult:
    """Parse the protocol lines of one reply (without the final OK line)."""
    result = SynthResult()
    for line in lines:
        parts = line.split("\t")
        if parts[0] == "SEG" and len(parts) == 4:
            word = None if parts[3] == "0" and parts[1] == "pau" else parts[3]
            result.segments.append(PhoneSegment(phone=parts[1], end=float(parts[2]), word=word))
        elif parts[0] == "TOK":
            result.tokens.append([])
        elif parts[0] == "DTR" and len(parts) == 3 and result.tokens:
            result.tokens[-1].append(TokenDaughter(is_word=parts[1] == "w", name=parts[2]))
    return result


class FestivalProcess:
    """A `festival --pipe` child with the SLT voice loaded; `synth` is one request/reply."""

    def __init__(self, voice: str = VOICE, timeout_s: float = 120.0) -> None:
        for tool in ("festival", "stdbuf"):
            if shutil.which(tool) is None:
                raise FileNotFoundError(
                    f"`{tool}` not found on PATH: apt-get install -y --no-install-recommends "
                    "festival festvox-us-slt-hts festlex-cmu sox coreutils"
                )
        self.voice = voice
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    # --- process management ----------------------------------------------------------------------
    def start(self) -> None:
        self._proc = subprocess.Popen(
            ["stdbuf", "-oL", "-eL", "festival", "--pipe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            # Own session: a Ctrl-C in the terminal reaches only Python, which lets the in-flight
            # sentences finish; when Python exits, festival sees EOF on stdin and exits too.
            start_new_session=True,
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self._proc, self._lines), daemon=True).start()
        self._send(f'(voice_{self.voice})\n{SCHEME_PRELUDE}\n(format t "READY\\n")\n')
        while True:  # loading the voice takes ~0.3 s; a missing voice shows up as SIOD ERROR here
            line = self._next_line(time.monotonic() + self.timeout_s)
            if line == "READY":
                return
            if line.startswith("SIOD ERROR"):
                self.close()
                raise FileNotFoundError(f"festival could not load voice {self.voice!r}: {line}")

    @staticmethod
    def _pump(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)  # EOF: the process exited

    def _send(self, text: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(text)
        self._proc.stdin.flush()

    def _next_line(self, deadline: float) -> str:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise FestivalError(f"no reply from festival within {self.timeout_s:.0f} s") from None
        if line is None:
            rc = self._proc.wait() if self._proc else None
            raise FestivalError(f"festival exited (rc={rc})")
        return line

    def close(self) -> None:
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def __enter__(self) -> "FestivalProcess":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one sentence ----------------------------------------------------------------------------
    def synth(self, utt_id: str, text: str, wav_path: Path, rate: float = 1.0) -> SynthResult:
        """Synthesise `text` into `wav_path` (Festival's native 32 kHz riff). Raises FestivalError.

        `rate` != 1 is hts_engine's speaking-rate option `-r` for this one sentence (0.8 = slower: a
        3.13 s sentence becomes 3.93 s; the phone segment times follow); the voice's own parameters
        are restored after it.
        """
        if not 0.2 <= rate <= 5.0:
            raise ValueError(f"speaking rate {rate} outside [0.2, 5]")
        if self._proc is None or self._proc.poll() is not None:
            self.start()
        args = f"{scheme_string(utt_id)} {scheme_string(text)} {scheme_string(str(wav_path))}"
        call = f"(synth_one {args})\n" if rate == 1.0 else f"(synth_one_rate {args} {rate:.6f})\n"
        deadline = time.monotonic() + self.timeout_s
        lines: list[str] = []
        errors: list[str] = []
        try:
            self._send(call)
            while True:
                line = self._next_line(deadline)
                if line == f"OK\t{utt_id}":
                    return parse_reply(lines)
                if line == f"FAIL\t{utt_id}":
                    break
                if line.startswith("SIOD ERROR"):
                    errors.append(line)
                lines.append(line)
        except (FestivalError, OSError) as e:
            # A timeout or a dead process leaves the protocol out of step: kill, restart on next call.
            self._kill()
            raise FestivalError(str(e)) from e
        # A caught Scheme error: the process is still in step and is reused.
        raise FestivalError("; ".join(errors) or "Scheme error in synth_one")

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._proc = None
