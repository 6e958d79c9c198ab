"""The one pipeline over both engines (tts.runtime): every behaviour test runs on torch AND on ONNX.

The voice is the shipped default (checkpoints/nar.pt + the source-filter vocoder) with its frame guard
lowered to GUARD_FRAMES (an inference-only setting), so that an ordinary long sentence exercises the
pipeline's repair; the ONNX engine runs this voice's export, made once per module.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tts import checkpoint
from tts.errors import SynthesisError
from tts.runtime import Controls, Pipeline
from tts.runtime.pipeline import STREAM_TOLERANCE
from tts.runtime.release import shipped_checkpoint
from tts.runtime.torch_engine import TorchEngine

ENGINES = ("torch", "onnx")
GUARD_FRAMES = 300  # ~3.5 s: a normal sentence passes, LONG is cut by the guard and spoken in parts
LONG = ("This sentence is long enough that the lowered frame guard cuts it, and the pipeline must speak it "
        "again in two parts at a clause boundary, joined by a short pause.")
TEXT = "Hello world. A second sentence, with a comma! And a third one?"
MEL_ATOL = 1e-4  # torch vs ONNX, natural-log mel units (issue 38's target; measured <= 4e-6)
WAVE_REL_RMS = 1e-3  # torch vs ONNX waves, relative RMS error (issue 38's target; measured ~5e-5 at the defaults)
# Measured exception: with speed 1.3 and pitch +2, "Hello world." in a batch of three differs by 2.8e-3 (the
# torch vocoder alone turns the two engines' mels, 3.8e-6 apart, into waves 2.8e-3 apart: its F0 decoding
# is locally steep there); other items of that batch 1e-4.  Held to this bound for non-default controls.
WAVE_REL_RMS_CONTROLLED = 5e-3


def rel_rms(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)) / max(np.sqrt(np.mean(a**2)), 1e-9))


def voice_with(tmp: Path, name: str, edit) -> Path:
    """A copy of the shipped NAR with `edit(model, model_config)` applied, saved as a checkpoint."""
    loaded = checkpoint.load(shipped_checkpoint("nar"))
    edit(loaded.model, loaded.meta.model_config)
    checkpoint.save(tmp / f"{name}.pt", loaded.model, loaded.meta)
    return tmp / f"{name}.pt"


def pipelines_for(acoustic: Path, tmp: Path) -> dict[str, Pipeline]:
    pytest.importorskip("onnx", reason="making an export needs the `export` extra (pip install -e '.[export]')")
    from tts.export import export
    from tts.runtime.onnx_engine import OnnxEngine

    export(tmp / "onnx", acoustic, "source-filter")
    return {"torch": Pipeline(TorchEngine.from_paths(acoustic, "source-filter")),
            "onnx": Pipeline(OnnxEngine.load(tmp / "onnx", threads=1))}


def _lower_guard(model, config) -> None:
    model.max_frames = config["max_frames"] = GUARD_FRAMES


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory) -> dict[str, Pipeline]:
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("voice")
    return pipelines_for(voice_with(tmp, "nar_guarded", _lower_guard), tmp)


@pytest.fixture(params=ENGINES)
def pipeline(request, pipelines) -> Pipeline:
    return pipelines[request.param]


def test_controls_are_the_voices_own_and_checked_once(pipeline: Pipeline):
    nar = checkpoint.load(shipped_checkpoint("nar")).model
    assert pipeline.engine.defaults == Controls(refine_steps=nar.refine_steps, temperature=nar.refine_temperature)
    assert pipeline.controls(speed=1.5, seed=3) == pipeline.engine.defaults.replace(speed=1.5, seed=3)
    for bad in ({"temperature": 3.0}, {"pitch_shift": float("nan")}, {"refine_steps": 1.5}, {"seed": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            pipeline.controls(**bad)
    with pytest.raises(ValueError, match="block-mode checkpoint"):  # declared: this voice decodes in parallel
        pipeline.controls(block_frames=16)
    assert pipeline.controls(block_frames=0).block_frames == 0
    assert not pipeline.capabilities.autoregressive and not pipeline.capabilities.block_mode


def test_items_and_whole_texts_share_one_decoding(pipeline: Pipeline):
    """One sentence: synthesize (CLI) and synthesize_items (evaluation) give the same samples; item index k is
    sentence k's noise, so sentence 1 of a text sounds as item 1."""
    c = pipeline.controls(seed=3)
    [item] = pipeline.synthesize_items(["Hello world."], c)
    whole = pipeline.synthesize("Hello world.", c)
    np.testing.assert_array_equal(item.wave, whole.wave)
    assert item.wave.dtype == np.float32 and item.n_tokens == len(pipeline.engine.encode("Hello world."))
    assert item.refine_steps_taken == c.refine_steps and item.ar_failure is None
    second = pipeline.synthesize("Yes. Hello world.", c, batch_size=1)
    [again] = pipeline.synthesize_items(["Hello world."], c, indices=[1])
    np.testing.assert_array_equal(second.wave[-again.wave.size:], again.wave)
    assert not np.array_equal(again.wave[: item.wave.size], item.wave[: again.wave.size])  # the seed matters


def test_a_text_sounds_the_same_in_any_batch_and_streamed(pipeline: Pipeline):
    c = pipeline.controls(seed=5)
    one = pipeline.synthesize(TEXT, c, batch_size=1)
    batched = pipeline.synthesize(TEXT, c, batch_size=8)
    assert one.sentences == batched.sentences and len(one.sentences) == 3
    # a padded batch reorders float sums (mels within 1e-5, tests/test_seeded_synthesis.py); the oscillator
    # integrates the ~1e-7 F0 differences into a phase, so waves agree in relative RMS, not sample for sample
    assert one.wave.size == batched.wave.size and rel_rms(one.wave, batched.wave) <= WAVE_REL_RMS
    sunk: list[np.ndarray] = []
    via_sink = pipeline.synthesize(TEXT, c, sink=sunk.append)
    assert via_sink.wave.size == 0 and via_sink.streamed_samples == batched.wave.size
    np.testing.assert_array_equal(np.concatenate(sunk), batched.wave)
    streamed = np.concatenate(list(pipeline.stream(TEXT, c)))
    assert streamed.size == one.wave.size and np.abs(streamed - one.wave).max() <= STREAM_TOLERANCE
    utt = pipeline.utterance(TEXT, c)
    list(pipeline.stream_utterance(utt))
    assert utt.run.timings.first_audio_s is not None and utt.run.timings.mel_s > 0


def test_a_part_the_guard_cuts_is_spoken_again_in_parts(pipeline: Pipeline):
    result = pipeline.synthesize(LONG, pipeline.controls())
    assert any("frame guard cut" in n for n in result.notes), result.notes
    # the repaired text is longer than the guard allows one part to be: nothing was lost
    assert result.seconds > GUARD_FRAMES * 256 / pipeline.sample_rate
    stream = np.concatenate(list(pipeline.stream(LONG, pipeline.controls())))
    assert stream.size == result.wave.size


def test_the_engines_agree(pipelines: dict[str, Pipeline]):
    """Torch vs ONNX on a padded batch and under other controls: mels within MEL_ATOL, waves within
    WAVE_REL_RMS (issue 38's targets), the same lengths and refiner steps."""
    t, o = pipelines["torch"], pipelines["onnx"]
    ids = [t.engine.encode(s) for s in ("Hello world.", "The quick brown fox jumps over the lazy dog, twice.")]
    for given in ({}, {"refine_steps": 0}, {"refine_steps": 3, "temperature": 1.0}, {"speed": 1.3, "pitch_shift": 2.0}):
        c = t.controls(seed=7, **given)
        a, b = t.engine.mels(ids, [0, 1], c), o.engine.mels(ids, [0, 1], c)
        np.testing.assert_array_equal(a.lengths, b.lengths)
        assert a.refine_steps_taken == b.refine_steps_taken
        for k, n in enumerate(a.lengths):
            np.testing.assert_allclose(b.mels[k, :, :n], a.mels[k, :, :n].numpy(), rtol=0, atol=MEL_ATOL)
        wa, wb = t.synthesize(TEXT, c).wave, o.synthesize(TEXT, c).wave
        assert wa.shape == wb.shape and rel_rms(wa, wb) <= (WAVE_REL_RMS if not given else WAVE_REL_RMS_CONTROLLED)


def test_non_finite_audio_is_an_error_on_both_engines(tmp_path: Path):
    """A weight at the edge of float32 (finite: the loader takes it) overflows inside the model: the audio is
    not finite, and either engine's pipeline refuses it with the sentence named, in whole and streamed runs."""
    def overflow(model, config) -> None:
        model.float()  # saved as float32: the value does not fit float16
        with torch.no_grad():
            model.refiner.net.output.bias.fill_(3e38)

    for name, pipeline in pipelines_for(voice_with(tmp_path, "nar_overflow", overflow), tmp_path).items():
        with pytest.raises(SynthesisError, match="non-finite.*Hello world"):
            pipeline.synthesize("Hello world.")
        with pytest.raises(SynthesisError, match="non-finite"):
            list(pipeline.stream("Hello world."))
