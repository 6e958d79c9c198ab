"""The shape of the product's code (issue 38's report): lines of tts/ at two commits, the largest functions,
and the modules the CLI's call path enters with the calls that climb back to a higher layer.

    python -m recipes.bench.code_report --before f4a6a46 --runtime onnx

Layers, highest first: the entry points (tts.synthesize, tts.api), the engine choice (tts.runtime.release),
the pipeline, its text stage and controls, the engines, the models / vocoders / checkpoints, the text
frontend / noise / audio.  A call from a lower layer into a higher one is a climb.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
from pathlib import Path

from tts.paths import REPO_ROOT

LAYERS = [("tts.synthesize", 0), ("tts.api", 0), ("tts.runtime.release", 1), ("tts.runtime.pipeline", 2),
          ("tts.runtime.text_stage", 3), ("tts.runtime.controls", 3), ("tts.runtime.onnx_engine", 4),
          ("tts.runtime.torch_engine", 4), ("tts.models", 5), ("tts.vocoder", 5), ("tts.checkpoint", 5),
          ("tts.text", 6), ("tts.noise", 6), ("tts.audio", 6)]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout


def code_size(rev: str, top: int = 3) -> dict:
    """Lines of tts/**/*.py at `rev` and its `top` largest functions (lines, file, name)."""
    lines, functions = 0, []
    for f in _git("ls-tree", "-r", "--name-only", rev, "tts").split():
        if not f.endswith(".py"):
            continue
        src = _git("show", f"{rev}:{f}")
        lines += src.count("\n")
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((n.end_lineno - n.lineno + 1, f, n.name))
    return {"rev": rev, "lines": lines, "largest": sorted(functions, reverse=True)[:top]}


def _layer(module: str) -> int | None:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return None


def call_path(runtime: str) -> dict:
    """Trace one CLI run (two sentences, imports done before): modules entered, climbs (caller, callee, fn)."""
    import tts.runtime.onnx_engine  # noqa: F401  (imported outside the trace: module bodies are not calls)
    import tts.runtime.release  # noqa: F401
    import tts.runtime.torch_engine  # noqa: F401
    from tts.synthesize import main

    entered: set[str] = set()
    climbs: dict[str, int] = {}

    def tracer(frame, event, arg):
        if event == "call" and frame.f_code.co_name != "<module>":
            callee = frame.f_globals.get("__name__", "")
            caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
            lc, lr = _layer(callee), _layer(caller)
            if lc is not None:
                entered.add(callee)
            if lc is not None and lr is not None and lc < lr:
                key = f"{caller} -> {callee}.{frame.f_code.co_name}"
                climbs[key] = climbs.get(key, 0) + 1
        return None

    with tempfile.TemporaryDirectory() as tmp:
        sys.settrace(tracer)
        try:
            code = main(["--text", "Hello there. Second sentence.", "--out", str(Path(tmp) / "x.wav"), "--quiet",
                         "--runtime", runtime])
        finally:
            sys.settrace(None)
    if code != 0:
        raise RuntimeError(f"the CLI exited {code}")
    return {"runtime": runtime, "modules": sorted(entered), "climbs": climbs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.bench.code_report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default=None, help="an earlier commit to compare tts/ with")
    p.add_argument("--runtime", default="onnx", choices=["onnx", "torch"])
    args = p.parse_args(argv)
    for rev in ([args.before] if args.before else []) + ["HEAD"]:
        size = code_size(rev)
        print(f"{rev}: tts/ {size['lines']} lines; largest functions: "
              + ", ".join(f"{f}:{name} ({n} lines)" for n, f, name in size["largest"]))
    path = call_path(args.runtime)
    print(f"CLI call path ({args.runtime}): {len(path['modules'])} tts modules entered: {', '.join(path['modules'])}")
    print("climbs to a higher layer: " + ("; ".join(f"{k} x{v}" for k, v in path["climbs"].items()) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
