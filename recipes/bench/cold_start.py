"""Cold start of the synthesis CLI: `python -m recipes.benchmark cold-start`.

Runs `python -m tts.synthesize --text "Hi." --out TMP.wav` (plus --runtime if asked) in a FRESH interpreter
`--repeats` times after one unrecorded warm-up run (which fills the OS page cache and builds the CMUdict
cache, as any earlier use of the installation would), and reports per run the wall time (process start to
exit, measured by the parent) and the peak resident memory of that process alone (ru_maxrss from wait4), plus
the median and the maximum.  `--importtime` adds one `python -X importtime` run and lists the top-level
packages by cumulative import time: where the start-up goes.

`--compare-repo DIR` adds another checkout as case "before" (e.g. the commit before a change: `git archive
COMMIT | tar -x -C DIR`), run with DIR as the working directory so that its `tts` package is the one
imported.  All cases run interleaved, and the load average is recorded: on a shared machine the absolute
times move with the load, the comparison within one run does not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tts.paths import REPO_ROOT

TEXT = "Hi."


@dataclass
class Run:
    wall_s: float
    peak_rss_mb: float
    runtime: str | None  # what the CLI reported using ("onnx" / "torch"; None for a CLI that does not say)


@dataclass
class ColdStartResult:
    command: list[str]
    repo: str
    runs: list[Run]
    wall_s_median: float
    wall_s_max: float
    peak_rss_mb_median: float
    peak_rss_mb_max: float
    targets: dict[str, float]
    meets_targets: bool
    imports: list[dict[str, float | str]] = field(default_factory=list)  # top packages by import time
    setup: list[str] = field(default_factory=list)


TARGETS = {"wall_s": 1.0, "peak_rss_mb": 400.0}  # issue 23 item 4, on this machine


# Runs in a small interpreter of its own: a child's ru_maxrss includes what it inherited at fork time, so
# forking the CLI straight from this (torch-importing) benchmark process would charge it the parent's
# ~500 MB.  posix_spawn does not copy the parent at all; the launcher times only the CLI's own life.
_LAUNCHER = """
import json, os, sys, time
cmd, cwd, out, err = json.loads(sys.argv[1])
os.chdir(cwd)
fo, fe = os.open(out, os.O_WRONLY), os.open(err, os.O_WRONLY)
t0 = time.perf_counter()
pid = os.posix_spawn(cmd[0], cmd, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, fo, 1), (os.POSIX_SPAWN_DUP2, fe, 2)])
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
print(json.dumps([wall, usage.ru_maxrss, os.waitstatus_to_exitcode(status)]))
"""


def run_once(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """One fresh process: (wall seconds, its own peak RSS in MB, stdout); a failing command is an error."""
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        out.touch()
        err.touch()
        r = subprocess.run([sys.executable, "-c", _LAUNCHER, json.dumps([cmd, str(cwd), str(out), str(err)])],
                           env=env, capture_output=True, text=True, check=True)
        wall, maxrss_kib, code = json.loads(r.stdout)
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}: {stderr.strip()[-2000:]}")
    return wall, maxrss_kib / 1024.0, stdout  # Linux: ru_maxrss in KiB


def import_profile(cmd: list[str], cwd: Path, env: dict[str, str], top: int = 15) -> list[dict[str, float | str]]:
    """Top-level packages of one `-X importtime` run by cumulative import time (the first import of each)."""
    r = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=cwd, env=env, capture_output=True, text=True)
    totals: dict[str, float] = {}
    for line in r.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not m or len(m.group(3)) != 1:  # depth 0 only: one space after the bar
            continue
        pkg = m.group(4).split(".")[0]
        totals[pkg] = totals.get(pkg, 0.0) + int(m.group(2)) / 1e6
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return [{"package": name, "cumulative_s": round(s, 4)} for name, s in ranked]


@dataclass
class Case:
    """One command to time: a checkout and the --runtime given to its CLI (None = the CLI's own default)."""

    name: str
    repo: Path
    runtime: str | None


def _command(case: Case, out_wav: Path, threads: int | None, onnx_dir: Path | None) -> list[str]:
    cmd = [sys.executable, "-m", "tts.synthesize", "--text", TEXT, "--out", str(out_wav), "--quiet"]
    if case.runtime is not None:
        cmd += ["--runtime", case.runtime]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    if onnx_dir is not None:
        cmd += ["--onnx-dir", str(onnx_dir)]
    return cmd


def measure(cases: list[Case], repeats: int, importtime: bool = False, threads: int | None = None,
            onnx_dir: Path | None = None) -> dict[str, ColdStartResult]:
    """Every case `repeats` times, the cases INTERLEAVED (run k of each case follows run k of the one
    before), so that a changing machine load affects them alike; one warm-up run of each first."""
    env = dict(os.environ)
    runs: dict[str, list[Run]] = {c.name: [] for c in cases}
    with tempfile.TemporaryDirectory() as tmp:
        cmds = {c.name: _command(c, Path(tmp) / f"{c.name}.wav", threads, onnx_dir) for c in cases}
        for c in cases:
            run_once(cmds[c.name], c.repo, env)  # warm-up: page cache, .pyc files, the CMUdict cache
        for _ in range(repeats):
            for c in cases:
                wall, rss, stdout = run_once(cmds[c.name], c.repo, env)
                m = re.search(r"runtime (\w+)", stdout)
                runs[c.name].append(Run(round(wall, 4), round(rss, 1), m.group(1) if m else None))
        imports = {c.name: import_profile(cmds[c.name], c.repo, env) if importtime else [] for c in cases}
    results = {}
    for c in cases:
        walls, rsss = [r.wall_s for r in runs[c.name]], [r.peak_rss_mb for r in runs[c.name]]
        cmd = cmds[c.name]
        results[c.name] = ColdStartResult(
            command=["python", *cmd[1:4], repr(TEXT), "--out", "TMP.wav", *cmd[6:]], repo=str(c.repo),
            runs=runs[c.name], wall_s_median=round(statistics.median(walls), 4), wall_s_max=max(walls),
            peak_rss_mb_median=round(statistics.median(rsss), 1), peak_rss_mb_max=max(rsss), targets=TARGETS,
            meets_targets=statistics.median(walls) <= TARGETS["wall_s"] and max(rsss) <= TARGETS["peak_rss_mb"],
            imports=imports[c.name])
    return results


def ensure_export(repo: Path, log) -> list[str]:
    """The CLI's default runtime uses checkpoints/onnx when it is current: make it so (untimed setup)."""
    if not (repo / "tts" / "export.py").is_file():
        return []
    check = subprocess.run([sys.executable, "-c", "import sys; from tts.runtime.onnx_engine import export_is_current, "
                            "DEFAULT_ONNX_DIR; sys.exit(0 if export_is_current(DEFAULT_ONNX_DIR) else 1)"], cwd=repo)
    if check.returncode == 0:
        return []
    cmd = [sys.executable, "-m", "tts.export", "--out", str(repo / "checkpoints" / "onnx")]
    log(f"setup (untimed): {' '.join(cmd[1:])}")
    subprocess.run(cmd, cwd=repo, check=True)
    return ["python -m tts.export --out checkpoints/onnx"]


def to_markdown(results: dict[str, ColdStartResult]) -> str:
    lines = ["| case | runtime used | wall median (s) | wall max (s) | peak RSS median (MB) | peak RSS max (MB) | "
             "meets 1.0 s / 400 MB |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        used = ",".join(sorted({str(x.runtime) for x in r.runs}))
        lines.append(f"| {name} | {used} | {r.wall_s_median:.3f} | {r.wall_s_max:.3f} | {r.peak_rss_mb_median:.0f} | "
                     f"{r.peak_rss_mb_max:.0f} | {'yes' if r.meets_targets else 'no'} |")
    for name, r in results.items():
        if r.imports:
            lines += ["", f"Import time of `{name}` (`-X importtime`, top-level packages, cumulative s):", "",
                      ", ".join(f"{i['package']} {i['cumulative_s']:.3f}" for i in r.imports)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.benchmark cold-start", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", type=Path, default=REPO_ROOT, help="checkout to measure (default: this one)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runtimes", default="default,torch",
                   help="comma list: default (the CLI's own choice, no --runtime), torch, onnx, auto")
    p.add_argument("--threads", type=int, default=None, help="passed to the CLI as --threads")
    p.add_argument("--onnx-dir", type=Path, default=None, help="passed to the CLI as --onnx-dir")
    p.add_argument("--compare-repo", type=Path, default=None,
                   help="another checkout timed as case 'before' with its CLI's default (interleaved with the others)")
    p.add_argument("--importtime", action="store_true", help="also profile imports (one more run per runtime)")
    p.add_argument("--no-export", action="store_true", help="do not create checkpoints/onnx when it is missing")
    p.add_argument("--out", type=Path, default=None, help="write cold_start.json and cold_start.md here")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    repo = args.repo.resolve()
    setup = [] if args.no_export else ensure_export(repo, print)
    cases = []
    for name in [r.strip() for r in args.runtimes.split(",") if r.strip()]:
        if name not in ("default", "torch", "onnx", "auto"):
            p.error(f"unknown runtime {name!r}")
        cases.append(Case(name, repo, None if name == "default" else name))
    if args.compare_repo is not None:
        cases.insert(0, Case("before", args.compare_repo.resolve(), None))
    load_before = os.getloadavg()
    results = measure(cases, args.repeats, importtime=args.importtime, threads=args.threads, onnx_dir=args.onnx_dir)
    load_after = os.getloadavg()
    for name, result in results.items():
        result.setup = setup
        print(f"{name}: wall median {result.wall_s_median:.3f} s (max {result.wall_s_max:.3f}), peak RSS median "
              f"{result.peak_rss_mb_median:.0f} MB (max {result.peak_rss_mb_max:.0f}), runtime used "
              f"{sorted({str(r.runtime) for r in result.runs})}, meets targets: {result.meets_targets}", flush=True)
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after} on {os.cpu_count()} CPUs")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cold_start.json").write_text(json.dumps(
            {"argv": ["python", "-m", "recipes.benchmark", "cold-start", *(argv if argv is not None else sys.argv[2:])],
             "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cpu_count": os.cpu_count(),
             "load_average_before": load_before, "load_average_after": load_after,
             "results": {k: asdict(v) for k, v in results.items()}}, indent=1) + "\n")
        (args.out / "cold_start.md").write_text(
            to_markdown(results) + f"\nLoad average (1, 5, 15 min) on {os.cpu_count()} CPUs: {load_before} before, "
            f"{load_after} after the runs.\n")
        print(f"wrote {args.out / 'cold_start.json'} and {args.out / 'cold_start.md'}")
    return 0
