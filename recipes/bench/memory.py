"""Peak memory: one inference in a FRESH subprocess per system (`python -m recipes.benchmark --memory-probe`)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from recipes.bench.proc import status_mb
from recipes.bench.systems import System, build_vocoder
from recipes.bench.timing import make_sync


# --------------------------------------------------------------------------------------------------
# memory probe (a fresh subprocess per system)
# --------------------------------------------------------------------------------------------------
def _maxrss_mb() -> float:
    """This process's RSS high-water mark.  VmHWM, not ru_maxrss: after exec, ru_maxrss still reports
    the peak of the process we were forked from (the benchmark itself), so every probe read the same."""
    hwm = status_mb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB


def _current_rss_mb() -> float | None:
    return status_mb("VmRSS")


def _reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark (VmHWM) to the current RSS: `import torch`
    alone peaks far above a loaded small model, which would hide the inference's own growth."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory_probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs inside the fresh subprocess: load one system, then one inference at the given input."""
    from tts import checkpoint

    torch.set_num_threads(int(spec["threads"]))
    device = spec["device"]
    sync = make_sync(device)
    rss_start = _maxrss_mb()
    with torch.inference_mode():
        if spec["system"] == "vocoder":
            from tts.audio import MelConfig

            mel_config = MelConfig.from_dict(spec["mel_config"])
            voc = build_vocoder(spec["vocoder"], mel_config, device)
            frames = int(spec["frames"])
            g = torch.Generator().manual_seed(0)
            mel = (torch.randn(1, mel_config.n_mels, frames, generator=g) - 6.0).to(device)
            fn = lambda: voc(mel, torch.tensor([frames], device=device))  # noqa: E731
        else:
            from tts.runtime.torch_engine import TorchEngine

            # mel-only (no vocoder): the acoustic model's own memory, through THE inference path's mel stage
            synth = TorchEngine(checkpoint.load(spec["checkpoint"], device), None, device)
            system = System(spec["system"], spec["kind"], spec.get("k"), synth, bool(spec["forced"]))
            ids = [list(spec["tokens"])]
            fn = lambda: system.run(ids, [int(spec["frames"])])  # noqa: E731
        sync()
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
            base_alloc = torch.cuda.memory_allocated()
        import gc

        gc.collect()
        rss_after_load_peak = _maxrss_mb()
        reset = _reset_peak_rss()
        rss_base = _maxrss_mb() if reset else rss_after_load_peak
        fn()
        sync()
        rss_peak = _maxrss_mb()
    res = {"rss_process_start_mb": rss_start, "maxrss_before_inference_mb": rss_after_load_peak,
           "rss_baseline_mb": rss_base, "rss_peak_mb": rss_peak, "rss_delta_mb": rss_peak - rss_base,
           "hwm_reset": reset, "rss_now_mb": _current_rss_mb(),
           "method": "VmHWM growth over one inference in a fresh process (peak reset via /proc/self/clear_refs"
                     " after loading)" if reset else "VmHWM growth (peak could not be reset: may read 0)"}
    if device.startswith("cuda"):
        res["cuda_max_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
        res["cuda_delta_mb"] = (torch.cuda.max_memory_allocated() - base_alloc) / 2**20
    return res


def run_memory_probe_subprocess(spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    spec_file = tmp / f"probe-{spec['system']}.json"
    spec_file.write_text(json.dumps(spec))
    env = dict(os.environ, OMP_NUM_THREADS=str(spec["threads"]), MKL_NUM_THREADS=str(spec["threads"]))
    r = subprocess.run([sys.executable, "-m", "recipes.benchmark", "--memory-probe", str(spec_file)],
                       capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0:
        return {"error": f"probe failed (rc {r.returncode}): {r.stderr.strip()[-500:]}"}
    return json.loads(r.stdout.strip().splitlines()[-1])
