"""Our normaliser and NVIDIA's `nemo-text-processing` on NeMo's public English TN test cases, per class.

    python -m recipes.peers.measure_nemo --cases DIR [--nemo-venv DIR [--install]] [--out DIR] [--show-failures]

DIR holds NeMo's `test_cases_<class>.txt` files (`written~spoken[~another spoken]` per line; from
NVIDIA/NeMo-text-processing, tests/nemo_text_processing/en/data_text_normalization/, tag r1.2.0 matches
the PyPI 1.2.0 release).  They are public reference data and are NOT copied into this repository;
the report names cases by file and line only.

NeMo runs in its own venv (`--nemo-venv`; `--install` makes it with pip and times it) through
`recipes/peers/nemo_worker.py`: twice, once on an empty grammar cache (first-use compile) and once on the
filled cache (cached start-up, then every case timed).

Scoring (`spoken_key`): two spoken forms are equal when their word sequences are equal after
  1. lowercasing;
  2. hyphens become spaces ("twenty-five" = "twenty five"; a dash " - " is a pause, not a word);
  3. every other character that is not a letter, digit or apostrophe is dropped as punctuation
     (pauses: "five six, seven" = "five six seven");
  4. spelled letters sound the same spaced or not: an all-capital token of two to five letters counts as
     its letters, and every run of two or more single letters is joined into one token
     ("p m E S T" = "PM EST", "u s a" = "USA", "S D F" = "sdf");
  5. "and" is dropped between a number word (or a currency name) and a following number word
     ("one hundred and five" = "one hundred five", "two dollars and five cents" = "two dollars five cents",
     "two and a half" keeps no "and" on either side).
A case with several expected forms is right when any of them matches.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

NEMO_REQUIREMENT = "nemo-text-processing==1.2.0"

# The classes named by issue 24 (all of NeMo's English TN classes with a unit-test file) ...
CLASSES = (
    "cardinal", "ordinal", "decimal", "money", "date", "time", "measure", "telephone", "electronic",
    "fraction", "roman", "whitelist", "address", "serial", "range", "math",
)
# ... and those a reader of ordinary documents meets, where ours must reach 95 % of NeMo's accuracy.
DOCUMENT_CLASSES = (
    "telephone", "electronic", "measure", "roman", "address", "time", "date", "money", "ordinal",
    "fraction", "range",
)
TARGET_RATIO = 0.95

_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety"
).split()
_SCALES = "hundred thousand million billion trillion quadrillion quintillion".split()
_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
    "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth thirtieth fortieth "
    "fiftieth sixtieth seventieth eightieth ninetieth hundredth thousandth millionth billionth"
).split()
NUMBER_WORDS = frozenset(_UNITS + _SCALES + _ORDINALS + ["a", "half", "halves", "quarter", "quarters"])
_NUMBER_BEFORE_AND = frozenset(_UNITS + _SCALES)
CURRENCY_WORDS = frozenset(
    "dollar dollars pound pounds euro euros yen won yuan rupee rupees cent cents penny pence".split()
)


def spoken_key(text: str) -> tuple[str, ...]:
    """The word sequence two equivalent spoken forms share (the scoring rule in the module docstring)."""
    text = re.sub(r"[^A-Za-z0-9' ]+", " ", text.replace("-", " "))
    words = []
    for w in (w.strip("'") for w in text.split()):
        if 2 <= len(w) <= 5 and w.isalpha() and w.isupper():
            words.extend(w.lower())
        elif w:
            words.append(w.lower())
    joined: list[str] = []
    run: list[str] = []
    for w in [*words, ""]:  # "" flushes the last run
        if len(w) == 1 and w.isalpha():
            run.append(w)
            continue
        joined.extend(["".join(run)] if len(run) > 1 else run)
        run = []
        if w:
            joined.append(w)
    kept = [
        w for i, w in enumerate(joined)
        if not (
            w == "and" and 0 < i < len(joined) - 1
            and (joined[i - 1] in _NUMBER_BEFORE_AND or joined[i - 1] in CURRENCY_WORDS)
            and joined[i + 1] in NUMBER_WORDS
        )
    ]
    return tuple(kept)


def equivalent(prediction: str | None, expected: tuple[str, ...]) -> bool:
    return prediction is not None and any(spoken_key(prediction) == spoken_key(e) for e in expected)


@dataclass(frozen=True)
class Case:
    cls: str
    line: int  # 1-based line in test_cases_<cls>.txt
    written: str
    expected: tuple[str, ...]


def cases_digest(directory: Path, classes: tuple[str, ...] = CLASSES) -> str:
    digest = hashlib.sha256()
    for cls in classes:
        digest.update((directory / f"test_cases_{cls}.txt").read_bytes())
    return digest.hexdigest()


def load_cases(directory: Path, classes: tuple[str, ...] = CLASSES) -> list[Case]:
    """Every case of `classes` found in `directory`; a class without its file is an error."""
    if not directory.is_dir():
        raise SystemExit(f"--cases {directory}: not a directory")
    cases: list[Case] = []
    for cls in classes:
        path = directory / f"test_cases_{cls}.txt"
        if not path.is_file():
            raise SystemExit(f"--cases {directory}: no {path.name} (NeMo's en/data_text_normalization files)")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            parts = line.split("~")
            if len(parts) >= 2 and parts[0].strip():
                cases.append(Case(cls, number, parts[0], tuple(parts[1:])))
    return cases


@dataclass
class ClassScore:
    n: int = 0
    ours: int = 0
    nemo: int | None = None

    def accuracy(self, correct: int | None) -> float | None:
        return None if correct is None else correct / self.n


@dataclass
class Timing:
    """Seconds.  start_up_s: import + ready to normalise, in a fresh interpreter (ours: import and first call,
    best of 3; NeMo: import and load of the cached compiled grammar).  Latencies are per case (one short
    sentence), after start-up."""

    start_up_s: float
    latency_median_s: float
    latency_p90_s: float
    latency_max_s: float

    @staticmethod
    def of(start_up_s: float, latencies: list[float]) -> Timing:
        ordered = sorted(latencies)
        return Timing(start_up_s, statistics.median(ordered), ordered[int(0.9 * (len(ordered) - 1))], ordered[-1])


@dataclass
class NemoInstall:
    requirement: str
    install_wall_s: float | None  # None when the venv was there already (--install not given)
    venv_bytes: int
    pynini: str


@dataclass
class Report:
    cases_dir: str
    cases_sha256: str  # of the class files read, in CLASSES order: which version of NeMo's cases was scored
    n_cases: int
    scores: dict[str, ClassScore]
    ours_timing: Timing
    nemo_install: NemoInstall | None = None
    nemo_first_use_s: float | None = None  # import + grammar compile on an empty cache
    nemo_timing: Timing | None = None  # start_up_s: import + load of the cached grammar
    nemo_errors: int | None = None
    failures: dict[str, list[str]] = field(default_factory=dict)  # "ours"/"nemo" -> ["class:line", ...]
    # per DOCUMENT_CLASSES class: ours >= TARGET_RATIO x NeMo's accuracy (None without NeMo figures)
    meets_target: dict[str, bool | None] = field(default_factory=dict)


def _run_ours(cases: list[Case]) -> tuple[list[str], Timing]:
    from tts.text.normalizer import normalize

    outputs, latencies = [], []
    for case in cases:
        start = time.perf_counter()
        outputs.append(normalize(case.written))
        latencies.append(time.perf_counter() - start)
    return outputs, Timing.of(_ours_cold_import_s(), latencies)


def _ours_cold_import_s(repeats: int = 3) -> float:
    """Import + first call of our normaliser in a fresh interpreter (best of `repeats`: the machine is shared)."""
    code = (
        "import time; t = time.perf_counter(); from tts.text.normalizer import normalize; "
        "normalize('It costs $5 at 3:30 pm.'); print(time.perf_counter() - t)"
    )
    root = Path(__file__).resolve().parents[2]
    runs = [float(subprocess.run([sys.executable, "-c", code], cwd=root, check=True, capture_output=True,
                                 text=True).stdout) for _ in range(repeats)]
    return min(runs)


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def install_nemo(venv: Path) -> float:
    """A fresh venv with `NEMO_REQUIREMENT` (and the pynini it pins); returns the wall seconds."""
    if venv.exists():
        shutil.rmtree(venv)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(_venv_python(venv)), "-m", "pip", "install", "-q", "--no-cache-dir", NEMO_REQUIREMENT],
                   check=True)
    return time.perf_counter() - start


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _nemo_worker(venv: Path, cache_dir: Path, inputs: list[str]) -> dict:
    worker = Path(__file__).with_name("nemo_worker.py")
    proc = subprocess.run([str(_venv_python(venv)), str(worker)], input=json.dumps({"cache_dir": str(cache_dir),
                          "inputs": inputs}), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"NeMo worker failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def _run_nemo(venv: Path, cases: list[Case]) -> tuple[list[str | None], float, Timing, int, str]:
    if not _venv_python(venv).is_file():
        raise SystemExit(f"--nemo-venv {venv}: no bin/python there (add --install to make it)")
    cache = Path(tempfile.mkdtemp(prefix="nemo_grammars_"))
    try:
        first = _nemo_worker(venv, cache, [])  # empty cache: the grammar is compiled and saved
        cached = _nemo_worker(venv, cache, [c.written for c in cases])
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    pynini = subprocess.run([str(_venv_python(venv)), "-c", "import pynini; print(pynini.__version__)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    errors = sum(e is not None for e in cached["errors"])
    timing = Timing.of(cached["import_s"] + cached["init_s"], cached["latency_s"])
    return cached["outputs"], first["import_s"] + first["init_s"], timing, errors, pynini


def measure(cases_dir: Path, nemo_venv: Path | None, install: bool) -> tuple[Report, list[Case], dict]:
    cases = load_cases(cases_dir)
    ours, ours_timing = _run_ours(cases)
    report = Report(str(cases_dir), cases_digest(cases_dir), len(cases), {c: ClassScore() for c in CLASSES},
                    ours_timing)
    predictions: dict[str, list[str | None]] = {"ours": ours}
    if nemo_venv is not None:
        wall = install_nemo(nemo_venv) if install else None
        nemo, first_use, timing, errors, pynini = _run_nemo(nemo_venv, cases)
        predictions["nemo"] = nemo
        report.nemo_install = NemoInstall(NEMO_REQUIREMENT, wall, _dir_bytes(nemo_venv), pynini)
        report.nemo_first_use_s, report.nemo_timing, report.nemo_errors = first_use, timing, errors
        for score in report.scores.values():
            score.nemo = 0
    for system, outputs in predictions.items():
        report.failures[system] = []
        for case, out in zip(cases, outputs):
            score = report.scores[case.cls]
            right = equivalent(out, case.expected)
            if system == "ours":
                score.n += 1
                score.ours += right
            else:
                score.nemo += right
            if not right:
                report.failures[system].append(f"{case.cls}:{case.line}")
    report.meets_target = verdicts(report)
    return report, cases, predictions


def verdicts(report: Report) -> dict[str, bool | None]:
    """Per document class: does ours reach TARGET_RATIO of NeMo's accuracy?  None without NeMo figures."""
    out: dict[str, bool | None] = {}
    for cls in DOCUMENT_CLASSES:
        s = report.scores[cls]
        out[cls] = None if s.nemo is None else s.ours >= TARGET_RATIO * s.nemo
    return out


def to_markdown(report: Report) -> str:
    v = verdicts(report)
    rows = ["| class | cases | ours | NeMo 1.2.0 | ours / NeMo | >= 95 % of NeMo |", "|---|---:|---:|---:|---:|:---:|"]
    for cls in CLASSES:
        s = report.scores[cls]
        nemo = "-" if s.nemo is None else f"{s.nemo}/{s.n} ({s.nemo / s.n:.0%})"
        ratio = "-" if not s.nemo else f"{s.ours / s.nemo:.2f}"
        ok = {None: "", True: "yes", False: "**no**"}[v.get(cls)] if cls in DOCUMENT_CLASSES else "(not a target)"
        rows.append(f"| {cls} | {s.n} | {s.ours}/{s.n} ({s.ours / s.n:.0%}) | {nemo} | {ratio} | {ok} |")
    total_ours = sum(s.ours for s in report.scores.values())
    lines = [*rows, "", f"All classes: ours {total_ours}/{report.n_cases}"]
    if report.nemo_timing is not None:
        lines[-1] += f", NeMo {sum(s.nemo or 0 for s in report.scores.values())}/{report.n_cases}"
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.peers.measure_nemo", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, required=True, help="directory of NeMo's test_cases_*.txt")
    parser.add_argument("--nemo-venv", type=Path, help="venv with nemo-text-processing (measured if given)")
    parser.add_argument("--install", action="store_true", help="(re)create --nemo-venv with pip, timed")
    parser.add_argument("--out", type=Path, help="write report.json and table.md here")
    parser.add_argument("--show-failures", action="store_true", help="print every case a system gets wrong")
    args = parser.parse_args(argv)
    if args.install and args.nemo_venv is None:
        parser.error("--install needs --nemo-venv")
    report, cases, predictions = measure(args.cases, args.nemo_venv, args.install)
    table = to_markdown(report)
    print(table)
    print(json.dumps({k: v for k, v in asdict(report).items() if k not in ("scores", "failures")}, indent=1))
    if args.show_failures:
        for system, outputs in predictions.items():
            for case, out in zip(cases, outputs):
                if not equivalent(out, case.expected):
                    print(f"[{system}] {case.cls}:{case.line} {case.written!r} -> {out!r}  (want {case.expected[0]!r})")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(json.dumps(asdict(report), indent=1) + "\n")
        (args.out / "table.md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
