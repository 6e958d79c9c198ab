"""Timers, medians, cuda sync, device checks and machine facts."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch


class BenchmarkError(RuntimeError):
    """A setting the benchmark cannot run with (e.g. --device cuda without CUDA)."""


# --------------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------------
def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def make_sync(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        return lambda: torch.cuda.synchronize()
    return lambda: None


def check_device(device: str) -> None:
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BenchmarkError(
            f"--device {device} requested but CUDA is not available here (torch {torch.__version__}, "
            f"built with CUDA {torch.version.cuda or 'none'}, {torch.cuda.device_count()} visible GPUs); "
            "run with --device cpu"
        )
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise BenchmarkError(f"unknown --device {device!r}: expected cpu or cuda[:N]")


def machine_facts(device: str, threads: int) -> dict[str, Any]:
    cpu_model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "load_average_at_start": list(os.getloadavg()),
        "hostname": platform.node(),
    }
    if device.startswith("cuda"):
        facts["cuda_device"] = torch.cuda.get_device_name(torch.device(device))
        facts["cuda_version"] = torch.version.cuda
    return facts


# --------------------------------------------------------------------------------------------------
# timer
# --------------------------------------------------------------------------------------------------
class Bench:
    def __init__(self, args: argparse.Namespace, log: Callable[[str], None]) -> None:
        self.args, self.log = args, log
        self.device = args.device
        self.sync = make_sync(self.device)
        self.repeats = args.repeats

    def timeit(self, fn: Callable[[], Any]) -> tuple[Any, list[float]]:
        """One warm-up, then `repeats` timed calls (synchronised on cuda); returns the last output."""
        out = fn()
        times = []
        for _ in range(self.repeats):
            self.sync()
            t0 = time.perf_counter()
            out = fn()
            self.sync()
            times.append(time.perf_counter() - t0)
        return out, times
