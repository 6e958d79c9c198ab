"""The speech server (tts.serve) on a real uvicorn on a free loopback port, with the shipped default voice:
wav/pcm/flac decode to the Pipeline's own audio, the audio streams, bad requests get 4xx (never 500),
the body limit, concurrent requests are batched and sound as they do alone; the batcher itself in-process."""

import io
import json
import struct
import threading
import time

import httpx
import numpy as np
import pytest
import soundfile as sf

from tts.api import load
from tts.serve.batcher import Batcher, BatcherBusy, Job
from tts.serve.formats import STREAMING_SIZE
from recipes.bench.speech_server import SpeechServer

# three sentences of about the same length: the batcher (--max-pad-ratio) puts them in one batch, as
# Pipeline.synthesize does
TEXT = "The first sentence comes here. The second sentence comes next. The third sentence comes last."
LSB = 1 / 32767


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py says why


@pytest.fixture(scope="module")
def server():
    # 1 torch thread as in this process (_one_thread): the same float rounding as the in-process Pipeline;
    # --runtime torch as the `voice` fixture (the default "auto" takes the ONNX export when it is current)
    with SpeechServer("--runtime", "torch", "--max-chars", "600", "--rate-limit", "0", threads=1) as s:
        yield s


def speech(server, timeout=60.0, **body):
    body = {"model": "tts-1", "voice": "default", **body}
    return httpx.post(server.url + "/v1/audio/speech", json=body, timeout=timeout)


def test_formats_decode_to_the_pipelines_audio(server, voice):
    """Alone on the server, a request whose parts form one batch (as in Pipeline.synthesize) has the same
    samples (to 16-bit rounding)."""
    want = voice.synthesize(TEXT).samples
    wav = speech(server, input=TEXT, response_format="wav")
    assert wav.status_code == 200 and wav.headers["content-type"] == "audio/wav"
    assert wav.headers["transfer-encoding"] == "chunked"
    # streamed wav: RIFF and data sizes are the "unknown length" convention
    assert wav.content[:4] == b"RIFF" and struct.unpack("<I", wav.content[4:8])[0] == STREAMING_SIZE
    assert wav.content[36:40] == b"data" and struct.unpack("<I", wav.content[40:44])[0] == STREAMING_SIZE
    got, sr = sf.read(io.BytesIO(wav.content), dtype="float32")
    assert sr == voice.sample_rate == int(wav.headers["x-sample-rate"])
    assert got.shape == want.shape and np.abs(got - want).max() <= 1.01 * LSB

    pcm = speech(server, input=TEXT, response_format="pcm")
    assert pcm.status_code == 200 and pcm.headers["content-type"] == "audio/L16"
    assert pcm.content == wav.content[44:]  # the same samples, without the header

    flac = speech(server, input=TEXT, response_format="flac")
    assert flac.status_code == 200 and flac.headers["content-type"] == "audio/flac"
    decoded, sr = sf.read(io.BytesIO(flac.content), dtype="float32")
    assert sr == voice.sample_rate and decoded.shape == want.shape and np.abs(decoded - want).max() <= 1.01 * LSB


def test_audio_streams_as_sentences_are_made(server):
    """The first bytes (header + the first sentence) arrive while the later sentences are still being made."""
    text = " ".join(f"This is sentence number {i}, and it takes a moment to speak." for i in range(9))
    arrivals = []
    with httpx.stream("POST", server.url + "/v1/audio/speech", timeout=60,
                      json={"model": "tts-1", "voice": "default", "input": text, "response_format": "pcm"}) as r:
        assert r.status_code == 200 and int(r.headers["x-parts"]) == 9
        for chunk in r.iter_raw():
            arrivals.append((time.perf_counter(), len(chunk)))
    total = sum(n for _, n in arrivals)
    first_end = arrivals[0][0]
    # the batcher takes at most 8 parts of one request per batch: the response comes in at least 2 bursts
    assert arrivals[-1][0] - first_end > 0.05, arrivals
    assert sum(n for t, n in arrivals if t <= first_end + 0.01) < total


def test_a_client_that_goes_away_stops_its_synthesis(server):
    # 48 parts of the same length, slow speech (4x the frames): 6 batches of 8 take seconds, while the
    # server notices the hang-up at its next write (after the next batch)
    text = " ".join(f"Number {i}." for i in range(10, 58))
    before = httpx.get(server.url + "/health").json()["batches"]["parts"]
    with httpx.stream("POST", server.url + "/v1/audio/speech", timeout=60, json={
            "model": "tts-1", "voice": "default", "input": text, "response_format": "pcm", "speed": 0.25}) as r:
        assert r.status_code == 200 and int(r.headers["x-parts"]) == 48
        next(r.iter_raw())  # the first part, then the client hangs up
    time.sleep(3)
    spoken = httpx.get(server.url + "/health").json()["batches"]["parts"] - before
    assert 0 < spoken < 48


BAD = [
    ({"model": "nope", "input": "Hi.", "voice": "default"}, 400, "model"),
    ({"model": "tts-1", "input": "Hi.", "voice": "nobody"}, 400, "voice"),
    ({"model": "tts-1", "input": "Hi.", "voice": "default", "response_format": "ogg"}, 400, "response_format"),
    ({"model": "tts-1", "input": "Hi.", "voice": "default", "stream_format": "events"}, 400, "stream_format"),
    ({"model": "tts-1", "input": "Hi.", "voice": "default", "speed": 9}, 400, "speed"),
    ({"model": "tts-1", "input": "Hi.", "voice": "default", "speed": 0.1}, 400, "speed"),
    ({"model": "tts-1", "input": "Hi.", "voice": "default", "speed": "fast"}, 400, "speed"),
    ({"model": "tts-1", "input": "", "voice": "default"}, 400, "input"),
    ({"model": "tts-1", "input": "   \n ", "voice": "default"}, 400, "input"),
    ({"model": "tts-1", "input": "x" * 601, "voice": "default"}, 400, "input"),  # --max-chars 600
    ({"model": "tts-1", "input": "\u2603\u2603 \u2602", "voice": "default"}, 400, "input"),  # nothing speakable
    ({"model": "tts-1", "input": 12, "voice": "default"}, 400, "input"),
    ({"model": "tts-1", "voice": "default"}, 400, "input"),
    ({"model": "tts-1", "input": "Hi.", "voice": "default", "instructions": "cheerful"}, 400, "instructions"),
    ([1, 2], 400, None),
]


@pytest.mark.parametrize("body,status,param", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_requests_get_4xx_with_a_clear_json_error(server, body, status, param):
    r = httpx.post(server.url + "/v1/audio/speech", json=body, timeout=30)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param and len(err["message"]) > 5


@pytest.mark.parametrize("raw", [b"{not json", b'{"model": "tts-1", "input": "Hi.", "voice": "default", "speed": NaN}',
                                 b"\xff\xfe\x00", b""])
def test_malformed_bodies_get_400(server, raw):
    r = httpx.post(server.url + "/v1/audio/speech", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["message"]


def test_wrong_method_and_path_are_4xx(server):
    assert httpx.get(server.url + "/v1/audio/speech").status_code == 405
    assert httpx.get(server.url + "/v1/nothing").status_code == 404
    assert httpx.post(server.url + "/v1/audio/speech", data={"model": "tts-1"}).status_code == 400  # a form


def test_body_limit(server):
    big = json.dumps({"model": "tts-1", "voice": "default", "input": "word " * 20000}).encode()
    r = httpx.post(server.url + "/v1/audio/speech", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "65536 bytes" in r.json()["error"]["message"]

    def chunks():  # no Content-Length: the limit holds while reading
        for _ in range(100):
            yield b" " * 1024

    r = httpx.post(server.url + "/v1/audio/speech", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert speech(server, input="Still fine.").status_code == 200


def test_models_health_and_page(server, voice):
    models = httpx.get(server.url + "/v1/models").json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]][0] == voice.name  # then OpenAI's names
    assert models["data"][0]["voice"] == voice.voice and "tts-1" in [m["id"] for m in models["data"]]
    assert speech(server, model=voice.name, input="Its own name works too.").status_code == 200
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["sample_rate"] == voice.sample_rate and health["runtime"] == "torch"
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "<textarea" in page.text and "media-src 'self' blob:" in page.headers[
        "content-security-policy"]


CLIENT_TEXTS = [f"Client {i} asks for this sentence. And then for a second one, number {i}." for i in range(8)]


def assert_concurrent_requests_are_batched_and_sound_as_alone(server, voice):
    """CLIENT_TEXTS from as many clients at once: parts of several requests share model calls, and each
    response is what `voice` makes of its text alone."""
    texts = CLIENT_TEXTS
    results: dict[int, httpx.Response] = {}
    before = httpx.get(server.url + "/health").json()["batches"]
    barrier = threading.Barrier(len(texts))

    def client(i):
        barrier.wait()
        results[i] = speech(server, input=texts[i], response_format="pcm")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status_code == 200 for r in results.values()), [r.text for r in results.values()]
    after = httpx.get(server.url + "/health").json()["batches"]
    assert after["largest_batch"] > 2  # parts of several requests shared a model call
    assert after["parts"] - before["parts"] == 2 * len(texts)
    for i, text in enumerate(texts):
        got = np.frombuffer(results[i].content, "<i2").astype(np.float32) / 32767
        alone = voice.synthesize(text).samples
        # the noise of part k is (seed, k) in any batch; what padding changes is float rounding in the
        # acoustic model (mel within 1e-5), which the source-filter vocoder's phase carries to ~1e-3
        assert got.shape == alone.shape
        assert np.abs(got - alone).max() < 1e-2
        assert 10 * np.log10(np.sum(alone**2) / np.sum((got - alone) ** 2)) > 40  # SNR of the difference


def test_concurrent_requests_are_batched_and_sound_as_alone(server, voice):
    assert_concurrent_requests_are_batched_and_sound_as_alone(server, voice)


def test_first_audio_timeout_is_503_and_the_rate_limit_429():
    """A server whose first-audio timeout no synthesis can meet answers 503 (busy, retry), and a client over
    its requests per minute gets 429; /health is not rate limited."""
    with SpeechServer("--runtime", "torch", "--first-audio-timeout", "0.001", "--rate-limit", "3") as server:
        for _ in range(3):
            r = speech(server, input="This takes longer than a millisecond.")
            assert r.status_code == 503 and r.json()["error"]["code"] == "busy", r.text
        r = speech(server, input="One too many.")
        assert r.status_code == 429 and r.headers["retry-after"]
        assert httpx.get(server.url + "/health").status_code == 200


def test_a_response_past_the_request_timeout_is_cut_not_completed():
    """Past --request-timeout the stream ends without its final chunk: the client sees an incomplete
    response (an error), never a short answer that looks complete."""
    text = " ".join(f"Number {i}." for i in range(10, 58))  # 48 slow parts: far more than 1 s of work
    with SpeechServer("--runtime", "torch", "--request-timeout", "1", "--rate-limit", "0") as server:
        received = 0
        with pytest.raises(httpx.RemoteProtocolError):
            with httpx.stream("POST", server.url + "/v1/audio/speech", timeout=60, json={
                    "model": "tts-1", "voice": "default", "input": text, "response_format": "pcm",
                    "speed": 0.25}) as r:
                assert r.status_code == 200
                for chunk in r.iter_raw():
                    received += len(chunk)
        assert received > 0


# --- the batcher in-process ---------------------------------------------------------------------------------
def _collect(batcher, utt):
    got, done = {}, threading.Event()

    def deliver(k, item):
        if k < 0:
            got["end"] = item
            done.set()
        else:
            got[k] = item

    job = Job(utt, deliver)
    return job, got, done


def test_batcher_round_robin_keys_and_order(voice):
    pipeline = voice.pipeline
    batcher = Batcher(pipeline, max_batch=4, max_wait_s=0.2)
    try:
        a = pipeline.utterance("One. Two. Three. Four. Five.")
        b = pipeline.utterance("Six. Seven.")
        slow = pipeline.utterance("Slow one. Slow two.", pipeline.controls(speed=0.8))  # other controls: never in the same batch
        jobs = [_collect(batcher, u) for u in (a, b, slow)]
        with batcher.cond:  # all three queued before the worker looks
            for job, _, _ in jobs:
                batcher.jobs.append(job)
            batcher.cond.notify()
        for _, got, done in jobs:
            assert done.wait(60) and got["end"] is None
        assert batcher.stats.parts == 9 and batcher.stats.largest_batch == 4
        for (job, got, _), utt in zip(jobs, (a, b, slow)):
            assert sorted(k for k in got if k != "end") == list(range(len(utt.parts)))
        # the same part alone: the same audio to float rounding
        alone = pipeline.speak([(a, 3)])[0]
        assert np.abs(jobs[0][1][3] - alone).max() < 1e-2
    finally:
        batcher.stop()


def test_batcher_refuses_past_its_queue_and_drops_cancelled_jobs(voice):
    pipeline = voice.pipeline
    batcher = Batcher(pipeline, max_batch=2, max_wait_s=0.0, max_jobs=1)
    try:
        utt = pipeline.utterance("A. B. C.")
        live, got2, done2 = _collect(batcher, pipeline.utterance("Still spoken."))
        with batcher.cond:  # the worker cannot take anything while we hold the lock
            job, got, _ = _collect(batcher, utt)
            batcher.jobs.append(job)
            with pytest.raises(BatcherBusy, match="limit 1"):
                batcher.submit(live)
            job.cancelled = True  # its client went away: its place is free, its parts are never spoken
            batcher.submit(live)
        assert done2.wait(30) and got2["end"] is None and 0 in got2
        assert not got and batcher.stats.parts == 1
    finally:
        batcher.stop()


def test_onnx_runtime_server():
    """--runtime onnx: the exported voice through onnxruntime, torch never imported, and concurrent requests
    batched across requests as on torch (the one pipeline's `speak` under the same Batcher)."""
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, export_is_current

    if not export_is_current(DEFAULT_ONNX_DIR):
        pytest.skip(f"no current ONNX export at {DEFAULT_ONNX_DIR}: run python -m tts.export")
    onnx = load(runtime="onnx")
    with SpeechServer("--runtime", "onnx", "--rate-limit", "0") as server:
        health = httpx.get(server.url + "/health").json()
        assert health["runtime"] == "onnx" and health["torch_loaded"] is False
        r = speech(server, input=TEXT, response_format="wav")
        assert r.status_code == 200
        got, sr = sf.read(io.BytesIO(r.content), dtype="float32")
        want = onnx.synthesize(TEXT).samples
        assert sr == onnx.sample_rate and got.shape == want.shape and np.abs(got - want).max() <= 1.01 * LSB
        bad = speech(server, input="\u2603\u2603")
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "input"
        assert speech(server, input="Slower.", speed=0.5).status_code == 200
        assert_concurrent_requests_are_batched_and_sound_as_alone(server, onnx)
        assert httpx.get(server.url + "/health").json()["torch_loaded"] is False


def test_server_start_errors_are_one_line(tmp_path):
    """A missing checkpoint is exit 4 as in the CLI (README's exit codes), a bad setting 2; one line each."""
    import subprocess
    import sys

    from recipes.bench.speech_server import free_port
    from tts.paths import REPO_ROOT

    run = [sys.executable, "-m", "tts.serve", "--port", str(free_port())]
    out = subprocess.run([*run, "--checkpoint", str(tmp_path / "missing.pt")], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 4 and out.stderr.startswith("error:") and "missing.pt" in out.stderr
    assert out.stderr.count("\n") == 1
    out = subprocess.run([*run, "--max-batch", "0"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--max-batch must be in [1, 1024]" in out.stderr
