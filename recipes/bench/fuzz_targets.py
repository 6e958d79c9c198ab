"""The fuzz command's CLI and server targets (issue 35): the API's hostile text generators driven through real
`python -m tts.synthesize` processes and a real `python -m tts.serve` started here and hit over HTTP.

CLI (`fuzz_cli`): each case is one process, text by --text, --text-file or stdin (UTF-8, UTF-8 with a BOM,
UTF-16/32 with a BOM, or with junk bytes spliced in), random options (valid, at and past their bounds, not numbers),
an --out of any extension (sometimes an existing file, which a failed run must leave byte for byte).  A finding:
a traceback on stderr, an exit outside the README's set (0, 2 to 7), a refusal that is not one stderr line, exit 0
without readable audio, a failed run that changed an existing --out or left a temp file, no exit within the call
limit, or a child whose peak memory passed `--memory-bound-mb`.

Server (`fuzz_server`): one `tts.serve` on a free loopback port, then cases: POST /v1/audio/speech with hostile
fields (text classes, bad types, out-of-range speed, huge input, unknown fields, NaN literals), random JSON
shapes, deep nesting, malformed JSON and bytes, odd content-types, and raw-socket cases (a slow body, a body
shorter than its Content-Length, a huge or malformed head, a foreign Host, bad chunked encoding, other methods
and paths).  A finding: a 5xx, an error body that is not OpenAI's shape, a 200 whose audio does not decode, no
answer within the call limit, a traceback in the server's output, a server that died (it is started again) or
that does not answer GET /health after a case, or its memory past `--memory-bound-mb` over its level after
start.  Each finding's input is written under DIR/findings/ (reproducer files)."""

from __future__ import annotations

import io
import json
import os
import random
import resource
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from recipes.bench.fuzz import LONG_TEXT, MAX_FINDINGS, _fold, _text
from recipes.bench.proc import status_mb

REPO = Path(__file__).resolve().parents[2]
CLI_EXITS = {0, 2, 3, 4, 5, 6, 7}  # the README's exits of a run that was not interrupted (1 = internal error)
CLI_COMMAND = f"{sys.executable} -m tts.synthesize"
# short receive deadlines so that a slow-body case costs seconds, not the default 30
SERVER_COMMAND = (f"{sys.executable} -m tts.serve --rate-limit 0 --threads 1 --header-timeout 3 --body-timeout 3 "
                  f"--log-level warning")
CLI_MAX_TEXT = 2000  # characters: a CLI call loads the voice each time; longer texts add time, not coverage
MEMORY_BOUND_MB = 2500.0  # a CLI child's peak RSS, or the server's rise over its level after start
REPRODUCERS = 50  # findings per target written as reproducer files
PRECIOUS = b"an earlier --out that a failed run must keep\n"


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def _str_text(rng: random.Random, limit: int = CLI_MAX_TEXT) -> tuple[str, str]:
    while True:
        cls, text = _text(rng)
        if isinstance(text, str):
            return cls, text[:limit]


# --- the CLI ------------------------------------------------------------------------------------------------------
def _cli_value(rng: random.Random, option: str) -> str:
    pools: dict[str, list[Any]] = {
        "--speed": [lambda: f"{rng.uniform(0.25, 2.0):.3f}", "0.1", "2", "0.09", "2.01", "8", "10", "0", "-1", "nan",
                    "inf", "-inf", "1e309", "abc", "", "1,5", "0x1"],
        "--refine-steps": [lambda: str(rng.randint(0, 4)), "0", "-1", "33", "1000000", "1.5", "x", ""],
        "--seed": [lambda: str(rng.randint(0, 2**31)), "-1", str(2**64), "1e3", "abc", ""],
        "--pitch": [lambda: f"{rng.uniform(-12, 12):.2f}", "12", "-12", "12.5", "nan", "inf", "x"],
        "--temperature": [lambda: f"{rng.uniform(0, 2):.2f}", "0", "2", "2.1", "-0.1", "nan", "x"],
        "--voice": ["slt", "default", "nobody", "", "../slt", "SLT", "\u202eslt", "slt\x7f"],
        "--model": ["nar", "nar_block", "ar", "bogus", "", "../nar", "nar.pt"],
        "--block-frames": [lambda: str(rng.choice([8, 16, 32])), "0", "-1", "1", "999999", "x", "1.5"],
        "--batch-size": [lambda: str(rng.randint(1, 16)), "0", "-3", "100000", "x", ""],
        "--sentence-silence": [lambda: f"{rng.uniform(0, 1):.2f}", "0", "-1", "nan", "1e9", "x"],
        "--threads": ["1", "0", "-1", "100000", "x"],
        "--runtime": ["onnx", "onnx", "auto", "torch", "tpu"],
        "--vocoder": ["", "nonexistent.pt", "griffin-lim", "bogus", "/dev/null"],
        "--lexicon": ["/dev/null", "nonexistent.txt", "/etc/hostname"],
    }
    if rng.random() < 0.4:  # a valid value, so that the others meet the text (else most runs stop at argparse)
        v = VALID_OPTION.get(option) or pools[option][0]
    else:
        v = rng.choice(pools[option])
    return v() if callable(v) else v


VALID_OPTION = {"--voice": "slt", "--model": "nar", "--runtime": "onnx", "--vocoder": "griffin-lim",
                "--lexicon": "/dev/null"}


OPTIONS = ["--speed", "--refine-steps", "--seed", "--pitch", "--temperature", "--voice", "--model", "--block-frames",
           "--batch-size", "--sentence-silence", "--threads", "--runtime", "--vocoder", "--lexicon"]
FLAGS = ["--stream", "--ssml"]
# the README's formats (also a name without extension), others that are refused, stdout, a missing folder
OUT_EXTS = [".wav", ".wav", ".wav", ".flac", ".ogg", ".mp3", "", ".WAV", ".opus", ".txt", ".wav.", "-", "-",
            "missing_dir/"]


def _text_bytes(rng: random.Random, text: str) -> bytes:
    """The text as a file's (or stdin's) bytes: UTF-8 (lone surrogates as invalid bytes), UTF-16/32 with a BOM,
    UTF-8 with a BOM, or text with random bytes spliced in."""
    kind = rng.random()
    if kind < 0.6:
        return text.encode("utf-8", "surrogatepass")
    if kind < 0.7:
        return text.encode("utf-16", "surrogatepass")
    if kind < 0.75:
        return text.encode("utf-32", "surrogatepass")
    if kind < 0.85:
        return b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for _ in range(rng.randint(1, 5)):
        data[rng.randint(0, len(data)):0] = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 4)))
    return bytes(data)


@dataclass
class CliCase:
    text_class: str
    text: str
    data: bytes  # the text's bytes as given (argv, file or stdin)
    via: str  # "text" | "text-file" | "stdin"
    options: list[str]
    out_ext: str
    existing_out: bool  # --out exists before the run (a failed run must leave it as it was)

    def describe(self) -> dict[str, Any]:
        text = ascii(self.text)
        return {"text_class": self.text_class, "via": self.via, "options": [ascii(o) for o in self.options],
                "out_ext": self.out_ext, "existing_out": self.existing_out, "data_len": len(self.data),
                "text": text if len(text) <= 600 else text[:600] + f"... ({len(text)} chars)"}


def cli_cases(seed: int):
    """An endless, seeded stream of CliCases."""
    rng = random.Random(seed)
    while True:
        cls, text = _str_text(rng)
        options: list[str] = []
        for option in rng.sample(OPTIONS, rng.choice([0, 0, 1, 1, 2, 3])):
            options += [option, _cli_value(rng, option)]
        options += [f for f in FLAGS if rng.random() < 0.15]
        if len(text) > LONG_TEXT:  # cheap controls only, as the API's: the call limit is a hang detector
            for i in range(0, len(options) - 1):
                if options[i] == "--speed":
                    options[i + 1] = "1"
                elif options[i] == "--refine-steps":
                    options[i + 1] = "2"
        via = rng.choice(["text", "text-file", "stdin"])
        data = _text_bytes(rng, text)
        if via == "text":
            data = data.replace(b"\x00", b"")  # argv cannot hold NUL
        out_ext = rng.choice(OUT_EXTS)
        yield CliCase(cls, text, data, via, options, out_ext, out_ext not in ("-", "missing_dir/") and rng.random() < 0.3)


def _cli_argv(case: CliCase, command: list[str], work: Path, write: bool = True) -> tuple[list[Any], bytes, str]:
    argv: list[Any] = [*command]
    stdin = b""
    if case.via == "text":
        argv += [b"--text", case.data]
    elif case.via == "text-file":
        if write:
            (work / "in.txt").write_bytes(case.data)
        argv += ["--text-file", str(work / "in.txt")]
    else:
        stdin = case.data
    out = "-" if case.out_ext == "-" else str(work / ("missing_dir/out.wav" if case.out_ext == "missing_dir/"
                                                       else "out" + case.out_ext))
    return [*argv, "--out", out, "--quiet", *case.options], stdin, out


def run_cli_case(case: CliCase, command: list[str], work: Path, limit: float,
                 memory_bound_mb: float = MEMORY_BOUND_MB) -> dict[str, Any]:
    """One CLI run -> an outcome ({"kind": "audio" | "refused" | "finding", "what": ..., "message": ...})."""
    import soundfile as sf

    for old in work.iterdir():
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    argv, stdin, out = _cli_argv(case, command, work)
    if case.existing_out:
        Path(out).write_bytes(PRECIOUS)
    peak_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    try:
        r = subprocess.run(argv, input=stdin, capture_output=True, timeout=limit, env=_env(), cwd=work)
    except subprocess.TimeoutExpired:
        return {"kind": "finding", "what": "timeout", "message": f"no exit within {limit:.0f} s"}
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    err = r.stderr.decode("utf-8", "replace")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    base = {"exit": r.returncode, "stderr": err[-1500:]}
    last = lines[-1][:300] if lines else ""
    if peak > peak_before and peak / 1024 > memory_bound_mb:  # this child set a new peak past the bound
        return {"kind": "finding", "what": "memory", "message": f"peak RSS {peak / 1024:.0f} MB", **base}
    if "Traceback (most recent call last)" in err:
        return {"kind": "finding", "what": "traceback", "message": last, **base}
    if r.returncode not in CLI_EXITS:
        return {"kind": "finding", "what": f"exit {r.returncode}", "message": last, **base}
    left = sorted(str(p.relative_to(work)) for p in work.rglob("*")
                  if p.is_file() and p.name not in ("in.txt", Path(out).name))
    if left:
        return {"kind": "finding", "what": "stray file", "message": f"left beside --out: {left}", **base}
    if r.returncode:
        if case.existing_out and Path(out).read_bytes() != PRECIOUS:
            return {"kind": "finding", "what": "existing --out changed", "message": last, **base}
        if not case.existing_out and out != "-" and Path(out).exists():
            return {"kind": "finding", "what": "partial --out", "message": last, **base}
        errors = [ln for ln in lines if ln.startswith("error:")]
        if len(errors) != 1 or lines[-1] != errors[0]:  # warnings may come first; the error is one last line
            return {"kind": "finding", "what": "error not one line", "message": f"{len(errors)} error lines of "
                    f"{len(lines)}", **base}
        return {"kind": "refused", "what": f"exit {r.returncode}", "message": errors[0][:300]}
    if out == "-":
        if not r.stdout or len(r.stdout) % 2:
            return {"kind": "finding", "what": "bad pcm on stdout", "message": f"{len(r.stdout)} bytes", **base}
        return {"kind": "audio", "what": "audio"}
    path = Path(out)
    if not path.is_file() or path.stat().st_size == 0:
        return {"kind": "finding", "what": "exit 0 without --out", "message": f"{out} missing or empty", **base}
    try:
        wave, _ = sf.read(str(path), dtype="float32")
    except Exception as e:  # noqa: BLE001 - any failure to read is the finding
        return {"kind": "finding", "what": "unreadable --out", "message": f"{type(e).__name__}: {e}"[:300], **base}
    if not wave.size:
        return {"kind": "finding", "what": "exit 0 without --out", "message": "no samples", **base}
    return {"kind": "audio", "what": "audio"}


def fuzz_cli(seconds: float, out: Path, seed: int, call_limit: float, command: str = CLI_COMMAND,
             memory_bound_mb: float = MEMORY_BOUND_MB) -> dict[str, Any]:
    """CLI cases for `seconds` (the last may run up to `call_limit` past it); the target's summary."""
    argv = shlex.split(command)
    source = cli_cases(seed)
    repro = _Reproducers(out, "cli")
    with tempfile.TemporaryDirectory(prefix="fuzz_cli_") as tmp:
        work = Path(tmp)

        def one():
            case = next(source)
            outcome = run_cli_case(case, argv, work, call_limit, memory_bound_mb)
            described = case.describe()
            if outcome["kind"] == "finding":
                shown, stdin, _ = _cli_argv(case, argv, Path("WORK"), write=False)
                described["reproducer"] = repro.write(
                    {"argv": [a.decode("utf-8", "surrogateescape") if isinstance(a, bytes) else a for a in shown],
                     "stdin_file" if case.via == "stdin" else "text_file" if case.via == "text-file" else "text_bytes":
                         "input.bin", "existing_out": case.existing_out, "note": "WORK = an empty folder; for a "
                     "text-file case, input.bin is WORK/in.txt; for stdin, pipe input.bin; for --text, it is argv's bytes",
                     **case.describe()}, case.data, outcome["what"])
            return case.text_class, outcome, described

        return _tally(seconds, one, {"command": command, "call_limit_s": call_limit,
                                     "memory_bound_mb": memory_bound_mb})


# --- the server ---------------------------------------------------------------------------------------------------
def _deep(rng: random.Random) -> bytes:
    n = rng.choice([50, 1000, 100000])
    if rng.random() < 0.5:
        return b"[" * n + b"]" * n
    return b'{"model": "tts-1", "voice": "slt", "input": ' + b'{"a": ' * n + b"1" + b"}" * n + b"}"


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    k = rng.random()
    if depth > 3 or k < 0.4:
        return rng.choice([None, True, False, 0, -1, 1.5, 1e308, -1e308, 2**70, "", "x", "slt", "tts-1", "wav",
                           _str_text(rng, 200)[1]])
    if k < 0.7:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["model", "input", "voice", "speed", "response_format", "stream_format", "a", ""]):
            _json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


JSON = {"content-type": "application/json"}


def server_request(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """(class, request): {"body": bytes, "headers": {...}} for POST /v1/audio/speech, or {"raw": bytes,
    "pause_after": n, "close_early": bool} for a raw-socket case."""
    k = rng.random()
    if k < 0.55:  # a request of the right shape with hostile fields
        cls, text = _str_text(rng, 100_000)
        def pick(valid: list[Any], hostile: list[Any]) -> Any:  # mostly valid: the text is the hostile part
            return rng.choice(valid if rng.random() < 0.8 else hostile)

        body: dict[str, Any] = {
            "model": pick(["tts-1"], ["tts-1-hd", "nar", "", "gpt-4o-mini-tts", "x" * 200, 5, None, ["tts-1"]]),
            "input": text[: rng.choice([200, 200, 200, 4000, 100_000])],
            "voice": pick(["slt"], ["default", "alloy", "", "../slt", "x" * 300, 1, None, ["slt"], {"id": "slt"},
                                    {"id": 5}, "SLT", "slt\x00"]),
            "response_format": pick(["wav", "pcm", "flac", "mp3", "opus"],
                                    ["aac", "WAV", "", "x" * 40, 1, None, "wav\n"])}
        if rng.random() < 0.5:
            body["speed"] = rng.choice([rng.uniform(0.25, 2.0), 0.25, 2.0, 4.0, 0.24, 4.01, 0, -1, 1e308, 5e-324, "1",
                                        "nan", None, True, [1], 2**70])
        if rng.random() < 0.2:
            body["stream_format"] = rng.choice(["sse", "sse", "audio", "SSE", "", 1, None])
        for key in rng.sample(list(body), rng.choice([0, 0, 0, 1])):
            del body[key]
        if rng.random() < 0.1:
            body[rng.choice(["instructions", "extra", "__proto__"])] = rng.choice(["x", 1, None])
        raw = json.dumps(body).encode()
        if rng.random() < 0.1:  # non-JSON number literals
            raw = raw[:-1] + rng.choice([b', "speed": NaN}', b', "speed": Infinity}', b', "speed": 1e999}',
                                         b', "speed": -0}'])
        return "request:" + cls, {"body": raw, "headers": JSON}
    if k < 0.65:
        return "json_shape", {"body": json.dumps(_json_value(rng)).encode(), "headers": JSON}
    if k < 0.7:
        return "deep_nesting", {"body": _deep(rng), "headers": JSON}
    if k < 0.8:
        return "invalid_json", {"body": rng.choice([
            b"", b"{", b"}", b"nul", b"{'a': 1}", b'{"input": "\xff\xfe"}',
            bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 300))),
            '{"model":"tts-1","voice":"slt","input":"hi"}'.encode("utf-16"),
            b'{"model":"tts-1","voice":"slt","input":"\\ud800"}',
            b'{"model":"tts-1","voice":"slt","input":"hi","input":"again"}',
            b'{"model":"tts-1","voice":"slt","input":"hi"} trailing',
            b" " * 100_000 + b"{}"]), "headers": JSON}
    if k < 0.87:
        return "content_type", {"body": json.dumps({"model": "tts-1", "voice": "slt", "input": "Hello.",
                                                    "response_format": "wav"}).encode(),
                                "headers": {"content-type": rng.choice([
                                    "text/plain", "application/x-www-form-urlencoded", "", "application/json; charset=utf-16",
                                    "multipart/form-data; boundary=x", "application/json\x7f", "*/*",
                                    "application/json; charset=" + "x" * 2000])}}
    return "raw:" + (raw_case := rng.choice(RAW_CASES)), _raw(rng, raw_case)


RAW_CASES = ("slow_body", "short_body", "huge_head", "bad_host", "bad_request_line", "bad_chunked", "other_method",
             "unknown_path", "huge_content_length", "negative_content_length", "no_content_length", "garbage")


def _raw(rng: random.Random, case: str) -> dict[str, Any]:
    """A raw HTTP/1.1 exchange (HOST is replaced by the server's address)."""
    body = json.dumps({"model": "tts-1", "voice": "slt", "input": "Hello.", "response_format": "wav"}).encode()

    def post(headers: str, data: bytes, target: str = "/v1/audio/speech", method: str = "POST") -> bytes:
        return f"{method} {target} HTTP/1.1\r\nHost: HOST\r\n{headers}\r\n".encode("latin-1", "replace") + data

    cl = f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    if case == "slow_body":  # half the body, then nothing: the server's body deadline answers (408), no hang
        return {"raw": post(cl, body[: len(body) // 2]), "wait_reply": True}
    if case == "short_body":  # half the body, then the client leaves
        return {"raw": post(cl, body[: len(body) // 2]), "close_early": True}
    if case == "huge_head":
        return {"raw": post(cl + "X-Junk: " + "a" * rng.choice([20_000, 70_000, 300_000]) + "\r\n", body)}
    if case == "bad_host":
        host = rng.choice(["evil.example", "127.0.0.1.nip.io", "", "a" * 300, "[::1", "localhost:99999"])
        return {"raw": post(cl, body).replace(b"Host: HOST", f"Host: {host}".encode())}
    if case == "bad_request_line":
        return {"raw": rng.choice([b"GARBAGE\r\n\r\n", b"POST /v1/audio/speech HTTP/9.9\r\nHost: HOST\r\n\r\n",
                                   b"POST  HTTP/1.1\r\nHost: HOST\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
                                   b"POST /v1/audio/speech\r\n\r\n", b"POST /%00%ff HTTP/1.1\r\nHost: HOST\r\n\r\n"])}
    if case == "bad_chunked":
        return {"raw": post("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n",
                            rng.choice([b"zz\r\n" + body + b"\r\n0\r\n\r\n", b"5\r\n" + body + b"\r\n0\r\n\r\n",
                                        b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"]))}
    if case == "other_method":
        m = rng.choice(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "BREW"])
        return {"raw": post(cl, body, method=m)}
    if case == "unknown_path":
        return {"raw": post(cl, body, target=rng.choice(["/v1/audio/speech/", "/v1/audio/../speech", "/" + "a" * 5000,
                                                         "/v1/audio/speech?x=" + "%" * 100, "*", "/\u00e9".encode().decode("latin-1")]))}
    if case == "huge_content_length":
        return {"raw": post(f"Content-Type: application/json\r\nContent-Length: {rng.choice([10**9, 10**30])}\r\n", body),
                "wait_reply": True}
    if case == "negative_content_length":
        return {"raw": post("Content-Type: application/json\r\nContent-Length: -5\r\n", body)}
    if case == "no_content_length":
        return {"raw": post("Content-Type: application/json\r\nConnection: close\r\n", body)}
    return {"raw": bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 2000)))}


def _openai_error(body: bytes) -> bool:
    try:
        d = json.loads(body)
    except ValueError:
        return False
    e = d.get("error") if isinstance(d, dict) else None
    return isinstance(e, dict) and isinstance(e.get("message"), str) and bool(e["message"]) \
        and {"message", "type", "param", "code"} <= set(e)


def _decodes(content: bytes, fmt: Any, sse: bool) -> None:
    """Raise unless `content` is audio of `fmt` (or OpenAI's sse events carrying it)."""
    import base64

    import soundfile as sf

    if sse:
        events = [json.loads(line[6:]) for line in content.decode().splitlines() if line.startswith("data: ")]
        if not events or events[-1].get("type") != "speech.audio.done":
            raise ValueError(f"sse: {len(events)} events, the last not speech.audio.done")
        content = b"".join(base64.b64decode(e["audio"]) for e in events if e.get("type") == "speech.audio.delta")
    if fmt == "pcm" or fmt == "aac":  # headerless pcm16 / aac: soundfile reads neither
        if not content or (fmt == "pcm" and len(content) % 2):
            raise ValueError(f"{len(content)} bytes of {fmt}")
        return
    wave, _ = sf.read(io.BytesIO(content), dtype="float32")
    if not wave.size:
        raise ValueError("no samples")


def run_server_request(client: Any, url: str, request: dict[str, Any]) -> dict[str, Any]:
    import httpx

    try:
        r = client.post(url + "/v1/audio/speech", content=request["body"], headers=request["headers"])
    except httpx.TimeoutException:
        return {"kind": "finding", "what": "hang", "message": "no response within the call limit"}
    except httpx.HTTPError as e:
        return {"kind": "finding", "what": "connection failed", "message": f"{type(e).__name__}: {e}"[:300]}
    if r.status_code >= 500:
        return {"kind": "finding", "what": f"http {r.status_code}", "message": r.text[:300]}
    if r.status_code >= 400:
        if not _openai_error(r.content):
            return {"kind": "finding", "what": "not an OpenAI error", "message": f"{r.status_code}: {r.text[:300]}"}
        return {"kind": "refused", "what": f"http {r.status_code}",
                "message": json.loads(r.content)["error"]["message"][:300]}
    if r.status_code != 200:
        return {"kind": "finding", "what": f"http {r.status_code}", "message": r.text[:300]}
    try:
        sent = json.loads(request["body"])
        fmt, sse = sent.get("response_format", "mp3"), sent.get("stream_format") == "sse"
    except ValueError:  # accepted although not JSON?
        return {"kind": "finding", "what": "200 for a body that is not JSON", "message": r.text[:300]}
    try:
        _decodes(r.content, fmt, sse)
    except Exception as e:  # noqa: BLE001 - any failure to decode is the finding
        return {"kind": "finding", "what": "audio does not decode", "message": f"{type(e).__name__}: {e}"[:300]}
    return {"kind": "audio", "what": "audio"}


def run_raw(port: int, request: dict[str, Any], limit: float) -> dict[str, Any]:
    """Send the raw bytes; read the status line (a 5xx, or none within `limit` where one is due, is the finding)."""
    data = request["raw"].replace(b"HOST", f"127.0.0.1:{port}".encode())
    try:
        conn = socket.create_connection(("127.0.0.1", port), timeout=limit)
    except OSError as e:
        return {"kind": "finding", "what": "connection failed", "message": f"{type(e).__name__}: {e}"[:300]}
    with conn as s:
        try:
            s.sendall(data)
        except OSError:  # the server closed on us mid-send (e.g. a head past its limit): a refusal
            return {"kind": "refused", "what": "raw closed", "message": "closed while sending"}
        if request.get("close_early"):
            return {"kind": "refused", "what": "raw client left", "message": "the client left mid-body"}
        reply = b""
        t0 = time.monotonic()
        try:
            while b"\r\n" not in reply and time.monotonic() - t0 < limit:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except socket.timeout:
            return {"kind": "finding", "what": "hang", "message": f"no status line within {limit:.0f} s"}
        except OSError as e:
            return {"kind": "refused", "what": "raw closed", "message": f"{type(e).__name__}"}
    if not reply:
        return {"kind": "refused", "what": "raw closed", "message": "closed without a response"}
    status = reply.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status.split()
    code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if code >= 500 or not code:
        return {"kind": "finding", "what": f"raw http {code or '?'}", "message": status[:200]}
    if code >= 400:
        return {"kind": "refused", "what": f"raw http {code}", "message": status[:200]}
    return {"kind": "audio" if code == 200 else "refused", "what": f"raw http {code}", "message": status[:200]}


def _rss_of(pid: int) -> float:
    """Process `pid`'s resident memory in MiB (nan once it is gone)."""
    rss = status_mb("VmRSS", pid)
    return float("nan") if rss is None else rss


class Server:
    """`command --host 127.0.0.1 --port P` started and waited for (GET /health 200); its output goes to `log`."""

    def __init__(self, command: list[str], log: Path, start_limit: float = 300.0) -> None:
        from recipes.bench.speech_server import free_port, wait_until_healthy

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.log_file = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.read_at = log.stat().st_size
        self.proc = subprocess.Popen([*command, "--host", "127.0.0.1", "--port", str(self.port)], env=_env(),
                                     stdout=self.log_file, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            with open(log, "rb") as output:
                wait_until_healthy(self.proc, self.url + "/health", start_limit, output)
        except RuntimeError:
            self.stop()
            raise
        self.rss_start_mb = _rss_of(self.proc.pid)

    def new_output(self) -> str:
        """What the server wrote since the last call."""
        with open(self.log, "rb") as f:
            f.seek(self.read_at)
            data = f.read()
        self.read_at += len(data)
        return data.decode("utf-8", "replace")

    def healthy(self, limit: float) -> bool:
        import httpx

        try:
            return httpx.get(self.url + "/health", timeout=limit).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        from recipes.bench.speech_server import terminate

        terminate(self.proc, 15)
        self.log_file.close()


def fuzz_server(seconds: float, out: Path, seed: int, call_limit: float, command: str = SERVER_COMMAND,
                memory_bound_mb: float = MEMORY_BOUND_MB) -> dict[str, Any]:
    """Start the server, then cases for `seconds`; the target's summary (with the server's memory)."""
    import httpx

    argv = shlex.split(command)
    rng = random.Random(seed)
    log = out / "server.log"
    log.unlink(missing_ok=True)
    t_load = time.perf_counter()
    server = Server(argv, log)
    load_s = time.perf_counter() - t_load
    rss_start = server.rss_start_mb
    rss_peak = rss_start
    restarts = 0
    repro = _Reproducers(out, "server")
    client = httpx.Client(timeout=call_limit)

    def one():
        nonlocal server, restarts, rss_peak
        cls, request = server_request(rng)
        if "raw" in request:
            outcome = run_raw(server.port, request, call_limit)
        else:
            outcome = run_server_request(client, server.url, request)
        if outcome["what"] == "connection failed":  # did it die? (exiting takes a moment)
            try:
                server.proc.wait(1)
            except subprocess.TimeoutExpired:
                pass
        rss = _rss_of(server.proc.pid)
        rss_peak = max(rss_peak, rss) if rss == rss else rss_peak
        output = server.new_output()
        if server.proc.poll() is not None:
            outcome = {"kind": "finding", "what": "server died", "message": f"exit {server.proc.returncode}",
                       "server_output": output[-1500:]}
        elif "Traceback (most recent call last)" in output:
            outcome = {"kind": "finding", "what": "server traceback", "message": output.strip().splitlines()[-1][:300],
                       "server_output": output[-3000:], "outcome": outcome["what"]}
        elif outcome["kind"] != "finding" and not server.healthy(min(call_limit, 30)):
            outcome = {"kind": "finding", "what": "unhealthy after", "message": "GET /health not 200 after the case"}
        elif outcome["kind"] != "finding" and rss - server.rss_start_mb > memory_bound_mb:
            outcome = {"kind": "finding", "what": "memory", "message": f"server RSS {server.rss_start_mb:.0f} -> {rss:.0f} MB"}
        described = {"class": cls, **({"raw": ascii(request["raw"][:600]), "len": len(request["raw"])} if "raw" in request
                                      else {"headers": request["headers"], "body": ascii(request["body"][:600]),
                                            "len": len(request["body"])})}
        if outcome["kind"] == "finding":
            data = request.get("raw", request.get("body", b""))
            described["reproducer"] = repro.write({
                **described, "note": ("raw bytes to send to the server over TCP (HOST = its host:port)" if "raw" in request
                                      else "POST input.bin to /v1/audio/speech with these headers"),
                "command": command}, data, outcome["what"])
        if outcome["what"] in ("server died", "hang", "connection failed", "unhealthy after", "memory"):
            server.stop()
            restarts += 1
            server = Server(argv, log)
        return cls, outcome, described

    try:
        summary = _tally(seconds, one, {"command": command, "call_limit_s": call_limit,
                                        "memory_bound_mb": memory_bound_mb})
    finally:
        client.close()
        end = _rss_of(server.proc.pid)
        server.stop()
    summary.update(load_s=round(load_s, 1), server_restarts=restarts,
                   server_rss_mb={"start": round(rss_start, 1), "peak": round(rss_peak, 1), "end": round(end, 1)})
    return summary


# --- shared -------------------------------------------------------------------------------------------------------
class _Reproducers:
    """DIR/findings/TARGET-NNN.json (the input described) and TARGET-NNN.input.bin (its bytes)."""

    def __init__(self, out: Path, target: str) -> None:
        self.dir, self.target, self.n, self.kinds = out / "findings", target, 0, set()
        for old in self.dir.glob(f"{target}-*"):
            old.unlink()

    def write(self, described: dict[str, Any], data: bytes, what: str = "") -> str | None:
        """Write the first REPRODUCERS findings' inputs, and past them the first of each kind."""
        if self.n >= REPRODUCERS and what in self.kinds:
            return None
        self.n += 1
        self.kinds.add(what)
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"{self.target}-{self.n:03d}"
        (self.dir / f"{name}.input.bin").write_bytes(data)
        (self.dir / f"{name}.json").write_text(json.dumps({**described, "input_file": f"{name}.input.bin"}, indent=1) + "\n")
        return f"findings/{name}.json"


def _tally(seconds: float, run_one: Callable[[], tuple[str, dict[str, Any], dict[str, Any]]],
           extra: dict[str, Any]) -> dict[str, Any]:
    """Call run_one() -> (class, outcome, input) until `seconds` pass; the target's summary."""
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    by_class: dict[str, Counter[str]] = {}
    finding_kinds: Counter[str] = Counter()
    findings: list[dict[str, Any]] = []
    refusals: Counter[str] = Counter()
    slowest: tuple[float, dict[str, Any]] = (0.0, {})
    calls = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        t_call = time.perf_counter()
        cls, outcome, described = run_one()
        call_s = time.perf_counter() - t_call
        calls += 1
        outcomes[outcome["what"]] += 1
        kinds[outcome["kind"]] += 1
        by_class.setdefault(cls, Counter())[outcome["kind"]] += 1
        if call_s > slowest[0]:
            slowest = (call_s, {**described, "outcome": outcome["what"]})
        if outcome["kind"] == "finding":
            finding_kinds[outcome["what"]] += 1
            if len(findings) < MAX_FINDINGS:
                findings.append({"signature": f"{outcome['what']}: {str(outcome.get('message', ''))[:80]}",
                                 **outcome, "input": described})
        elif outcome["kind"] == "refused":
            refusals[f"{outcome['what']}: {_fold(outcome['message'])}"] += 1
    return {"seconds": round(time.perf_counter() - t0, 1), "calls": calls,
            "findings_count": sum(finding_kinds.values()), "outcomes": dict(sorted(outcomes.items())),
            "kinds": {k: kinds.get(k, 0) for k in ("audio", "refused", "finding")},
            "by_class": {k: dict(sorted(v.items())) for k, v in sorted(by_class.items())},
            "finding_kinds": dict(finding_kinds), "findings": findings, "refusals": dict(refusals.most_common(60)),
            "slowest_call": {"seconds": round(slowest[0], 2), **slowest[1]}, **extra}
