"""A local speech server with an OpenAI-compatible endpoint.

    python -m tts.serve --host 127.0.0.1 --port 8000

Endpoints
  POST /v1/audio/speech   {"model", "input", "voice", "response_format": mp3|opus|aac|flac|wav|pcm,
                           "speed": 0.25..2, "stream_format": audio|sse}
                          -> the audio, streamed (chunked) as each sentence is made (tts/serve/formats.py),
                             or OpenAI's server-sent events speech.audio.delta / speech.audio.done
  GET  /v1/models         every accepted model id: the served models, one per voice, and OpenAI's names
  GET  /v1/audio/voices   the served voices (a request's "voice"; "default" is the first) and the other
                          accepted names (OpenAI's voices: the default voice); also GET /v1/voices
  GET  /health            status, sample rate, pending requests, batch statistics
  GET  /                  a page to type text and hear it (streaming playback)
Bad requests get 4xx with {"error": {"message", "type", "param", "code"}}; bodies over the limit 413 (the
size is checked before the body is parsed); malformed or too deeply nested JSON 400; too many requests per
client 429; a full queue or no audio within the first-audio timeout 503.  Concurrent requests are batched
dynamically (tts/serve/batcher.py); `python -m recipes.bench.serve_loadtest` measures it.

Hostile clients (tests/test_serve_hostile.py):
- connections (tts/serve/connections.py): at most --max-connections-per-client per address and
  --max-connections in all, where a newcomer closes the oldest *idle* connection (one waiting for a request
  head) rather than being refused, so idle sockets cannot starve /health or anyone else; a request head must
  arrive whole within --header-timeout, its body within --body-timeout (408); heads over --max-header-bytes
  (16 KiB) are 431;
- a Host header other than localhost, a loopback address, the bind address or an --allow-host name is 421
  (DNS rebinding; tts.web_limits.HostCheck);
- a client that hangs up has its request cancelled, before its first audio or during it;
- back-pressure: a response has at most --parts-ahead parts spoken and not yet sent, and each socket a fixed
  kernel send buffer, so a client that stops reading pauses its own synthesis; after --send-timeout seconds
  without reading it is dropped (`serve_loadtest --non-readers 40` measures the memory);
- SIGTERM / Ctrl-C: responses in progress get --shutdown-timeout seconds, then are cut;
- start-up: every setting is checked (finite, in range; one line, exit 2), the port is bound before the model
  loads (taken: one line, exit 3), a missing, corrupt or untrusted checkpoint is exit 4 (tts/serve/__main__.py).
"""
