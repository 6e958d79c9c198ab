"""Atomic file writes (temp file in the same folder + rename), so a killed run never leaves a
half-written file under its final name; readers see either the old file or the complete new one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def tmp_path(path: Path) -> Path:
    """Temporary sibling of `path`; its name ends in .tmp so globbing for *.wav/*.json skips it."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path(path)
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


def remove_stale_tmp(folder: Path) -> int:
    """Delete leftover temp files of killed runs in `folder`; returns how many."""
    n = 0
    if folder.is_dir():
        for p in folder.glob(".*.tmp"):
            p.unlink(missing_ok=True)
            n += 1
    return n
