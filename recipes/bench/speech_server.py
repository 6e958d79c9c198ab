"""A real `python -m tts.serve` on a free loopback port, for the load test (recipes.bench.serve_loadtest) and
the tests; `free_port` and `wait_until_healthy` serve the listening app's test harness too."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from recipes.bench.proc import status_mb

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy(proc: subprocess.Popen, url: str, timeout: float, output) -> None:
    """Poll `url` until it answers 200; a server that exits first, or does not answer within `timeout`
    seconds, is a RuntimeError carrying its `output` (the pipe its stdout/stderr went to)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {output.read().decode(errors='replace')}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("server did not start in time")


def terminate(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop a server process: SIGTERM (its graceful shutdown), SIGKILL after `grace_s` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class SpeechServer:
    """`python -m tts.serve ARGS` in a subprocess on 127.0.0.1:<free port>; a context manager."""

    def __init__(self, *args: str, threads: int = 1) -> None:
        self.args, self.threads = tuple(args), threads
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = b""

    def start(self, timeout: float = 60.0) -> "SpeechServer":
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(self.threads)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tts.serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--threads", str(self.threads), *self.args],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_until_healthy(self.proc, self.url + "/health", timeout, self.proc.stderr)
        except RuntimeError:
            self.stop()
            raise
        return self

    def rss_bytes(self) -> int:
        """The server process's resident memory now (Linux /proc)."""
        rss = status_mb("VmRSS", self.proc.pid)
        if rss is None:
            raise RuntimeError(f"no VmRSS in /proc/{self.proc.pid}/status")
        return round(rss * 1024 * 1024)

    def stop(self) -> None:
        if self.proc:
            terminate(self.proc, 10)
        if self.proc and self.proc.stderr:
            self.log = self.proc.stderr.read()
            self.proc.stderr.close()

    def __enter__(self) -> "SpeechServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
