"""One inference path: acoustic-model decoding and vocoding of model output happen only in tts/inference.py.

The scan walks every source file of the package, the recipes and the data preparation with `ast` and
lists each call of `.infer(...)` (an acoustic model's decoding loop) and each call of something named
`vocoder` / `voc` (a vocoder run), with the function it sits in.  Anything outside tts/inference.py must be
on the explicit allow-list below, each entry with the reason it is not text-to-wave synthesis; a second
decoding loop (a new `model.infer` in an entry point) fails the test.
"""

import ast

import pytest
from tts.paths import REPO_ROOT

SCANNED = ("tts", "recipes", "data_prep")
# Where models and vocoders are defined: their own forward / infer and internal sub-module calls.
DEFINITIONS = ("tts/models/", "tts/vocoder/")
THE_PATH = "tts/inference.py"
VOCODER_NAMES = {"vocoder", "voc"}

# (file, enclosing function) -> why this call is not a second text-to-wave path
ALLOWED: dict[tuple[str, str], str] = {
    ("tts/training/module.py", "AcousticModule._log_media"):
        "training-time TensorBoard media of one validation item (free-running mel image + Griffin-Lim audio)",
    ("tts/bench/peers.py", "run_peers"):
        "SpeechBrain's Tacotron2 peer (another project's model, timed beside ours), not our acoustic model",
    ("tts/bench/memory.py", "memory_probe"):
        "the vocoder alone on a random mel: its own peak memory, no acoustic model involved",
    ("recipes/evaluate.py", "_copy_synthesis"):
        "copy synthesis: the corpus's ground-truth mel through the vocoder, no acoustic model involved",
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
    assert not stray, ("acoustic decoding / vocoding outside tts/inference.py (use tts.inference.Synthesizer: "
                       f"synthesize, synthesize_items, or its mels / vocode stages): {stray}")


def test_allow_list_has_no_stale_entries():
    seen = {(path, scope) for path, scope, _ in scan_tree()}
    stale = sorted(set(ALLOWED) - seen)
    assert not stale, f"allow-listed calls that no longer exist (remove them from ALLOWED): {stale}"


def test_the_inference_path_itself_is_found():
    """The scanner sees the one real decoding loop: Synthesizer.mels and Synthesizer.vocode."""
    calls = decoding_calls((REPO_ROOT / THE_PATH).read_text(), THE_PATH)
    assert (THE_PATH, "Synthesizer.mels", "infer") in calls
    assert (THE_PATH, "Synthesizer.vocode", "vocoder") in calls
    assert {scope for _, scope, _ in calls} == {"Synthesizer.mels", "Synthesizer.vocode"}


@pytest.mark.parametrize("snippet, what", [
    ("def loop(model, tokens, lengths):\n    return model.infer(tokens, lengths)\n", "infer"),
    ("class E:\n    def run(self, o):\n        return self.vocoder(o.mels, o.mel_lengths)\n", "vocoder"),
    ("def f(vocoder, mel):\n    return vocoder(mel)\n", "vocoder"),
])
def test_a_second_decoding_loop_is_caught(snippet: str, what: str):
    calls = decoding_calls(snippet, "recipes/new_entry_point.py")
    assert len(calls) == 1 and next(iter(calls))[2] == what
    assert not any((p, s) in ALLOWED for p, s, _ in calls)


@pytest.mark.parametrize("path", ["tts/synthesize.py", "recipes/evaluate.py", "tts/listening/synth.py",
                                  "tts/bench/systems.py", "tts/bench/measure.py"])
def test_every_entry_point_goes_through_the_synthesizer(path: str):
    """Each entry point calls the Synthesizer (or builds one from the SystemSpec)."""
    tree = ast.parse((REPO_ROOT / path).read_text())
    used = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    used |= {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    entry = {"Synthesizer", "from_paths", "synthesize", "synthesize_items", "synthesizer", "mels", "vocode"}
    assert used & entry, f"{path} does not call tts.inference.Synthesizer"


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from helpers import TINY, tiny_checkpoint
    from tts.inference import Synthesizer

    # refiner on with full-scale noise: a wrong seed or index would change the audio
    path = tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "nar.pt", "nonautoregressive", refine_steps=2,
                           refine_temperature=1.0, **TINY["nonautoregressive"])
    return Synthesizer.from_paths(path, "griffin-lim")


def test_items_and_the_cli_path_share_one_decoding(synth):
    """One sentence: synthesize (CLI) and synthesize_items (evaluation) give the same samples; the item
    index is the noise index, so item 1 of a run is sentence 1 of a text."""
    import torch

    [item] = synth.synthesize_items(["Hello world."], seed=3)
    whole = synth.synthesize("Hello world.", seed=3)
    torch.testing.assert_close(item.wave, whole.wave, rtol=0, atol=0)
    assert item.n_tokens == len(synth.encode("Hello world.")) and item.refine_steps_taken == 2
    assert item.ar_failure is None and item.mel_s > 0 and item.vocoder_s > 0
    second = synth.synthesize("Yes. Hello world.", seed=3, batch_size=1)
    [again] = synth.synthesize_items(["Hello world."], seed=3, indices=[1])
    assert torch.equal(second.wave[-again.wave.numel():], again.wave)
    assert not torch.equal(again.wave[: item.wave.numel()], item.wave[: again.wave.numel()])


def test_forced_frames_fix_the_nar_output_length(synth):
    batch = synth.pad([synth.encode("Hello world."), synth.encode("Yes.")])
    out = synth.mels(batch, forced_frames=[40, 17])
    assert out.mel_lengths.tolist() == [40, 17]
