"""python -m tts.serve --host 127.0.0.1 --port 8000 [--runtime auto|torch|onnx] [--max-batch 8] [--batch-wait-ms 5]"""

from __future__ import annotations

import argparse
import logging
import sys

try:
    from tts.serve.app import ServeLimits
except ModuleNotFoundError as e:  # fastapi / uvicorn are the `web` extra
    sys.exit(f"error: the speech server needs {e.name}: pip install -e '.[web]'")

DEFAULTS = ServeLimits()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tts.serve", description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--runtime", choices=["auto", "torch", "onnx"], default="auto",
                   help="auto (default: the ONNX export of the default voice when it is current and asked for), "
                        "torch, or onnx (the export of `python -m tts.export`, run by onnxruntime)")
    p.add_argument("--model", choices=["nar", "ar"], default=None, help="shipped acoustic model (default: checkpoints/default.json)")
    p.add_argument("--checkpoint", default=None, help="acoustic checkpoint file (overrides --model)")
    p.add_argument("--vocoder", default=None, help="vocoder (default: checkpoints/default.json)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch / onnxruntime CPU threads")
    p.add_argument("--max-batch", type=int, default=8, help="parts (sentences) per batch across requests; 1 = one at a time")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="how long a batch waits for more requests")
    p.add_argument("--max-pad-ratio", type=float, default=1.5,
                   help="parts batched together differ in token length by at most this factor (padding costs)")
    p.add_argument("--max-pending", type=int, default=256, help="requests waiting or being spoken; more get 503")
    p.add_argument("--max-chars", type=int, default=DEFAULTS.max_chars, help="input characters per request")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULTS.max_body_bytes)
    p.add_argument("--first-audio-timeout", type=float, default=DEFAULTS.first_audio_timeout_s,
                   help="seconds a request may wait for its first audio (then 503)")
    p.add_argument("--request-timeout", type=float, default=DEFAULTS.request_timeout_s,
                   help="seconds a whole response may take (then the stream is ended early)")
    p.add_argument("--rate-limit", type=float, default=DEFAULTS.requests_per_minute,
                   help="requests per minute per client address (0 = none)")
    p.add_argument("--seed", type=int, default=DEFAULTS.seed, help="refiner noise seed (same text, same audio)")
    p.add_argument("--log-level", default="warning")
    args = p.parse_args(argv)
    if not 0 < args.port < 65536:
        p.error("--port must be in 1..65535")
    if args.max_batch < 1 or args.batch_wait_ms < 0 or args.max_pending < 1 or args.max_pad_ratio < 1:
        p.error("--max-batch >= 1, --batch-wait-ms >= 0, --max-pending >= 1 and --max-pad-ratio >= 1 are needed")
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be >= 1")
    if not 0 <= args.seed < 2**31:
        p.error("--seed must be in [0, 2**31)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import uvicorn

    from tts.api import load
    from tts.serve.app import create_app
    from tts.serve.batcher import Batcher

    try:
        limits = ServeLimits(max_chars=args.max_chars, max_body_bytes=args.max_body_bytes,
                             first_audio_timeout_s=args.first_audio_timeout, request_timeout_s=args.request_timeout,
                             requests_per_minute=args.rate_limit, seed=args.seed)
        voice = load(args.model, checkpoint=args.checkpoint, vocoder=args.vocoder, device=args.device,
                     runtime=args.runtime, threads=args.threads)
    except Exception as e:  # noqa: BLE001 - a missing checkpoint/export or a bad limit: one line, exit 2
        print(f"error: {e}", file=sys.stderr)
        return 2
    # an AR decoder's prenet dropout is seeded per batch, not per item: batch 1 keeps its audio reproducible
    batcher = Batcher(voice.pipeline, max_batch=1 if voice.pipeline.capabilities.autoregressive else args.max_batch,
                      max_wait_s=args.batch_wait_ms / 1000, max_jobs=args.max_pending, max_pad_ratio=args.max_pad_ratio)
    app = create_app(voice, batcher, limits)
    logging.basicConfig(level=args.log_level.upper())
    print(f"tts.serve: {voice.name} ({voice.runtime}) on http://{args.host}:{args.port} max_batch={batcher.max_batch}",
          file=sys.stderr, flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_keep_alive=5,
                    limit_concurrency=4 * args.max_pending, h11_max_incomplete_event_size=16 * 1024)
    finally:
        batcher.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
