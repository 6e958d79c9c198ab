"""The official `openai` Python client against the speech server (a real uvicorn on a free loopback port, the
shipped default voice): every response format decodes (soundfile; aac by PyAV) to the audio of the same request
as pcm, the formats that can stream do, both stream formats (sse events carry the same bytes), /v1/models and
/v1/audio/voices list what a request may name, and what is refused names what is accepted.  No mocks."""

import base64
import io
import json
import time

import httpx
import numpy as np
import pytest
import soundfile as sf

openai = pytest.importorskip("openai", reason="the openai client is in the dev extra")

from recipes.bench.speech_server import SpeechServer  # noqa: E402
from tts.serve.app import MODEL_ALIASES, OPENAI_VOICES  # noqa: E402
from tts.serve.formats import ALL_FORMATS, FORMATS, HAS_AAC, OPUS_RATE  # noqa: E402

TEXT = "The first sentence comes here. The second one follows it."
MP3_DELAY, AAC_DELAY = 1105, 1024  # samples of encoder delay a header-less stream starts with (formats.py)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py says why


@pytest.fixture(scope="module")
def server():
    with SpeechServer("--runtime", "torch", "--rate-limit", "0", threads=1) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def reference(client):
    """TEXT as pcm through the client: the samples every other format is compared with."""
    pcm = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="pcm")
    assert pcm.response.headers["content-type"] == "audio/L16"
    return np.frombuffer(pcm.content, "<i2").astype(np.float32) / 32768, int(pcm.response.headers["x-sample-rate"])


def decode(fmt: str, data: bytes) -> tuple[np.ndarray, int]:
    if fmt == "pcm":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768, 0
    if fmt == "aac":
        import av

        with av.open(io.BytesIO(data)) as container:
            rate = container.streams.audio[0].sample_rate
            return np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]), rate
    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    return audio, rate


def snr_db(want: np.ndarray, got: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(want**2) / np.sum((got - want) ** 2)))


def assert_is_the_reference(fmt: str, data: bytes, reference) -> None:
    """Lossless formats: the same samples; lossy ones: the same audio after the codec's known delay."""
    want, rate = reference
    got, got_rate = decode(fmt, data)
    if fmt in ("pcm", "wav", "flac"):
        assert np.array_equal(got, want)
        assert got_rate in (0, rate)
        return
    if fmt == "opus":  # resampled to 48 kHz: compared with the same resampling of the whole audio
        import soxr

        assert got_rate == OPUS_RATE
        want = soxr.resample(want, rate, OPUS_RATE, "HQ")
        assert got.size == want.size
    else:
        assert got_rate == rate
        delay = MP3_DELAY if fmt == "mp3" else AAC_DELAY
        assert want.size + delay <= got.size <= want.size + delay + 2048
        got = got[delay:delay + want.size]
    assert snr_db(want, got) > 15, fmt  # measured on TEXT: mp3 24.7, opus 22.8, aac 32.2 dB (waveform SNR)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_decodes_to_the_same_audio(client, reference, fmt):
    r = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt)
    media = {"mp3": "audio/mpeg", "opus": "audio/ogg; codecs=opus", "aac": "audio/aac", "flac": "audio/flac",
             "wav": "audio/wav", "pcm": "audio/L16"}[fmt]
    assert r.response.headers["content-type"] == media
    assert r.response.headers["x-sample-rate"] == str(OPUS_RATE if fmt == "opus" else reference[1])
    assert_is_the_reference(fmt, r.content, reference)


def test_the_clients_default_is_mp3_as_openais(client, reference):
    """The official client leaves response_format out: OpenAI's default, mp3, labelled as such."""
    r = client.audio.speech.create(model="gpt-4o-mini-tts", voice="nova", input=TEXT)
    assert r.response.headers["content-type"] == "audio/mpeg"
    assert_is_the_reference("mp3", r.content, reference)


def test_aac_is_made_or_refused_with_the_formats_there_are(client, reference):
    if HAS_AAC:
        r = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="aac")
        assert_is_the_reference("aac", r.content, reference)
    else:
        with pytest.raises(openai.BadRequestError) as e:
            client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="aac")
        assert "pip install av" in str(e.value) and all(f in str(e.value) for f in FORMATS)


@pytest.mark.parametrize("fmt", [f for f in ("mp3", "opus", "aac", "wav", "pcm") if f in FORMATS])
def test_streamable_formats_arrive_sentence_by_sentence(client, fmt):
    """with_streaming_response: the first bytes arrive while later sentences are still being made, and the
    bytes put together decode to the whole text."""
    text = " ".join(f"This is sentence number {i}, and it takes a moment to speak." for i in range(9))
    arrivals = []
    with client.audio.speech.with_streaming_response.create(model="tts-1", voice="default", input=text,
                                                            response_format=fmt) as r:
        assert r.headers["x-parts"] == "9"
        for chunk in r.iter_bytes():
            arrivals.append((time.perf_counter(), chunk))
    first = arrivals[0][0]
    assert arrivals[-1][0] - first > 0.05, [len(c) for _, c in arrivals]
    data = b"".join(c for _, c in arrivals)
    assert sum(len(c) for t, c in arrivals if t <= first + 0.01) < len(data)
    audio, _ = decode(fmt, data)
    assert audio.size > 9 * 22050  # nine sentences of over a second each


def sse_events(client, **fields) -> tuple[list[dict], str]:
    with client.audio.speech.with_streaming_response.create(model="tts-1", voice="alloy", input=TEXT,
                                                            stream_format="sse", **fields) as r:
        kind = r.headers["content-type"]
        lines = list(r.iter_lines())
    assert all(line.startswith("data: ") for line in lines if line), lines[:3]
    return [json.loads(line[len("data: "):]) for line in lines if line], kind


@pytest.mark.parametrize("fmt", ["pcm", "mp3"])
def test_sse_events_carry_the_same_audio(client, reference, fmt):
    """stream_format sse: speech.audio.delta events with base64 audio, then one speech.audio.done with usage;
    the deltas put together are the bytes of stream_format audio (for pcm: the same samples)."""
    events, kind = sse_events(client, response_format=fmt)
    assert kind.startswith("text/event-stream")
    assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
    assert len(events) >= 3  # a delta per sentence (two here), then done
    data = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert_is_the_reference(fmt, data, reference)
    usage = events[-1]["usage"]
    assert usage["input_tokens"] > 0 and usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["output_tokens"] == reference[0].size  # the samples spoken
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt,
                                       stream_format="audio")
    assert audio.content == data


def test_models_list_every_accepted_model(client, server):
    ids = [m.id for m in client.models.list()]
    assert set(MODEL_ALIASES) <= set(ids) and "gpt-4o-mini-tts" in ids and "tts-1-hd" in ids
    served = httpx.get(server.url + "/v1/voices").json()["data"]
    assert {v["model"] for v in served} <= set(ids)
    for model_id in ids:  # each listed id is accepted
        r = client.audio.speech.create(model=model_id, voice="default", input="Hi.", response_format="pcm")
        assert len(r.content) > 0
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-2", voice="alloy", input="Hi.")
    assert all(repr(i) in str(e.value) for i in ids)


def test_voices_list_the_served_voices_and_openais_names(client, server):
    listed = httpx.get(server.url + "/v1/audio/voices").json()
    assert listed == httpx.get(server.url + "/v1/voices").json()
    default = listed["default"]
    assert listed["data"][0]["id"] == default
    assert {a: listed["aliases"][a] for a in OPENAI_VOICES} == {a: default for a in OPENAI_VOICES}
    assert listed["aliases"]["default"] == default
    own = client.audio.speech.create(model="tts-1", voice=default, input="Hi.", response_format="pcm").content
    for alias in ("alloy", "shimmer", {"id": "nova"}, {"id": default}):  # the client's custom-voice object too
        r = client.audio.speech.create(model="tts-1", voice=alias, input="Hi.", response_format="pcm")
        assert r.content == own, alias


def bad_request(client, **fields) -> str:
    body = {"model": "tts-1", "voice": "alloy", "input": "Hi.", **fields}
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(**body)
    assert e.value.status_code == 400
    return e.value.body["message"]


def test_refusals_name_what_is_accepted(client, server):
    message = bad_request(client, voice="nobody")
    voices = httpx.get(server.url + "/v1/audio/voices").json()
    accepted = [*(v["id"] for v in voices["data"]), *voices["aliases"]]
    assert "'nobody'" in message and all(repr(v) in message for v in accepted) and "alloy" in accepted
    message = bad_request(client, response_format="ogg")
    assert "'ogg'" in message and all(repr(f) in message for f in FORMATS)
    assert "'sse'" in bad_request(client, stream_format="events")
    assert "128" in bad_request(client, voice="x" * 200) and "x" * 200 not in bad_request(client, voice={"id": "x" * 200})
    assert "up to 4" in bad_request(client, speed=4.0)
    too_long = "word " * 820  # 4100 characters: over OpenAI's 4096
    assert "4096" in bad_request(client, input=too_long)
    assert set(FORMATS) <= set(ALL_FORMATS)


def test_the_streamed_encoders_hand_on_each_piece_in_process():
    """Without a server: a second of audio gives bytes at once in every streamed format (opus: its 200 ms
    pages), flac only at the end; a voice name is bounded like a model name."""
    from tts.serve.formats import _Sink, encoder

    rate = 22050
    wave = (0.3 * np.sin(2 * np.pi * 220 * np.arange(rate) / rate)).astype(np.float32)
    for fmt in FORMATS:
        enc = encoder(fmt, rate)
        head, first, tail = enc.start(), enc.piece(wave), enc.finish()
        assert (len(first) > 1000) == (fmt != "flac"), fmt
        assert (fmt == "flac") == (len(tail) > len(first)), fmt
        assert (head != b"") == (fmt == "wav")
    sink = _Sink(drop_first_write=True)
    sink.write(b"header")
    sink.write(b"audio")
    assert sink.take() == b"audio"  # the first write (MP3's Info frame) is not handed on
    sink.seek(0)
    sink.write(b"HEADER")  # rewritten at close inside it: ignored
    with pytest.raises(RuntimeError, match="after they were sent"):
        sink.write(b"AUDIO")


def test_sse_events_carry_each_words_timing(client, reference):
    """The sse deltas carry the words of their audio (seconds from the start of the answer), in order, each
    inside the audio sent so far: what a client needs to highlight or subtitle as it plays."""
    events, _ = sse_events(client, response_format="pcm")
    words, sent = [], 0
    for e in events[:-1]:
        sent += len(base64.b64decode(e["audio"])) // 2
        for w in e.get("words", []):
            assert 0 <= w["start_s"] < w["end_s"] <= sent / reference[1] + 1e-9 and w["phones"]
            words.append(w)
    assert [w["word"].lower() for w in words] == [w.strip(".").lower() for w in TEXT.split()]
    assert all(a["end_s"] <= b["start_s"] for a, b in zip(words, words[1:]))


def test_ssml_input_is_spoken_and_bad_ssml_is_a_400(client, reference):
    plain = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.", response_format="pcm")
    ssml = client.audio.speech.create(model="tts-1", voice="alloy", response_format="pcm",
                                      input='<speak>Hello there.<break time="500ms"/></speak>')
    # the same sentence, then the final break as exact silence
    assert len(ssml.content) - len(plain.content) == 2 * round(0.5 * reference[1])
    assert ssml.content.startswith(plain.content) and not ssml.content[len(plain.content):].strip(b"\0")
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-1", voice="alloy", input="<speak>Hello <break time='1s'></speak>")
    assert "line 1" in str(e.value)


def test_a_server_lexicon_changes_the_phones_and_a_bad_one_stops_the_start(tmp_path):
    """`tts.serve --lexicon FILE`: every request speaks with it (the sse words show the phones); a lexicon with a
    symbol the voice lacks is one error line and exit 2 before listening."""
    import subprocess
    import sys

    from recipes.bench.speech_server import free_port
    from tts.paths import REPO_ROOT

    lexicon = tmp_path / "lexicon.tsv"
    lexicon.write_text("sentence\tS EH1 N T AH0 N S\n", encoding="utf-8")
    with SpeechServer("--rate-limit", "0", "--lexicon", str(lexicon), threads=1) as s:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=120)
        events, _ = sse_events(c, response_format="pcm")
    words = [w for e in events[:-1] for w in e.get("words", [])]
    assert [w["phones"] for w in words if w["word"] == "sentence"] == [["S", "EH1", "N", "T", "AH0", "N", "S"]]
    lexicon.write_text("sentence\tS QQ\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "tts.serve", "--port", str(free_port()), "--lexicon", str(lexicon)],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.startswith("error:") and "QQ" in out.stderr, out.stderr


def test_the_formats_benchmark_measures_every_format():
    """recipes.bench.serve_formats (the README's format figures): every format timed, lossy ones decoded within
    the SNR the tests above hold, lossless ones the same samples."""
    from recipes.bench.serve_formats import measure

    report = measure(1)["formats"]
    assert set(report) == set(FORMATS)
    for fmt, r in report.items():
        assert 0 < r["first_byte_s"] <= r["last_byte_s"] and r["bytes"] > 0, (fmt, r)
        if fmt in ("mp3", "opus", "aac"):
            assert r["snr_db_vs_pcm"] > 15, (fmt, r)
        if fmt in ("wav", "flac"):
            assert r["lossless_equal"] is True, fmt
