"""The one pipeline over both engines (tts.runtime): every behaviour test runs on torch AND on ONNX.

The voice is the shipped default (checkpoints/nar.pt + the source-filter vocoder) with its frame guard
lowered to GUARD_FRAMES (an inference-only setting), so that an ordinary long sentence exercises the
pipeline's repair; the ONNX engine runs this voice's export, made once per module.  The block-wise voice
(checkpoints/nar_block.pt) runs block mode and streaming on both engines (its own export).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tts import checkpoint
from tts.errors import SynthesisError
from tts.runtime import Controls, Pipeline
from tts.runtime.pipeline import REPAIR_INDEX_BASE, STREAM_TOLERANCE
from tts.runtime.text_stage import PartStream
from tts.runtime.release import shipped_checkpoint
from tts.noise import item_noise_seed
from tts.runtime.torch_engine import TorchEngine, pad_tokens

ENGINES = ("torch", "onnx")
GUARD_FRAMES = 300  # ~3.5 s: a normal sentence passes, LONG is cut by the guard and spoken in parts
LONG = ("This sentence is long enough that the lowered frame guard cuts it, and the pipeline must speak it "
        "again in two parts at a clause boundary, joined by a short pause.")
TEXT = "Hello world. A second sentence, with a comma! And a third one?"
MEL_ATOL = 1e-4  # torch vs ONNX, natural-log mel units (issue 38's target; measured <= 4e-6)
# torch vs ONNX waves, relative RMS error (issue 38's target 1e-3; measured ~5e-5 at the defaults with the fp16 NAR).
# Measured 1.08e-3 on TEXT since the int8 NAR and the per-item ONNX acoustic graph (2026-12-06; mels still within
# 4e-6): the source-filter vocoder's F0 decoding turns mel differences of 1e-6 into waves 1e-3 apart at a few
# frames (see WAVE_REL_RMS_CONTROLLED).  Held to twice the target.
WAVE_REL_RMS = 2e-3
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



class Counting:
    """The pipeline's engine, counting the texts it encodes and recording the item indices it speaks."""

    def __init__(self, engine, monkeypatch) -> None:
        self.encoded: list[str] = []
        self.indices: list[int] = []
        encode, mels = engine.encode, engine.mels

        def counting_encode(text: str, lexicon=None) -> list[int]:
            self.encoded.append(text)
            return encode(text, lexicon)

        def recording_mels(ids, indices, controls, *args, **kwargs):
            self.indices += list(indices)
            return mels(ids, indices, controls, *args, **kwargs)

        monkeypatch.setattr(engine, "encode", counting_encode)
        monkeypatch.setattr(engine, "mels", recording_mels)


def test_a_lazy_utterance_gives_its_first_audio_before_its_later_sentences_are_made(pipeline: Pipeline, monkeypatch):
    """Issue 35: `stream` (and stream_utterance of utterance(lazy=True)) makes part k only when it is reached: its
    first chunk comes after the first sentence's text work, whatever the length of the text; `synthesize` makes
    a batch's parts (and one more, to know whether it is the last) before that batch's audio."""
    text = " ".join(f"This is sentence number {i}." for i in range(1, 9))
    c = pipeline.controls(seed=2)
    counting = Counting(pipeline.engine, monkeypatch)
    utt = pipeline.utterance(text, c, lazy=True)
    assert isinstance(utt.parts, PartStream) and len(utt.parts.made) == 1 and len(counting.encoded) == 1
    chunks = pipeline.stream_utterance(utt)
    first = next(chunks)
    assert first.size and len(utt.parts.made) == 1 and counting.encoded == ["This is sentence number 1."]
    rest = list(chunks)
    assert len(utt.parts.made) == 8 and len(counting.encoded) == 8 and utt.run.timings.text_s > 0
    eager = pipeline.utterance(text, c)
    assert isinstance(eager.parts, list) and utt.parts.made == eager.parts  # the same parts
    np.testing.assert_array_equal(np.concatenate([first, *rest]), np.concatenate(list(pipeline.stream(text, c))))

    counting.encoded.clear()
    streamed = pipeline.stream(text, c)
    assert next(streamed).size and len(counting.encoded) == 1  # `stream` itself is lazy
    streamed.close()

    counting.encoded.clear()
    made_at: list[int] = []  # parts encoded when each piece of audio reached the sink
    progress: list[tuple[int, int | None]] = []
    result = pipeline.synthesize(text, c, batch_size=3, sink=lambda w: made_at.append(len(counting.encoded)),
                                 progress=lambda d, t: progress.append((d, t)))
    assert made_at[0] == 4 and made_at[-1] == 8 and progress == [(3, None), (6, None), (8, 8)]
    assert len(result.sentences) == 8


def test_lazy_and_eager_utterances_speak_the_same_audio_with_a_guard_repair(pipeline: Pipeline, monkeypatch):
    """Issue 35: a lazy utterance (parts made as spoken) gives the eager one's audio sample for sample, repairs
    included: part k's noise comes from (seed, k) and the guard-cut repair's parts from REPAIR_INDEX_BASE, which
    needs no count of the parts."""
    text = f"Hello world. {LONG} And a last one?"
    c = pipeline.controls(seed=11)
    counting = Counting(pipeline.engine, monkeypatch)
    eager, lazy = pipeline.utterance(text, c), pipeline.utterance(text, c, lazy=True)
    n = len(eager.parts)
    # eager in batches of 2, as synthesize(batch_size=2) spoke before issue 35
    expected: list[np.ndarray] = []
    for start in range(0, n, 2):
        ks = list(range(start, min(start + 2, n)))
        for k, wave in zip(ks, pipeline.speak([(eager, k) for k in ks])):
            expected += [pipeline.silence(eager.parts[k].pause_s), wave]
    assert any("frame guard cut" in note for note in eager.notes), eager.notes
    eager_indices, counting.indices = counting.indices, []
    repairs = [i for i in eager_indices if i >= n]
    assert len(repairs) >= 2 and repairs == list(range(REPAIR_INDEX_BASE, REPAIR_INDEX_BASE + len(repairs)))
    result = pipeline.synthesize(text, c, batch_size=2)  # lazy
    np.testing.assert_array_equal(result.wave, np.concatenate(expected))
    assert counting.indices == eager_indices and result.notes == eager.notes
    # streamed (batch 1): a lazy utterance and a fresh eager one (a run's repair indices are spent as used)
    streamed_lazy = np.concatenate(list(pipeline.stream_utterance(lazy)))
    streamed_eager = np.concatenate(list(pipeline.stream_utterance(pipeline.utterance(text, c))))
    np.testing.assert_array_equal(streamed_lazy, streamed_eager)
    assert lazy.notes == eager.notes


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


# --- the block-wise voice (checkpoints/nar_block.pt) on both engines: block mode and streaming ------------------
BLOCK_TEXT = "The quick brown fox jumps over the lazy dog, twice. Streaming starts before the end!"
# The real block-wise model's streamed audio vs its whole synthesis (either engine) and torch's vs ONNX's: the
# mels differ by float rounding (windows and blocks reorder sums: <= 6e-6 measured), which the vocoder keeps
# within STREAM_TOLERANCE except where a voicing / F0 decision sits on its threshold and flips: a stretch of a few
# frames (measured on 4 seeds x 4 controls: torch's own stream vs synthesize flips so in 5 of 16 runs, one stretch
# of 98-252 samples up to 7e-3, as before the ONNX block voice existed; torch vs ONNX on an AMD EPYC machine, seed 2,
# B 32: one stretch of 2318 samples (9 frames) with 1632 samples beyond, up to 5.1e-3, whole-wave rel. RMS 1.4e-3:
# where the rounding falls differs between CPUs, so the bound keeps a margin over both machines).
FLIP_FRAMES = 16  # samples beyond STREAM_TOLERANCE allowed in one comparison, in mel frames (0.19 s)


def assert_same_audio(a: np.ndarray, b: np.ndarray, what: str, hop: int) -> None:
    """Same length; every sample within STREAM_TOLERANCE but at most FLIP_FRAMES frames of `hop` samples (decision
    flips), and the whole within WAVE_REL_RMS_CONTROLLED."""
    assert a.shape == b.shape, what
    beyond = int((np.abs(a - b) > STREAM_TOLERANCE).sum())
    assert beyond <= FLIP_FRAMES * hop and rel_rms(a, b) <= WAVE_REL_RMS_CONTROLLED, (what, beyond, rel_rms(a, b))


@pytest.fixture(scope="module")
def block_pipelines(tmp_path_factory) -> dict[str, Pipeline]:
    torch.set_num_threads(1)
    return pipelines_for(shipped_checkpoint("nar_block"), tmp_path_factory.mktemp("block_voice"))


@pytest.fixture(params=ENGINES)
def block_pipeline(request, block_pipelines) -> Pipeline:
    return block_pipelines[request.param]


def test_the_block_voice_declares_block_mode_and_streams_as_it_synthesizes(block_pipeline: Pipeline):
    """Both engines: block mode and streaming declared; streamed audio == synthesized audio (assert_same_audio)
    at the voice's block size, another one, one whole block, and K = 0."""
    caps = block_pipeline.capabilities
    assert caps.block_mode and caps.streaming and not caps.autoregressive
    block = checkpoint.load(shipped_checkpoint("nar_block")).model
    assert block_pipeline.engine.defaults.block_frames == block.block_frames > 0
    for given in ({}, {"block_frames": 5}, {"block_frames": 0}, {"refine_steps": 0}):
        c = block_pipeline.controls(seed=3, **given)
        whole = block_pipeline.synthesize(BLOCK_TEXT, c, batch_size=1).wave
        streamed = np.concatenate(list(block_pipeline.stream(BLOCK_TEXT, c)))
        assert_same_audio(streamed, whole, str(given), block_pipeline.engine.hop_length)
    other = block_pipeline.stream(BLOCK_TEXT, block_pipeline.controls(seed=4))  # the check sees a seed's audio
    assert rel_rms(np.concatenate(list(other)), whole) > 0.1


def test_the_engines_agree_in_block_mode(block_pipelines: dict[str, Pipeline]):
    """Torch vs ONNX block-wise: a padded batch's mels within MEL_ATOL at several block sizes and controls (the
    cache, the prenet feedback and the whole-utterance refiner of FastSpeech2.infer(block_frames=B))."""
    t, o = block_pipelines["torch"], block_pipelines["onnx"]
    ids = [t.engine.encode(s) for s in ("Hello world.", "The quick brown fox jumps over the lazy dog, twice.")]
    for given in ({}, {"block_frames": 1}, {"block_frames": 7}, {"block_frames": 0}, {"refine_steps": 0},
                  {"refine_steps": 3, "temperature": 1.0, "block_frames": 32}, {"speed": 1.3, "pitch_shift": 2.0}):
        c = t.controls(seed=7, **given)
        a, b = t.engine.mels(ids, [0, 1], c), o.engine.mels(ids, [0, 1], c)
        np.testing.assert_array_equal(a.lengths, b.lengths)
        assert a.refine_steps_taken == b.refine_steps_taken and not b.truncated.any()
        for k, n in enumerate(a.lengths):
            np.testing.assert_allclose(b.mels[k, :, :n], a.mels[k, :, :n].numpy(), rtol=0, atol=MEL_ATOL, err_msg=str(given))


def test_the_engines_stream_the_same_audio_block_by_block(block_pipelines: dict[str, Pipeline]):
    """Torch vs ONNX streaming: the same mel chunks (the block decoder's cache and the refiner's windows, written
    once: tts.models.refine_windows) within MEL_ATOL, the same pieces, and the same audio (assert_same_audio:
    measured, 9 of 12 seed x block-size runs within STREAM_TOLERANCE everywhere, 3 with one flip of 98-138
    samples up to 7e-3; on an AMD EPYC machine one of 9 frames: FLIP_FRAMES)."""
    t, o = block_pipelines["torch"], block_pipelines["onnx"]
    ids = t.engine.encode(BLOCK_TEXT.split("! ")[0] + "!")
    for seed, bf in ((5, 16), (1, 8), (2, 32)):
        c = t.controls(seed=seed, block_frames=bf)
        with torch.inference_mode():
            plan = t.engine.model.prepare(*pad_tokens([ids]))
            ref = [chunk.mels[0].numpy() for chunk in t.engine.model.stream_mels(
                plan, bf, c.refine_steps, c.temperature, noise_seeds=[item_noise_seed(seed, 0)])]
        got = [m[0] for m in o.engine.blocks.stream_mels(o.engine.blocks.plan([ids], c), 0, c)]
        assert [m.shape for m in got] == [m.shape for m in ref] and len(got) > 3
        np.testing.assert_allclose(np.concatenate(got, 1), np.concatenate(ref, 1), rtol=0, atol=MEL_ATOL)
        pieces = {name: list(p.stream(BLOCK_TEXT, c)) for name, p in block_pipelines.items()}
        assert [x.size for x in pieces["torch"]] == [x.size for x in pieces["onnx"]]
        assert_same_audio(np.concatenate(pieces["torch"]), np.concatenate(pieces["onnx"]), f"seed {seed}, B {bf}",
                          t.engine.hop_length)


def test_onnx_streaming_gives_first_audio_after_the_first_blocks(block_pipelines: dict[str, Pipeline]):
    """The first streamed audio comes once the refiner's and the vocoder's look-ahead past the first block is
    decoded (a bounded number of blocks), long before the last block of a long part."""
    engine = block_pipelines["onnx"].engine
    runs: list[int] = []
    block_graph = engine.sessions["block"]

    class Counting:  # the block graph, counting its runs
        def run(self, *args):
            runs.append(1)
            return block_graph.run(*args)

    c = engine.defaults.replace(seed=1, block_frames=8)
    ids = engine.encode(LONG.split(",")[0] + ", " + LONG.split(",")[0].lower() + ".")
    frames = int(engine.mels([ids], [0], c).lengths[0])
    engine.sessions["block"] = Counting()
    try:
        pieces = engine.stream_part(ids, 0, c)
        first = next(p for p in pieces if p.wave.size)
        at_first = len(runs)
        rest = [p.wave for p in pieces]
    finally:
        engine.sessions["block"] = block_graph
    blocks = -(-frames // 8)
    assert at_first < blocks / 3 and len(runs) == blocks, (at_first, blocks)
    assert first.wave.size + sum(x.size for x in rest) == frames * 256


# --- word timestamps (issue 36) and sentence silence, on both engines ------------------------------------------
def assert_words_in_order(words, seconds: float) -> None:
    """Each word a positive span with phones, in order, none overlapping the next, all inside the audio."""
    assert words, "no words"
    for w, nxt in zip(words, [*words[1:], None]):
        assert 0 <= w.start_s < w.end_s <= seconds + 1e-9 and w.phones, w
        if nxt is not None:
            assert w.end_s <= nxt.start_s + 1e-9, (w, nxt)


def test_word_timestamps_are_the_durations_exactly(pipeline: Pipeline):
    """A word lasts its phones' frames (MelBatch.durations) times hop / rate exactly, from its part's first sample
    (sentence k's pause and the sentences before it included)."""
    c = pipeline.controls(seed=2)
    result = pipeline.synthesize(TEXT, c, timestamps=True)
    assert [w.word.lower() for w in result.words] == ["hello", "world", "a", "second", "sentence", "with", "a", "comma",
                                              "and", "a", "third", "one"]
    assert_words_in_order(result.words, result.seconds)
    engine, frame_s = pipeline.engine, pipeline.engine.hop_length / pipeline.sample_rate
    ids = [engine.encode(s) for s in result.sentences]
    out = engine.mels(ids, list(range(len(ids))), c)
    offset, k_word = 0.0, 0
    for k, part_ids in enumerate(ids):
        offset += 0 if k == 0 else pipeline.silence(pipeline.pause_s).size / pipeline.sample_rate
        encoded = engine.encode_words(result.sentences[k])
        edges = np.concatenate([[0], np.cumsum(out.durations[k, : len(part_ids)])])
        for span in encoded.words:
            w = result.words[k_word]
            assert w.start_s == pytest.approx(offset + edges[span.start] * frame_s, abs=1e-9)
            assert w.end_s - w.start_s == pytest.approx((edges[span.end] - edges[span.start]) * frame_s, abs=1e-9)
            k_word += 1
        offset += out.lengths[k] * frame_s
    assert k_word == len(result.words) and offset == pytest.approx(result.seconds, abs=1e-9)


def test_word_timestamps_survive_the_guard_repair(pipeline: Pipeline):
    """A part the frame guard cut and spoke again in two parts keeps every word, in order, inside its audio."""
    result = pipeline.synthesize(LONG, pipeline.controls(), timestamps=True)
    assert any("frame guard cut" in n for n in result.notes)
    assert len(result.words) == len(LONG.split())
    assert_words_in_order(result.words, result.seconds)


def test_the_engines_give_the_same_words(pipelines: dict[str, Pipeline]):
    words = {name: p.synthesize(TEXT, p.controls(seed=1), timestamps=True).words for name, p in pipelines.items()}
    assert words["torch"] == words["onnx"]


def test_streamed_words_are_the_synthesized_ones(block_pipeline: Pipeline):
    """Streaming block by block, a part's words are known before its first chunk: the same as synthesize's."""
    c = block_pipeline.controls(seed=3)
    whole = block_pipeline.synthesize(BLOCK_TEXT, c, batch_size=1, timestamps=True)
    utt = block_pipeline.utterance(BLOCK_TEXT, c, lazy=True, timestamps=True)
    made, seen_before_audio = 0, []
    for chunk in block_pipeline.stream_utterance(utt):
        # every word placed so far starts within the audio made so far plus this chunk's part
        seen_before_audio.append(len(utt.run.words))
        made += chunk.size
    assert utt.run.words == whole.words and seen_before_audio[0] > 0
    assert_words_in_order(utt.run.words, made / block_pipeline.sample_rate)


def test_sentence_silence_is_exact(pipeline: Pipeline):
    """--sentence-silence: the silence between sentences is exactly that many samples; the sentences' audio is
    unchanged; bad values are refused."""
    c = pipeline.controls(seed=1)
    short = pipeline.synthesize(TEXT, c, sentence_silence=0.0, timestamps=True)
    long = pipeline.synthesize(TEXT, c, sentence_silence=0.75, timestamps=True)
    gaps = len(short.sentences) - 1
    assert long.wave.size - short.wave.size == gaps * round(0.75 * pipeline.sample_rate)
    first = int(round(short.words[1].end_s * pipeline.sample_rate))  # inside sentence 1
    np.testing.assert_array_equal(long.wave[:first], short.wave[:first])
    np.testing.assert_array_equal(long.wave[-first:], short.wave[-first:])
    # each gap is round(0.75 s x rate) samples, so the shift is exactly that many samples per gap
    shift = gaps * round(0.75 * pipeline.sample_rate) / pipeline.sample_rate
    assert long.words[-1].start_s - short.words[-1].start_s == pytest.approx(shift, abs=1e-9)
    for bad, error in ((-0.1, ValueError), (11.0, ValueError), (float("nan"), ValueError), ("1", TypeError)):
        with pytest.raises(error, match="sentence silence"):
            pipeline.synthesize("Hi.", c, sentence_silence=bad)


def test_the_ar_gives_words_from_its_attention():
    """The Tacotron 2 voice (torch): words from its attention's monotonic alignment, in order, inside the audio."""
    torch.set_num_threads(1)
    p = Pipeline(TorchEngine.from_paths(shipped_checkpoint("ar"), "source-filter"))
    result = p.synthesize("Hello world. Good morning.", p.controls(seed=0), timestamps=True)
    assert [w.word.lower() for w in result.words] == ["hello", "world", "good", "morning"]
    assert_words_in_order(result.words, result.seconds)


BATCH_TEXTS = ["Hello world.", "A much longer sentence than the others, read in the same batch.", "Yes."]


def _lengths_decided_alone(engine, exact_mels: bool) -> None:
    """Each item of a padded batch gets exactly the durations (hence lengths) it gets alone: they are decided
    item by item (FastSpeech2._front / onnx_blocks.per_item), so a duration near x.5 frames cannot round
    differently in a batch (docs/results/batching found one such sentence in 64)."""
    ids = [engine.encode(t) for t in BATCH_TEXTS]
    c = engine.defaults.replace(seed=5)
    batch = engine.mels(ids, [0, 1, 2], c)
    for k, seq in enumerate(ids):
        alone = engine.mels([seq], [k], c)
        n = int(alone.lengths[0])
        assert int(batch.lengths[k]) == n
        np.testing.assert_array_equal(batch.durations[k, : len(seq)], alone.durations[0, : len(seq)])
        mine, theirs = np.asarray(batch.mels[k, :, :n]), np.asarray(alone.mels[0, :, :n])
        if exact_mels:
            np.testing.assert_array_equal(mine, theirs)
        else:
            np.testing.assert_allclose(mine, theirs, atol=1e-5)


def test_an_items_lengths_are_decided_as_if_alone(pipeline: Pipeline):
    # the parallel ONNX voice runs its whole acoustic graph item by item: bit-exact; torch batches its decoder
    _lengths_decided_alone(pipeline.engine, exact_mels=pipeline.engine.name == "onnx")


def test_a_block_items_lengths_are_decided_as_if_alone(block_pipeline: Pipeline):
    _lengths_decided_alone(block_pipeline.engine, exact_mels=False)


def test_the_nar_front_is_bit_exact_per_item():
    """FastSpeech2._front at batch 3 equals each item alone BIT FOR BIT (a batched front differs by ~1e-6, which
    is what let a duration round the other way)."""
    model = checkpoint.load(shipped_checkpoint("nar")).model
    frontend = checkpoint.load(shipped_checkpoint("nar")).frontend()
    ids = [frontend.encode(t) for t in BATCH_TEXTS]
    L = max(map(len, ids))
    tokens = torch.tensor([x + [0] * (L - len(x)) for x in ids])
    mask = torch.arange(L)[None, :] < torch.tensor([len(x) for x in ids])[:, None]
    with torch.inference_mode():
        batched = model._front(tokens, mask, 0.0, 1.0, 1.0)
        for k, seq in enumerate(ids):
            alone = model._front(torch.tensor([seq]), torch.ones(1, len(seq), dtype=torch.bool), 0.0, 1.0, 1.0)
            assert torch.equal(batched.log_durations[k, : len(seq)], alone.log_durations[0])
            assert torch.equal(batched.hidden[k, : len(seq)], alone.hidden[0])
