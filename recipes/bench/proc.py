"""A process's memory as Linux reports it (/proc/PID/status), torch-free: the memory benchmarks, the document
memory run and the fuzzer read it."""

from __future__ import annotations

from pathlib import Path


def status_mb(field: str, pid: int | str = "self") -> float | None:
    """A /proc/PID/status memory field (kB) in MiB, or None off Linux (or once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None
