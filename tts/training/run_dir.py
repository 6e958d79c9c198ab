"""One run per directory: what the training recipes check before they build anything.

A run directory (`exp_dir`, by default exp/<name>) holds checkpoints/ (step files + last.ckpt), tb/
(TensorBoard) and hydra/ (the config of every start).  Without these checks two runs given the same name
mixed silently: a new run's last.ckpt beside the old run's step files, both runs' curves in one tb/, and
`ckpt_path=last` on a name that never ran started from scratch.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tts.training.cli import UsageError

log = logging.getLogger(__name__)


class RunDirError(UsageError):
    """A run directory used the way that would mix two runs."""


def process_rank() -> int:
    """This process's global rank as the launchers set it (torchrun, SLURM, Lightning's DDP children); 0 alone.
    Only rank 0 checks and tidies the run directory: the other ranks start once it has begun writing there."""
    for var in ("RANK", "SLURM_PROCID", "LOCAL_RANK"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def multirun_job_dir(exp_dir: str | Path, job_num: int) -> Path:
    """Hydra multirun (`-m`): every job its own directory under the run's, job<N> by its number in the sweep
    (a sweep run again gives each job the same number, so `ckpt_path=last` resumes each)."""
    return Path(exp_dir) / f"job{job_num}"


def _checkpoints(exp_dir: Path) -> list[Path]:
    return sorted((exp_dir / "checkpoints").glob("*.ckpt"))


def _resumable_runs(exp_dir: Path, limit: int = 5) -> list[str]:
    """Other run directories beside this one (or nested multirun jobs) that `ckpt_path=last` could resume."""
    parent = exp_dir.parent
    found = sorted(str(p.parent.parent) for p in parent.glob("*/checkpoints/last.ckpt"))
    found += sorted(str(p.parent.parent) for p in parent.glob("*/job*/checkpoints/last.ckpt"))
    return found[:limit]


def prepare_run_dir(exp_dir: str | Path, ckpt_path: str | None, name_key: str = "name") -> None:
    """Refuse what would mix two runs (RunDirError, one line), before anything is built or written.

    - a NEW run (no ckpt_path) into a directory that holds checkpoints: refused; resume it or pick a name;
    - `ckpt_path=last` where there is no last.ckpt: refused (Lightning would start from scratch);
    - `ckpt_path=FILE` that does not exist: refused;
    - a new run into a directory whose earlier start saved no checkpoint: that start's TensorBoard files
      are removed (its curves would otherwise be drawn into this run's) -- it left nothing to resume.
    """
    exp_dir = Path(exp_dir)
    last = exp_dir / "checkpoints" / "last.ckpt"
    if ckpt_path == "last":
        if not last.exists():
            others = _resumable_runs(exp_dir)
            hint = f"; runs that can resume: {', '.join(others)}" if others else ""
            raise RunDirError(f"ckpt_path=last: {exp_dir} has no run to resume (no {last}); start a new run without "
                              f"ckpt_path{hint}")
        return
    if ckpt_path:
        if not Path(ckpt_path).is_file():
            raise RunDirError(f"ckpt_path={ckpt_path}: no such checkpoint file")
        return
    existing = _checkpoints(exp_dir)
    if existing:
        newest = max(existing, key=lambda p: p.stat().st_mtime)
        raise RunDirError(f"{exp_dir} already holds a run (checkpoints/{newest.name}, {len(existing)} file(s)): "
                          f"resume it with ckpt_path=last, or start a new run elsewhere with {name_key}=NEW_NAME "
                          f"(or exp_dir=DIR)")
    stale = sorted((exp_dir / "tb").glob("events.out.tfevents.*")) if (exp_dir / "tb").is_dir() else []
    for f in stale:
        f.unlink()
    if stale:
        log.info("%s: removed %d TensorBoard file(s) of an earlier start that saved no checkpoint", exp_dir, len(stale))
