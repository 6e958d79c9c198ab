"""A local speech server with an OpenAI-compatible endpoint.

    python -m tts.serve --host 127.0.0.1 --port 8000

Endpoints
  POST /v1/audio/speech   {"model", "input", "voice", "response_format": wav|pcm|flac, "speed": 0.25..4}
                          -> the audio, streamed (chunked) as each sentence is made (tts/serve/formats.py)
  GET  /v1/models         the served model (its id, and OpenAI's "tts-1"/"tts-1-hd", are accepted as model)
  GET  /health            status, sample rate, pending requests, batch statistics
  GET  /                  a page to type text and hear it (streaming playback)
Bad requests get 4xx with {"error": {"message", "type", "param", "code"}}; bodies over the limit 413; too
many requests per client 429; a full queue or no audio within the first-audio timeout 503.  Concurrent
requests are batched dynamically (tts/serve/batcher.py); `python -m recipes.bench.serve_loadtest` measures it.
"""
