"""One inference path: acoustic-model decoding and vocoding of model output happen only in the torch engine
(tts/runtime/torch_engine.py), and the ONNX engine runs exported graphs without re-writing model maths.

The scan walks every source file of the package, the recipes and the data preparation with `ast` and
lists each call of `.infer(...)` (an acoustic model's decoding loop) and each call of something named
`vocoder` / `voc` (a vocoder run), with the function it sits in.  Anything outside the torch engine must be
on the explicit allow-list below, each entry with the reason it is not text-to-wave synthesis; a second
decoding loop (a new `model.infer` in an entry point) fails the test.  The behaviour of the one pipeline over
both engines is tests/test_pipeline.py's.
"""

import ast

import pytest
from tts.paths import REPO_ROOT

SCANNED = ("tts", "recipes", "data_prep")
# Where models and vocoders are defined: their own forward / infer and internal sub-module calls.
DEFINITIONS = ("tts/models/", "tts/vocoder/")
THE_PATH = "tts/runtime/torch_engine.py"
VOCODER_NAMES = {"vocoder", "voc"}

# (file, enclosing function) -> why this call is not a second text-to-wave path
ALLOWED: dict[tuple[str, str], str] = {
    ("tts/training/module.py", "AcousticModule._log_media"):
        "training-time TensorBoard media of one validation item (free-running mel image + Griffin-Lim audio)",
    ("recipes/bench/peers.py", "run_peers"):
        "SpeechBrain's Tacotron2 peer (another project's model, timed beside ours), not our acoustic model",
    ("recipes/bench/memory.py", "memory_probe"):
        "the vocoder alone on a random mel: its own peak memory, no acoustic model involved",
    ("recipes/evaluate.py", "_copy_synthesis"):
        "copy synthesis: the corpus's ground-truth mel through the vocoder, no acoustic model involved",
    ("recipes/bench/vocoder_headroom.py", "conditions"):
        "copy synthesis of a recording's mel, its STFT parts swapped with the recording's: no acoustic model involved",
    ("recipes/bench/kv_cache.py", "timed_decode"):
        "the Transformer AR's decode timed step by step with and without its KV cache (use_cache, a model-internal "
        "switch no engine exposes), lengths forced on random weights: a measurement of the model, not synthesis",
    ("recipes/bench/kv_cache.py", "measure_memory"):
        "the same decode's own cache_bytes cross-checked against its cache tensors (model internals, no audio)",
}


def decoding_calls(source: str, path: str) -> set[tuple[str, str, str]]:
    """(path, enclosing Class.function, what) for each `.infer(` call and each call of a vocoder-named
    callee (`vocoder(...)`, `self.vocoder(...)`, `voc(...)`) in `source`."""
    found: set[tuple[str, str, str]] = set()

    def visit(node: ast.AST, scope: list[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = [*scope, node.name]
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if isinstance(func, ast.Attribute) and func.attr == "infer":
                found.add((path, ".".join(scope), "infer"))
            elif name in VOCODER_NAMES:
                found.add((path, ".".join(scope), "vocoder"))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(source), [])
    return found


def scan_tree() -> set[tuple[str, str, str]]:
    found: set[tuple[str, str, str]] = set()
    for top in SCANNED:
        for file in sorted((REPO_ROOT / top).rglob("*.py")):
            rel = file.relative_to(REPO_ROOT).as_posix()
            if rel == THE_PATH or rel.startswith(DEFINITIONS):
                continue
            found |= decoding_calls(file.read_text(encoding="utf-8"), rel)
    return found


def test_no_decoding_outside_the_inference_path():
    stray = sorted(c for c in scan_tree() if (c[0], c[1]) not in ALLOWED)
    assert not stray, ("acoustic decoding / vocoding outside the torch engine (use tts.runtime.Pipeline: "
                       f"synthesize, synthesize_items, stream, or an engine's mels / vocode stages): {stray}")


def test_allow_list_has_no_stale_entries():
    seen = {(path, scope) for path, scope, _ in scan_tree()}
    stale = sorted(set(ALLOWED) - seen)
    assert not stale, f"allow-listed calls that no longer exist (remove them from ALLOWED): {stale}"


def test_the_inference_path_itself_is_found():
    """The scanner sees the one real decoding loop: TorchEngine.mels and TorchEngine.vocode."""
    calls = decoding_calls((REPO_ROOT / THE_PATH).read_text(), THE_PATH)
    assert (THE_PATH, "TorchEngine.mels", "infer") in calls
    assert (THE_PATH, "TorchEngine.vocode", "vocoder") in calls
    assert {scope for _, scope, _ in calls} == {"TorchEngine.mels", "TorchEngine.vocode"}


# numpy ports of model maths the ONNX engine used to carry (the exported graph runs the models' own now)
PORTS = {"torch_randn", "per_item_noise", "durations_from_log", "regulate_length", "decode_f0", "item_noise_seed",
         "FlowMatchingRefiner", "sample"}


# the ONNX engine's modules -> the graph runs each may hold: onnx_engine one acoustic call (per item: onnx_blocks.per_item),
# one vocoder call per item and the magnitude correction's gain network (OnnxEngine._gains, which
# tts.vocoder.correction calls whole and streamed); onnx_blocks one generic graph call (BlockVoice._run: front, block,
# refine) and the streamed vocoder's one (VocoderStream._emit)
ONNX_MODULES = {"tts/runtime/onnx_engine.py": 3, "tts/runtime/onnx_blocks.py": 2}


@pytest.mark.parametrize("module", sorted(ONNX_MODULES))
def test_the_onnx_engine_holds_no_model_maths(module: str):
    """Its modules define no port of a model function and run no loop of their own over refiner steps: they
    feed the exported graphs (tts/export.py), the one numpy DSP module (tts.vocoder.render) and the shared
    refine-window and stream-window bookkeeping (tts.models.refine_windows, tts.vocoder.render.StreamWindow)."""
    tree = ast.parse((REPO_ROOT / module).read_text())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert not defined & PORTS, defined & PORTS
    runs = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "run"]
    assert len(runs) == ONNX_MODULES[module]
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))
             and any(isinstance(c, ast.Name) and c.id in {"refine_steps", "steps"} for c in ast.walk(n.iter if isinstance(n, ast.For) else n.test))]
    assert not loops, "a loop over refiner steps outside the exported graph"


def test_the_streamed_vocoders_share_their_window():
    """The torch and the ONNX streamed vocoders keep their frame bookkeeping in one place (StreamWindow); the
    torch frame-rate vocoders' streams are one class (FrameStream) with a render step each."""
    for module in ("tts/vocoder/stream.py", "tts/runtime/onnx_blocks.py"):
        source = (REPO_ROOT / module).read_text()
        assert "StreamWindow(" in source and "valid_end = " not in source, module
    for module in ("tts/vocoder/source_filter.py", "tts/vocoder/istft.py"):
        source = (REPO_ROOT / module).read_text()
        assert "(FrameStream):" in source and "StreamWindow(" not in source and "valid_end = " not in source, module


@pytest.mark.parametrize("snippet, what", [
    ("def loop(model, tokens, lengths):\n    return model.infer(tokens, lengths)\n", "infer"),
    ("class E:\n    def run(self, o):\n        return self.vocoder(o.mels, o.mel_lengths)\n", "vocoder"),
    ("def f(vocoder, mel):\n    return vocoder(mel)\n", "vocoder"),
])
def test_a_second_decoding_loop_is_caught(snippet: str, what: str):
    calls = decoding_calls(snippet, "recipes/new_entry_point.py")
    assert len(calls) == 1 and next(iter(calls))[2] == what
    assert not any((p, s) in ALLOWED for p, s, _ in calls)


@pytest.mark.parametrize("path", ["tts/synthesize.py", "tts/api.py", "tts/serve/batcher.py", "recipes/evaluate.py",
                                  "tts/listening/synth.py", "recipes/bench/systems.py", "recipes/bench/measure.py"])
def test_every_entry_point_goes_through_the_pipeline(path: str):
    """Each entry point calls the pipeline (or an engine's stages, or builds one from the SystemSpec)."""
    tree = ast.parse((REPO_ROOT / path).read_text())
    used = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    used |= {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    entry = {"Pipeline", "open_pipeline", "synthesize", "synthesize_items", "pipeline", "speak", "stream_utterance",
             "mels", "vocode"}
    assert used & entry, f"{path} does not call the pipeline (tts.runtime)"


def test_forced_frames_fix_the_nar_output_length(tmp_path):
    """The benchmark's random-weight models speak to forced lengths (a declared capability of the torch engine)."""
    from helpers import TINY, tiny_checkpoint
    from tts.runtime.torch_engine import TorchEngine

    engine = TorchEngine.from_paths(tiny_checkpoint(tmp_path / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"]),
                                    "griffin-lim")
    assert engine.capabilities.forced_lengths
    out = engine.mels([engine.encode("Hello world."), engine.encode("Yes.")], [0, 1], engine.defaults,
                      forced_frames=[40, 17])
    assert out.lengths.tolist() == [40, 17]
