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
    r = subprocess.run([sys.executable, "-m", "recipes.bench.fuzz", "--target", "api", "--seconds", "6", "--out",
                        str(tmp_path), "--runtime", "onnx", "torch", "--seed", "3"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    whole = json.loads((tmp_path / "summary.json").read_text())
    assert whole["targets"] == ["api"] and set(whole["by_target"]) == {"api"}
    summary = whole["api"]
    assert set(summary) == SHAPE
    assert r.stdout.count("\n") == 2 and r.stdout.startswith(f"fuzz api: {summary['calls']} calls"), r.stdout
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
    code = fuzz.main(["--target", "api", "--seconds", "8", "--out", str(tmp_path), "--runtime", "onnx",
                      "--call-limit", "2", "--loader", f"{__name__}:broken_voice"])
    line = capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())["api"]
    assert code == 1 and line.count("\n") == 2 and f"{summary['findings_count']} findings" in line, line
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
    first = next(f for f in summary["findings"] if f["what"] == "exception:RuntimeError")  # each kind's first
    reproducer = tmp_path / first["input"]["reproducer"]  # findings/api-NNN.json
    assert json.loads(reproducer.read_text())["text"] == first["input"]["text"]


# --- the CLI and the server targets: real processes, real server; and stand-ins broken on purpose -----------------
def test_a_short_run_against_the_cli_and_the_server_finds_nothing(tmp_path: Path):
    """A few real `python -m tts.synthesize` runs and a real `python -m tts.serve` hit over HTTP and raw sockets:
    the product holds (zero findings), and the summary counts each target."""
    r = subprocess.run([sys.executable, "-m", "recipes.bench.fuzz", "--target", "cli", "server", "--seconds", "6",
                        "--out", str(tmp_path), "--seed", "5", "--call-limit", "60"], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    summary = json.loads((tmp_path / "summary.json").read_text())
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("fuzz cli: ") and lines[1].startswith("fuzz server: "), r.stdout
    assert summary["targets"] == ["cli", "server"] and set(summary["by_target"]) == {"cli", "server"}
    for target in ("cli", "server"):
        part = summary[target]
        assert part["findings_count"] == 0, (target, part["findings"])
        assert part["calls"] >= 3 and part["calls"] == sum(part["outcomes"].values()) == sum(part["kinds"].values())
        assert summary["by_target"][target]["calls"] == part["calls"]
    assert summary["server"]["server_restarts"] == 0 and summary["server"]["server_rss_mb"]["start"] > 0
    assert summary["calls"] == summary["cli"]["calls"] + summary["server"]["calls"]
    assert r.returncode == 0 and not (tmp_path / "findings").exists()


BROKEN_CLI = r'''
import sys, time
from pathlib import Path
counter = Path(sys.argv[1])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
kind = n % 4
if kind == 0:
    sys.exit(99)  # an exit outside the README's set
if kind == 1:
    print("Traceback (most recent call last):\n  File 'x', line 1\nKeyError: 'boom'", file=sys.stderr)
    sys.exit(1)
if kind == 2:
    time.sleep(60)  # a hang
Path("out.wav.tmp").write_bytes(b"partial")  # a temp file left behind (the run's folder is the CLI's cwd)
print("error: refused", file=sys.stderr)
sys.exit(3)
'''

BROKEN_SERVER = r'''
import os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
posts = 0
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def do_POST(self):
        global posts
        posts += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if posts == 3:
            print("Traceback (most recent call last):\nValueError: boom", file=sys.stderr, flush=True)
        if posts == 5:
            os._exit(3)  # the server dies
        self.send_response(500); self.send_header("Content-Length", "4"); self.end_headers(); self.wfile.write(b"oops")
argv = sys.argv
HTTPServer((argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])), H).serve_forever()
'''


def test_a_broken_cli_and_a_broken_server_are_reported(tmp_path: Path, capsys):
    """--cli-command / --server-command pointed at stand-ins: an exit 99, a traceback, a hang, a temp file left
    behind; a 500, a traceback in the server's output, a server that dies (started again); each a finding with
    its reproducer written."""
    (tmp_path / "cli.py").write_text(BROKEN_CLI)
    (tmp_path / "server.py").write_text(BROKEN_SERVER)
    out = tmp_path / "out"
    code = fuzz.main(["--target", "cli", "server", "--seconds", "4", "--out", str(out), "--call-limit", "2",
                      "--cli-command", f"{sys.executable} {tmp_path / 'cli.py'} {tmp_path / 'count'}",
                      "--server-command", f"{sys.executable} {tmp_path / 'server.py'}"])
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert code == 1 and len(printed.splitlines()) == 3, printed
    cli, server = summary["cli"]["finding_kinds"], summary["server"]["finding_kinds"]
    for kind in ("exit 99", "traceback", "timeout", "stray file"):
        assert cli.get(kind, 0) > 0, (kind, cli)
    for kind in ("http 500", "server traceback", "server died"):
        assert server.get(kind, 0) > 0, (kind, server)
    assert summary["server"]["server_restarts"] >= 1
    assert summary["findings_count"] == sum(cli.values()) + sum(server.values())
    first = summary["cli"]["findings"][0]
    assert first["what"] == "exit 99" and first["exit"] == 99
    reproducer = json.loads((out / first["input"]["reproducer"]).read_text())
    assert (out / "findings" / reproducer["input_file"]).is_file() and "--out" in reproducer["argv"]
    died = next(f for f in summary["server"]["findings"] if f["what"] == "server died")
    assert (out / died["input"]["reproducer"]).is_file()
