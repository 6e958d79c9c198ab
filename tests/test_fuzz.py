"""The fuzz command (python -m recipes.bench.fuzz, issue 35 follow-up item 2): a few seconds against the real API give
a summary of the documented shape, and a voice broken on purpose (loaded into the fuzz worker by `--loader`) has
each kind of breakage reported: another exception, an empty message, non-finite, too loud or empty audio, a thread
left running, a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from recipes.bench import fuzz
from tts.paths import REPO_ROOT
from tts.text.errors import TextError

SHAPE = {"seconds", "load_s", "seed", "runtimes", "call_limit_s", "calls", "findings_count", "outcomes", "kinds",
         "by_class", "by_runtime", "finding_kinds", "findings", "quiet_examples", "refusals", "slowest_call",
         "worker_restarts", "worker_rss_mb"}


def test_a_short_run_against_the_api_writes_its_summary(tmp_path: Path):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, export_is_current

    if not export_is_current(DEFAULT_ONNX_DIR):
        pytest.skip(f"no current ONNX export at {DEFAULT_ONNX_DIR}: run python -m tts.export")
    r = subprocess.run([sys.executable, "-m", "recipes.bench.fuzz", "--seconds", "6", "--out", str(tmp_path),
                        "--runtime", "onnx", "torch", "--seed", "3"], cwd=REPO_ROOT, capture_output=True, text=True,
                       timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary) == SHAPE
    assert r.stdout.count("\n") == 1 and r.stdout.startswith(f"fuzz: {summary['calls']} calls"), r.stdout
    assert r.stderr == "", r.stderr  # the library's warnings went to worker.log
    assert (tmp_path / "worker.log").is_file()
    assert r.returncode == (1 if summary["findings_count"] else 0)
    assert summary["findings_count"] == 0, summary["findings"]  # the API holds: every call audio or a refusal
    assert summary["calls"] >= 5 and summary["calls"] == sum(summary["outcomes"].values())
    assert summary["calls"] == sum(sum(v.values()) for v in summary["by_class"].values())
    assert set(summary["by_runtime"]) <= {"onnx", "torch"} and summary["runtimes"] == ["onnx", "torch"]
    assert set(summary["kinds"]) == {"audio", "quiet", "refused", "finding"}
    assert all(k == "audio" or k == "quiet" or k.startswith("refused:") for k in summary["outcomes"])
    assert summary["worker_restarts"] == 0 and summary["worker_rss_mb"]["start"] > 0


def test_the_cases_are_seeded_and_hostile():
    """A seed gives the same cases; the classes and the controls cover what the issue names."""
    first = [c.describe() for c in _take(fuzz.cases(7, ["onnx", "torch"]), 400)]
    assert first == [c.describe() for c in _take(fuzz.cases(7, ["onnx", "torch"]), 400)]
    assert {c["text_class"] for c in first} == set(fuzz.TEXT_CLASSES)
    assert {c["method"] for c in first} == {"synthesize", "stream", "stream_abandoned"}
    texts = [c.text for c in _take(fuzz.cases(7, ["onnx"]), 2000) if isinstance(c.text, str)]
    joined = "".join(texts)
    for needle in ("\x00", "\u202e", "\u0301", "🇬🇧", "1e308", "≥", "\u200b"):
        assert needle in joined, ascii(needle)
    assert any(0xD800 <= ord(ch) <= 0xDFFF for ch in joined)  # lone surrogates
    assert any(t == "" for t in texts) and max(len(t) for t in texts) > 1000
    values = [v for c in _take(fuzz.cases(7, ["onnx"]), 2000) for v in c.kwargs.values()]
    assert any(isinstance(v, float) and v != v for v in values) and any(isinstance(v, str) for v in values)


def _take(source, n):
    return [next(source) for _ in range(n)]


class BrokenVoice:
    """A voice with one breakage per input class, to test the fuzzer itself (no model: instant)."""

    sample_rate = 22050

    def _audio(self, text, **kwargs) -> np.ndarray:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        unknown = set(kwargs) - {"speed", "seed", "pitch_shift", "refine_steps", "temperature", "batch_size"}
        if unknown:
            raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r}")
        if not text.strip():
            raise ValueError("")  # a refusal without a message
        if "🙂" in text:
            raise RuntimeError("the engine broke")  # another exception
        marker = Path(os.environ.get("FUZZ_TEST_HANG_MARKER", "/nonexistent/marker"))
        if "Hello there." in text and marker.parent.is_dir() and not marker.exists():
            marker.touch()  # once in a run (the worker started again after it does not hang again)
            time.sleep(3600)  # a hang
        if "≥" in text:
            return np.full(100, np.nan, np.float32)  # non-finite audio
        if "@" in text:
            return np.full(100, 1.5, np.float32)  # past full scale
        if "\u202e" in text:
            return np.zeros(0, np.float32)  # no audio
        if "%s%s%n" in text:
            json.loads("{")  # a ValueError from inside a library: a bug, not a refusal
        if "Oh." in text:
            raise TextError("nothing speakable here")  # a proper refusal
        return (0.1 * np.sin(np.arange(2205, dtype=np.float32))).astype(np.float32)

    def synthesize(self, text, **kwargs):
        class Audio:
            samples = self._audio(text, **kwargs)

        return Audio()

    def stream(self, text, **kwargs):
        wave = self._audio(text, **kwargs)  # checked at the call, as the real stream
        if "Go!" in text:  # the old ONNX stream: a producer thread that blocks forever once abandoned
            threading.Thread(target=threading.Event().wait, daemon=True).start()
        return iter([wave[: wave.size // 2], wave[wave.size // 2 :]])


def broken_voice(runtime: str) -> BrokenVoice:
    return BrokenVoice()


def test_a_broken_voice_is_reported(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("FUZZ_TEST_HANG_MARKER", str(tmp_path / "hung"))  # the spawned worker inherits it
    code = fuzz.main(["--seconds", "8", "--out", str(tmp_path), "--runtime", "onnx", "--call-limit", "2",
                      "--loader", f"{__name__}:broken_voice"])
    line = capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 1 and line.count("\n") == 1 and f"{summary['findings_count']} findings" in line, line
    kinds = summary["finding_kinds"]
    for kind in ("exception:RuntimeError", "no message:ValueError", "non-finite audio", "audio past full scale",
                 "no audio", "hang", "thread left running", "internal:JSONDecodeError"):
        assert kinds.get(kind, 0) > 0, (kind, kinds)
    assert summary["worker_restarts"] == kinds["hang"] == 1  # the worker killed and started again
    assert summary["outcomes"].get("refused:TextError", 0) > 0 and summary["outcomes"].get("refused:TypeError", 0) > 0
    by_kind = {f["what"]: f for f in summary["findings"]}
    assert "\\U0001f642" in by_kind["exception:RuntimeError"]["input"]["text"]  # the input's repr, ascii()
    assert "the engine broke" in by_kind["exception:RuntimeError"]["message"]
    assert "RuntimeError" in by_kind["exception:RuntimeError"]["traceback"]
    assert "Hello there." in by_kind["hang"]["input"]["text"] and by_kind["hang"]["message"] == "no answer within 2 s"
    assert summary["findings_count"] == sum(kinds.values()) >= len(summary["findings"])
