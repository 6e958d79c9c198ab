"""Fuzz the Python API, the CLI and the speech server with hostile input, for a bounded time (issue 35).

    python -m recipes.bench.fuzz --target api cli server --minutes 2 --seed 1 --out DIR
        [--runtime onnx torch] [--call-limit 45] [--memory-bound-mb 2500] [--cli-command ...] [--server-command ...]

Each target runs for --seconds / --minutes, one after the other.  "cli" and "server" (recipes.bench.fuzz_targets)
drive real `python -m tts.synthesize` processes and a real `python -m tts.serve` started here (HTTP and raw
sockets) with the text classes below; their findings are described there.  "api":

Each call is `voice.synthesize(text, **controls)` or `voice.stream(text, **controls)` (consumed whole, or abandoned
after its first chunk) on a voice of `tts.load(runtime=...)`, with text drawn from hostile classes (random Unicode
with controls, lone surrogates, bidi and format characters; right-to-left scripts; combining marks; huge numbers;
symbols; very long words; empty and whitespace; emoji sequences; mixed scripts; markup; punctuation runs; mutated
English; objects that are not text) and controls drawn valid, at their bounds, past them, non-finite, of the wrong
type, or unknown.  A call must either return finite float32 audio in [-1, 1] (not empty), or raise
tts.text.errors.TextError, ValueError or TypeError with a message.  Anything else is a finding: another exception,
an empty message, a ValueError/TypeError raised inside a library (numpy's, torch's: a bug, not a refusal),
non-finite, out-of-range or empty audio, a thread left running after the call (an abandoned stream's), a worker
that dies, or a call that runs past `--call-limit` seconds (a hang: the calls are sized to finish in a few seconds,
texts over LONG_TEXT characters get only cheap controls).  Near-silent audio of an accepted text is counted
("quiet") and kept as examples, not a finding (a text of one letter can be near-silent).  The refusals are counted
by message (`refusals`), for a reader to audit.  The calls run in a worker process (the voices loaded once), so
that a hang can be stopped: the worker is killed and started again.

Writes DIR/summary.json (per target under its name: calls, outcomes by kind and by class, findings with their
input; "by_target": each target's counts), DIR/findings/TARGET-NNN.json + .input.bin (reproducers: the first 50
findings of a target, then the first of each kind), DIR/worker.log (the library's warnings) and DIR/server.log;
prints a line per target and a total, and exits 1 when there are findings.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import multiprocessing
import random
import re
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recipes.bench.proc import status_mb

LONG_TEXT = 300  # characters: longer texts get only cheap controls (speed >= 0.5, refine_steps <= 4)
QUIET_RMS = 1e-4  # -80 dBFS: accepted audio this quiet is counted as "quiet" (a note, not a finding)
MAX_FINDINGS = 200  # findings kept in the summary (all are counted)
MAX_EXAMPLES = 5  # examples kept per kind of finding and of quiet audio
RSS_EVERY = 50  # calls between two readings of the worker's memory
REFUSALS = ("TextError", "ValueError", "TypeError")


# --- the cases --------------------------------------------------------------------------------------------------
@dataclass
class Case:
    runtime: str
    method: str  # "synthesize" | "stream" | "stream_abandoned"
    text_class: str
    text: Any  # usually a str (possibly with lone surrogates), else an object that is not one
    kwargs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """The input, JSON-safe (ascii() reprs: lone surrogates and controls escaped)."""
        text = ascii(self.text)
        return {"runtime": self.runtime, "method": self.method, "text_class": self.text_class,
                "text": text if len(text) <= 600 else text[:600] + f"... ({len(text)} chars of repr)",
                "text_len": len(self.text) if isinstance(self.text, str) else None,
                "kwargs": {k: ascii(v) for k, v in self.kwargs.items()}}


ENGLISH = ["The quick brown fox jumps over the lazy dog.", "Hello there.", "It was not amused!", "Is this the way?",
           "Please call me at five.", "Numbers like 42 and 3.14 appear here.", "Dr. Smith lives on Main St.",
           "She said, \"Wait for me.\"", "A.", "Oh.", "I.", "Go!", "Yes, it is.", "Well... maybe; maybe not."]
RTL = ["مرحبا بالعالم", "שלום עולם", "١٢٣٤٥٦٧٨٩٠", "۱۲۳", "كتاب", "עברית", "\u202eevil\u202c", "\u2067abc\u2069",
       "\u200f", "\u200e", "ﷺ", "ﷲ"]
SCRIPTS = ["Привет", "мир", "Ελληνικά", "αβγ", "日本語", "中文字", "한국어", "हिन्दी", "ไทย", "ქართული", "Հայերեն",
           "ᚠᚢᚦ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ｆｕｌｌｗｉｄｔｈ", "ǅemal", "ﬁnance", "Straße", "İstanbul", "paсsword", "ℌ𝔢𝔩𝔩𝔬"]
SYMBOLS = list("≥≤±÷×∞π½¼¾⅓⅔⅛′″‴²³¹√∑∏∫∂∆∇∈∉∀∃→←⇒⇔↔©®™§¶†‡•…‰‱※‽⁂℃℉№℗℠Ω℧℮∅∩∪⊂⊃≈≠≡∝∠⊥∥°µ¢£¥€₹₿¤"
               "♠♣♥♦♪♫☃☂★☆✓✗✔✘─│┌┐└┘╔╗╚╝█▓▒░■□▲△▼▽◆◇○●◎") + ["+", "-", "*", "/", "=", "<", ">", "^", "%", "&",
                                                                "@", "#", "$", "~", "|", "\\", "_", "`"]
EMOJI = ["🙂", "😂", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇬🇧", "🇺🇸🇫🇷", "1️⃣", "#️⃣", "❤️", "🧑🏿‍🚀", "🫠", "🀄", "🂡",
         "\U000E0067\U000E0062", "🏴\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F"]
EMPTY = ["", " ", "\n", "\t", "\r\n", "   \n\t  ", "\u3000", "\u200b", "\u2060", "\ufeff", "\u00a0", "\u2028\u2029",
         ".", "...", "!!!", "?", "—", "-", ",,,,", "\u0301", "\x00", " \x00 ", "\u180e", "\u00ad"]
MARKUP = ["<speak>Hi<break time='1s'/></speak>", "<b>bold</b>", "https://example.com/a?b=c&d=e#f",
          "mailto:someone@example.com", "C:\\Windows\\System32", "/dev/null", "{\"a\": [1, 2, {\"b\": null}]}",
          "def f(x): return x ** 2", "SELECT * FROM users; --", "&amp;&lt;&gt;&#x27;", "${HOME}", "%s%s%n",
          "../../etc/passwd", "[[link]]", "**bold** _it_", "`code`", "a\\nb", "\\u0000"]
NUMBERS = ["0", "-0", "1e308", "1e-308", "-1e309", "10^999", "2**64", "1/0", "0/0", "NaN", "inf", "-inf",
           "3.14159265358979323846264338327950288", "1,000,000,000,000,000,000", "1.2.3.4", "12:34:56", "25:61",
           "31/02/2020", "2020-13-45", "1st 2nd 3rd 1000000000000th", "$1e9", "£-3", "€0.000001", "100%", "-5°C",
           "6'2\"", "5′11″", "+1 (555) 010-9999", "0x1F", "0b1010", "1_000", "MMXXV", "XIV", "ⅻ", "½", "٣٫١٤",
           "१२३", "一二三", "⑩", "²³", "1,2,3,4,5,6,7,8,9,10", "1-2-3", "3/4/5/6", "12345678901234567890"]


def _random_codepoint(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.25:
        return chr(rng.randint(0x20, 0x7E))
    if kind < 0.35:
        return chr(rng.choice([*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]))  # C0 and C1 controls
    if kind < 0.45:
        return chr(rng.randint(0xA0, 0x24F))
    if kind < 0.50:
        return chr(rng.randint(0xD800, 0xDFFF))  # a lone surrogate
    if kind < 0.55:
        return chr(rng.choice([0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
                               0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF, 0xFFFE, 0xFFFF, 0xFFFD, 0x2028, 0x2029]))
    if kind < 0.62:
        return chr(rng.randint(0x300, 0x36F))  # combining marks
    if kind < 0.67:
        return chr(rng.randint(0xE000, 0xF8FF))  # private use
    if kind < 0.85:
        return chr(rng.randint(0x250, 0xFFFD))
    return chr(rng.randint(0x10000, 0x10FFFF))


def _words(rng: random.Random, pool: list[str], n: int) -> str:
    return " ".join(rng.choice(pool) for _ in range(n))


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 8)):
        op = rng.random()
        pos = rng.randint(0, len(chars))
        if op < 0.4:
            chars[pos:pos] = list(rng.choice([_random_codepoint(rng), rng.choice(SYMBOLS), rng.choice(EMOJI),
                                              rng.choice(NUMBERS), rng.choice(RTL), "\x00", "\u0301" * 20]))
        elif op < 0.6 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op < 0.8 and chars:
            a = rng.randint(0, len(chars) - 1)
            chars[pos:pos] = chars[a : a + rng.randint(1, 20)] * rng.randint(1, 5)
        else:
            chars = [c.swapcase() if rng.random() < 0.5 else c for c in chars]
    return "".join(chars)


class Opaque:
    """An object of no meaning to any control (repr stable, for the seeded cases)."""

    def __repr__(self) -> str:
        return "Opaque()"


class StrSubclass(str):
    """A str subclass (accepted as text)."""


class NotText:
    """An object whose str() is text, but which is not a str (refused as text)."""

    def __str__(self) -> str:
        return "Hello."

    def __repr__(self) -> str:
        return "NotText()"


TEXT_CLASSES = ("random_unicode", "controls", "rtl", "combining", "numbers", "symbols", "long_word", "empty", "emoji",
                "mixed_scripts", "english", "markup", "punctuation", "mutated", "mixed", "non_str")


def _text(rng: random.Random, mixed: bool = True) -> tuple[str, Any]:
    """(class, text): one hostile input ("mixed": several of the others joined)."""
    cls = rng.choice([c for c in TEXT_CLASSES if mixed or c not in ("mixed", "non_str")])
    if cls == "random_unicode":
        return cls, "".join(_random_codepoint(rng) for _ in range(rng.randint(0, 200)))
    if cls == "controls":
        words = rng.choice(ENGLISH).split()
        return cls, "".join(w + chr(rng.choice([*range(0x20), 0x7F, 0x85, 0x2028, 0x2029])) for w in words)
    if cls == "rtl":
        return cls, _words(rng, RTL + ENGLISH[:3] + NUMBERS[:5], rng.randint(1, 12))
    if cls == "combining":
        base = rng.choice(ENGLISH)
        return cls, "".join(c + "".join(chr(rng.randint(0x300, 0x36F)) for _ in range(rng.randint(0, 30)))
                            for c in base)
    if cls == "numbers":
        parts = [rng.choice(NUMBERS) for _ in range(rng.randint(1, 6))]
        if rng.random() < 0.3:
            parts.append("".join(rng.choice("0123456789") for _ in range(rng.randint(20, 600))))
        if rng.random() < 0.2:
            parts.append("9" * rng.randint(1, 400) + "." + "9" * rng.randint(1, 400))
        return cls, " ".join(parts) + rng.choice(["", ".", "!", " and more."])
    if cls == "symbols":
        return cls, "".join(rng.choice([*SYMBOLS, " ", " x ", "3", "a"]) for _ in range(rng.randint(1, 80)))
    if cls == "long_word":
        letters = "abcdefghijklmnopqrstuvwxyz" if rng.random() < 0.8 else "ab"
        word = "".join(rng.choice(letters) for _ in range(rng.randint(50, 1200)))
        if rng.random() < 0.3:
            word = "-".join(word[i : i + 7] for i in range(0, len(word), 7))
        return cls, rng.choice(["", "Say ", "The word is "]) + word + rng.choice(["", ".", "?"])
    if cls == "empty":
        return cls, "".join(rng.choice(EMPTY) for _ in range(rng.randint(0, 5)))
    if cls == "emoji":
        return cls, _words(rng, EMOJI + ["and", "I", "love", "it"], rng.randint(1, 10))
    if cls == "mixed_scripts":
        return cls, _words(rng, SCRIPTS + ENGLISH[:4] + RTL[:2], rng.randint(1, 10)) + rng.choice(["", ".", "?"])
    if cls == "english":
        return cls, " ".join(rng.choice(ENGLISH) for _ in range(rng.randint(1, 8)))
    if cls == "markup":
        return cls, _words(rng, MARKUP + ENGLISH[:2], rng.randint(1, 5))
    if cls == "punctuation":
        return cls, "".join(rng.choice(".,;:!?-—–()[]{}\"'«»„“”‘’…/\\|*") for _ in range(rng.randint(1, 300))) + \
            rng.choice(["", " word", "Hello."])
    if cls == "mutated":
        return cls, _mutate(rng, " ".join(rng.choice(ENGLISH) for _ in range(rng.randint(1, 4))))
    if cls == "mixed":
        parts = [_text(rng, mixed=False)[1] for _ in range(rng.randint(2, 4))]
        return cls, " ".join(t for t in parts if isinstance(t, str))
    return cls, rng.choice([None, b"Hello.", bytearray(b"Hi."), 42, 3.5, ["Hello."], ("Hi.",), {"text": "Hi."},
                            NotText(), StrSubclass("A str subclass."), True, 1j])


def _value(rng: random.Random, name: str) -> Any:
    """A value for control `name`: valid, at a bound, past it, non-finite, the wrong type."""
    from tts.runtime.controls import RANGES

    low, high = RANGES.get(name, (1, 256))  # batch_size: MAX_BATCH_SIZE
    integer = name in ("refine_steps", "seed", "batch_size")
    kind = rng.random()
    if kind < 0.45:  # valid
        return rng.randint(int(low), int(min(high, 10**6))) if integer else rng.uniform(low, high)
    if kind < 0.6:
        return rng.choice([low, high]) if not integer else int(rng.choice([low, high]))
    if kind < 0.7:
        return rng.choice([low - 1, high + 1, -high - 1, high * 10]) if integer else \
            rng.choice([low - 1e-6, high + 1e-6, -high, high * 100, 1e308, -1e308, 5e-324])
    if kind < 0.8:
        return rng.choice([math.nan, math.inf, -math.inf])
    if kind < 0.9:
        import numpy as np

        return rng.choice([np.float32(1.25), np.float64(math.nan), np.int64(2), np.int32(-1), np.bool_(True),
                           np.uint64(2**64 - 1), np.float16(0.5), np.array(1.5), np.array([1, 2])])
    return rng.choice(["2", "", None, True, False, [1], (1,), {"v": 1}, 1 + 2j, 1.5, 2.0, 2**64, -(2**63), b"1",
                       Opaque()])


def _kwargs(rng: random.Random, method: str, text: Any) -> dict[str, Any]:
    if rng.random() < 0.35:
        return {}
    names = ["speed", "seed", "pitch_shift", "refine_steps", "temperature"] + (["batch_size"] if method == "synthesize" else [])
    kwargs = {name: _value(rng, name) for name in rng.sample(names, rng.randint(1, 3))}
    if rng.random() < 0.03:
        kwargs[rng.choice(["volume", "block_frames", "text", "voice"])] = 1
    if isinstance(text, str) and len(text) > LONG_TEXT:  # cheap controls only: the call limit is a hang detector
        for name, ok in (("speed", lambda v: isinstance(v, (int, float)) and not v < 0.5),
                         ("refine_steps", lambda v: isinstance(v, int) and not v > 4)):
            if name in kwargs and not ok(kwargs[name]):
                del kwargs[name]
    elif isinstance(kwargs.get("refine_steps"), int) and kwargs["refine_steps"] > 8 \
            and isinstance(kwargs.get("speed"), float) and kwargs["speed"] < 0.3:
        del kwargs["speed"]  # 32 refiner steps over 10x the frames: a minute on a loaded CPU, not a hang
    return kwargs


def cases(seed: int, runtimes: list[str]):
    """An endless, seeded stream of Cases."""
    rng = random.Random(seed)
    while True:
        text_class, text = _text(rng)
        method = rng.choice(["synthesize", "synthesize", "stream", "stream_abandoned"])
        yield Case(rng.choice(runtimes), method, text_class, text, _kwargs(rng, method, text))


# --- one call, in the worker ------------------------------------------------------------------------------------
def run_case(voice: Any, case: Case) -> dict[str, Any]:
    """-> {"kind": "audio" | "quiet" | "refused" | "finding", "what": ..., ...}."""
    import numpy as np

    waves: list[Any] = []
    try:
        if case.method == "synthesize":
            waves.append(voice.synthesize(case.text, **case.kwargs).samples)
        else:
            stream = voice.stream(case.text, **case.kwargs)
            try:
                for chunk in stream:
                    waves.append(chunk)
                    if case.method == "stream_abandoned" and getattr(chunk, "size", 0):
                        break
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
    except Exception as e:  # classified below: a refusal with a message, or a finding
        name = type(e).__name__
        refused = next((r for r in REFUSALS if any(c.__name__ == r for c in type(e).__mro__)), None)
        message = str(e).strip()
        where = traceback.extract_tb(e.__traceback__)[-1].filename if e.__traceback__ else ""
        internal = "site-packages" in where or where.startswith(sys.base_prefix)  # numpy's, torch's, the stdlib's
        if refused is not None and message and not internal:
            return {"kind": "refused", "what": f"refused:{refused}", "error": name, "message": message[:300]}
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        what = ("exception" if refused is None else "internal" if internal else "no message") + f":{name}"
        return {"kind": "finding", "what": what, "message": message[:500], "traceback": "".join(tb[-4:])[-2000:]}
    for k, wave in enumerate(waves):
        if not isinstance(wave, np.ndarray) or wave.dtype != np.float32 or wave.ndim != 1:
            return {"kind": "finding", "what": "not float32 [n] audio",
                    "message": f"chunk {k}: {type(wave).__name__} {getattr(wave, 'dtype', '')} {getattr(wave, 'shape', '')}"}
        if not np.isfinite(wave).all():
            return {"kind": "finding", "what": "non-finite audio", "message": f"chunk {k}: {int((~np.isfinite(wave)).sum())} samples"}
        if wave.size and float(np.abs(wave).max()) > 1.0:
            return {"kind": "finding", "what": "audio past full scale", "message": f"chunk {k}: peak {float(np.abs(wave).max())}"}
    samples = np.concatenate(waves) if waves else np.zeros(0, np.float32)
    if not samples.size:
        return {"kind": "finding", "what": "no audio", "message": "an accepted text gave no samples"}
    rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
    seconds = samples.size / voice.sample_rate
    if rms < QUIET_RMS and case.method != "stream_abandoned":  # an abandoned stream's first chunk may be a pause
        return {"kind": "quiet", "what": "quiet", "message": f"{seconds:.2f} s at {20 * math.log10(rms + 1e-12):.0f} dBFS"}
    return {"kind": "audio", "what": "audio", "seconds": seconds}


def load_voice(runtime: str) -> Any:
    """The default loader: the shipped default voice on `runtime`, one thread."""
    import tts

    return tts.load(runtime=runtime, threads=1)


def _rss_mb() -> float:
    """This process's resident memory in MiB (nan off Linux)."""
    rss = status_mb("VmRSS")
    return float("nan") if rss is None else rss


def _worker(conn: Any, runtimes: list[str], loader: str, log: str) -> None:
    """Load the voices, then answer cases until None.  The library's warnings (characters dropped, espeak
    fallbacks: thousands in a run) go to the `log` file, not the console."""
    import logging
    import warnings

    logging.basicConfig(filename=log, level=logging.WARNING, force=True)
    logging.captureWarnings(True)
    warnings.simplefilter("default")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    module, _, name = loader.partition(":")
    load = getattr(importlib.import_module(module), name)
    voices = {runtime: load(runtime) for runtime in runtimes}
    threads = threading.active_count()
    conn.send(("ready", _rss_mb()))
    while True:
        case = conn.recv()
        if case is None:
            conn.send(("rss", _rss_mb()))
            return
        t0 = time.perf_counter()
        outcome = run_case(voices[case.runtime], case)
        outcome["call_s"] = time.perf_counter() - t0
        if threading.active_count() > threads and outcome["kind"] != "finding":  # e.g. an abandoned stream's
            outcome = {"kind": "finding", "what": "thread left running",
                       "message": f"{threading.active_count() - threads} more thread(s) after the call: "
                                  f"{[t.name for t in threading.enumerate()]}"}
            threads = threading.active_count()
        outcome["rss_mb"] = _rss_mb()
        conn.send(outcome)


class Worker:
    """The worker process and its pipe; `call` runs one case with a time limit (None: it hung or died)."""

    def __init__(self, runtimes: list[str], loader: str, log: Path, start_limit: float = 300.0) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, runtimes, loader, str(log)), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(start_limit):
            self.kill()
            raise RuntimeError(f"the fuzz worker did not load the voices within {start_limit:.0f} s")
        try:
            _, self.rss_start_mb = self.conn.recv()
        except EOFError:
            self.kill()
            raise RuntimeError(f"the fuzz worker died loading the voices (exit {self.proc.exitcode})") from None

    def call(self, case: Case, limit: float) -> dict[str, Any] | None:
        try:
            self.conn.send(case)
            if self.conn.poll(limit):
                return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            pass
        return None

    def stop(self) -> float | None:
        """Stop it; its RSS at the end (MB), or None when it did not answer."""
        rss = None
        try:
            self.conn.send(None)
            if self.conn.poll(10):
                rss = self.conn.recv()[1]
        except (EOFError, OSError):
            pass
        self.proc.join(10)
        self.kill()
        return rss

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)


# --- the run ----------------------------------------------------------------------------------------------------
def fuzz_api(seconds: float, out: Path, runtimes: list[str], seed: int = 0, call_limit: float = 45.0,
             loader: str = "recipes.bench.fuzz:load_voice", memory_bound_mb: float = 2500.0) -> dict[str, Any]:
    """Run API cases for `seconds` (the last call may run up to `call_limit` past it); the API's summary.  A call
    after which the worker's RSS is over `memory_bound_mb` above its level after loading is a finding ("memory":
    the worker is started again)."""
    out.mkdir(parents=True, exist_ok=True)
    t_load = time.perf_counter()
    log = out / "worker.log"
    log.unlink(missing_ok=True)
    worker = Worker(runtimes, loader, log)
    load_s = time.perf_counter() - t_load
    rss_start = worker.rss_start_mb
    outcomes: Counter[str] = Counter()
    by_class: dict[str, Counter[str]] = {}
    by_runtime: dict[str, Counter[str]] = {}
    findings: list[dict[str, Any]] = []
    finding_kinds: Counter[str] = Counter()
    quiet: list[dict[str, Any]] = []
    refusals: Counter[str] = Counter()
    rss_curve: list[list[float]] = []  # [calls, worker RSS MB] every RSS_EVERY calls: a leak grows, caches level off
    slowest: tuple[float, dict[str, Any]] = (0.0, {})
    restarts = calls = 0
    t0 = time.perf_counter()
    source = cases(seed, runtimes)
    while time.perf_counter() - t0 < seconds:
        case = next(source)
        calls += 1
        t_call = time.perf_counter()
        outcome = worker.call(case, call_limit)
        if outcome is None:
            alive = worker.proc.is_alive()
            worker.kill()
            outcome = {"kind": "finding", "what": "hang" if alive else "worker died",
                       "message": (f"no answer within {call_limit:.0f} s" if alive
                                   else f"the worker process exited with {worker.proc.exitcode}")}
            restarts += 1
            worker = Worker(runtimes, loader, log)
        elif outcome.get("rss_mb", 0) - worker.rss_start_mb > memory_bound_mb and outcome["kind"] != "finding":
            outcome = {"kind": "finding", "what": "memory", "call_s": outcome["call_s"], "rss_mb": outcome["rss_mb"],
                       "message": f"worker RSS {worker.rss_start_mb:.0f} -> {outcome['rss_mb']:.0f} MB"}
            worker.stop()
            restarts += 1
            worker = Worker(runtimes, loader, log)
        outcome.setdefault("call_s", time.perf_counter() - t_call)
        if calls % RSS_EVERY == 0 and "rss_mb" in outcome:
            rss_curve.append([calls, round(outcome["rss_mb"], 1)])
        outcomes[outcome["what"]] += 1
        by_class.setdefault(case.text_class, Counter())[outcome["kind"]] += 1
        by_runtime.setdefault(case.runtime, Counter())[outcome["kind"]] += 1
        if outcome["call_s"] > slowest[0]:
            slowest = (outcome["call_s"], {**case.describe(), "outcome": outcome["what"]})
        if outcome["kind"] == "finding":
            signature = f"{outcome['what']}: {str(outcome.get('message', ''))[:80]}"
            finding_kinds[outcome["what"]] += 1
            if len(findings) < MAX_FINDINGS:
                findings.append({"signature": signature, **outcome, "input": case.describe()})
        elif outcome["kind"] == "quiet" and len(quiet) < MAX_EXAMPLES * 4:
            quiet.append({"message": outcome["message"], "input": case.describe()})
        elif outcome["kind"] == "refused":  # by message, numbers and quoted text folded: what a reader audits
            refusals[f"{outcome['error']}: {_fold(outcome['message'])}"] += 1
    wall = time.perf_counter() - t0
    rss_end = worker.stop()
    summary = {
        "seconds": round(wall, 1), "load_s": round(load_s, 1), "seed": seed, "runtimes": runtimes,
        "call_limit_s": call_limit, "calls": calls, "findings_count": sum(finding_kinds.values()),
        "outcomes": dict(sorted(outcomes.items())),
        "kinds": dict(sorted(Counter({k: sum(c[k] for c in by_runtime.values())
                                      for k in ("audio", "quiet", "refused", "finding")}).items())),
        "by_class": {k: dict(sorted(v.items())) for k, v in sorted(by_class.items())},
        "by_runtime": {k: dict(sorted(v.items())) for k, v in sorted(by_runtime.items())},
        "finding_kinds": dict(finding_kinds), "findings": findings, "quiet_examples": quiet,
        "refusals": dict(refusals.most_common(60)),
        "slowest_call": {"seconds": round(slowest[0], 2), **slowest[1]},
        "worker_restarts": restarts,
        "worker_rss_mb": {"start": rss_start, "every_calls": rss_curve, "end": rss_end},
    }
    return summary


def _fold(message: str) -> str:
    """A refusal's message with its particulars (quoted text, numbers) replaced, so that alike ones count together."""
    message = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "'…'", message)
    return re.sub(r"-?\d+(?:[.e][+-]?\d+)*", "N", message)[:140]


TARGETS = ("api", "cli", "server")


def fuzz(seconds: float, out: Path, runtimes: list[str], seed: int = 0, call_limit: float = 45.0,
         loader: str = "recipes.bench.fuzz:load_voice", targets: tuple[str, ...] | list[str] = TARGETS,
         cli_command: str | None = None, server_command: str | None = None,
         memory_bound_mb: float | None = None) -> dict[str, Any]:
    """Fuzz each of `targets` for `seconds`, one after the other; write out/summary.json ({"seconds", "seed",
    "targets", "calls", "findings_count", "by_target": {target: {"calls", "findings_count", "kinds",
    "finding_kinds"}}, and each target's full summary under its name}) and each finding's input under
    out/findings/; return the summary."""
    from recipes.bench import fuzz_targets as ft

    out.mkdir(parents=True, exist_ok=True)
    bound = ft.MEMORY_BOUND_MB if memory_bound_mb is None else memory_bound_mb
    t0 = time.perf_counter()
    parts: dict[str, dict[str, Any]] = {}
    for target in targets:
        if target == "api":
            parts[target] = fuzz_api(seconds, out, runtimes, seed, call_limit, loader, bound)
            repro = ft._Reproducers(out, "api")
            for finding in parts[target]["findings"]:
                finding["input"]["reproducer"] = repro.write(
                    {**finding["input"], "note": "the call: voice.<method>(<text>, **kwargs); text and kwargs are "
                     "Python reprs (ascii()); input.bin is the text's repr"}, finding["input"]["text"].encode(),
                    finding["what"])
        elif target == "cli":
            parts[target] = ft.fuzz_cli(seconds, out, seed, call_limit, cli_command or ft.CLI_COMMAND, bound)
        else:
            parts[target] = ft.fuzz_server(seconds, out, seed, call_limit, server_command or ft.SERVER_COMMAND, bound)
    summary = {"seconds": round(time.perf_counter() - t0, 1), "seed": seed, "targets": list(targets),
               "calls": sum(p["calls"] for p in parts.values()),
               "findings_count": sum(p["findings_count"] for p in parts.values()),
               "by_target": {t: {"calls": p["calls"], "findings_count": p["findings_count"], "kinds": p["kinds"],
                                 "finding_kinds": p["finding_kinds"]} for t, p in parts.items()},
               **parts}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def summary_lines(summary: dict[str, Any], out: Path) -> list[str]:
    """One line per target, then the total:
    fuzz api: N calls in S s (onnx n, torch n): a audio, q quiet, r refused, f findings (kind n, ...)
    fuzz: N calls, F findings -> out/summary.json"""
    lines = []
    for target, t in summary["by_target"].items():
        k, part = t["kinds"], summary[target]
        where = (" (" + ", ".join(f"{r} {sum(v.values())}" for r, v in part["by_runtime"].items()) + ")"
                 if target == "api" else "")
        kinds = ", ".join(f"{what} {n}" for what, n in t["finding_kinds"].items())
        lines.append(f"fuzz {target}: {t['calls']} calls in {part['seconds']:.0f} s{where}: {k.get('audio', 0)} audio, "
                     + (f"{k.get('quiet', 0)} quiet, " if "quiet" in k else "")
                     + f"{k.get('refused', 0)} refused, {t['findings_count']} findings"
                     + (f" ({kinds})" if kinds else ""))
    lines.append(f"fuzz: {summary['calls']} calls in {summary['seconds']:.0f} s, {summary['findings_count']} findings "
                 f"-> {out / 'summary.json'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.bench.fuzz", description=__doc__.split("\n\n")[0])
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--seconds", type=float, help="how long to fuzz each target (the last call may run past it)")
    when.add_argument("--minutes", type=float, help="the same in minutes")
    p.add_argument("--out", type=Path, required=True, help="folder for summary.json, findings/ and the logs")
    p.add_argument("--target", nargs="+", choices=TARGETS, default=list(TARGETS),
                   help="what to fuzz, one after the other: the Python API (in a worker process), the CLI "
                        "(python -m tts.synthesize processes), the server (a python -m tts.serve started here, "
                        "over HTTP and raw sockets); default all")
    p.add_argument("--runtime", nargs="+", choices=["onnx", "torch"], default=["onnx", "torch"],
                   help="api: the engines to call (tts.load(runtime=...)), alternating at random")
    p.add_argument("--seed", type=int, default=0, help="the cases' seed (a run is repeatable case for case)")
    p.add_argument("--call-limit", type=float, default=45.0, help="seconds one call may take before it is a hang")
    p.add_argument("--loader", default="recipes.bench.fuzz:load_voice",
                   help="api: MODULE:FUNCTION (runtime) -> voice, run in the worker (tests inject a broken voice)")
    p.add_argument("--cli-command", default=None,
                   help="cli: the command to run, shell words (default: this python -m tts.synthesize; tests point "
                        "it at a broken stand-in)")
    p.add_argument("--server-command", default=None,
                   help="server: the command to start, given --host and --port after these words (default: this "
                        "python -m tts.serve --rate-limit 0 --threads 1 --header-timeout 3 --body-timeout 3)")
    p.add_argument("--memory-bound-mb", type=float, default=None,
                   help="api: the worker's RSS rise over its level after loading, cli: a child's peak RSS, server: its "
                        "RSS rise over its level after start, past which a case is a finding (default 2500)")
    args = p.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else args.minutes * 60
    if not seconds > 0 or not args.call_limit > 0:
        p.error("--seconds/--minutes and --call-limit must be > 0")
    summary = fuzz(seconds, args.out, args.runtime, args.seed, args.call_limit, args.loader,
                   list(dict.fromkeys(args.target)), args.cli_command, args.server_command, args.memory_bound_mb)
    print("\n".join(summary_lines(summary, args.out)))
    return 1 if summary["findings_count"] else 0


if __name__ == "__main__":
    sys.exit(main())
