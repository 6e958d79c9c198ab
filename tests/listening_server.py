"""Test harness of the listening app (tts.listening): tone "systems", its server in a subprocess on loopback, and
the answers an attentive rater gives (computed white-box from test.json, as only the server could)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

from recipes.bench.speech_server import free_port, wait_until_healthy
from tts.listening.layout import layout_for, page_sources

REPO = Path(__file__).resolve().parents[1]
ADMIN = "Vt3bq0xJ9rK2mWc7LpZ4sYfN8aHd1eGu6TjQ5oRiXkE"  # a 256-bit token: the server refuses weak ones


def honest_answer(test: dict, rater_id: str, page: dict, ab_choice: str = "A", score: int = 4) -> dict:
    """The answer of an attentive rater to `page` ({"item_id", "type", ...}): an A/B check's undamaged side,
    a MOS check's asked-for score, else `ab_choice` / `score`."""
    items = {it["id"]: it for it in test["items"]}
    it = items[page["item_id"]]
    if it.get("attention") and it["type"] == "ab":
        flip = dict(layout_for(test, rater_id))[it["id"]]
        srcs = page_sources(test, items, rater_id, it["id"], flip)
        return {"choice": "A" if srcs[0].damage is None else "B"}
    if it["type"] == "ab":
        return {"choice": ab_choice}
    return {"score": it["expected"] if it.get("attention") else score}


def make_tone_systems(root: Path, systems: dict[str, float], ids: list[str], seconds: float = 0.5,
                      sr: int = 16000) -> dict[str, Path]:
    """One folder per system of sine tones ID.wav (frequency per system, amplitude per id)."""
    out = {}
    t = np.arange(int(seconds * sr)) / sr
    for name, freq in systems.items():
        d = Path(root) / name
        d.mkdir(parents=True, exist_ok=True)
        for k, sid in enumerate(ids):
            sf.write(str(d / f"{sid}.wav"), 0.05 * (k + 1) * np.sin(2 * np.pi * freq * t), sr)
        out[name] = d
    return out


class ServerProcess:
    """`python -m tts.listening serve` in a subprocess; .kill() sends SIGKILL (no clean shutdown)."""

    def __init__(self, test_dir: Path, db: Path, admin_token: str = ADMIN,
                 port: int | None = None, extra_args: tuple[str, ...] = ()):
        self.test_dir, self.db, self.token, self.extra_args = Path(test_dir), Path(db), admin_token, tuple(extra_args)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        # the token goes in the environment, not the command line (which `ps` shows)
        env = {**os.environ, "PYTHONPATH": str(REPO), "LISTENING_ADMIN_TOKEN": self.token}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tts.listening", "serve", "--test", str(self.test_dir), "--db", str(self.db),
             "--host", "127.0.0.1", "--port", str(self.port), *self.extra_args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            wait_until_healthy(self.proc, self.url + "/healthz", timeout, self.proc.stdout)
        except RuntimeError:
            self.stop()
            raise
        return self

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
