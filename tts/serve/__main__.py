"""python -m tts.serve --host 127.0.0.1 --port 8000 [--voice slt --voice joe] [--runtime auto|torch|onnx] [--max-batch 8]

Speaks with every shipped voice (checkpoints/default.json) unless --voice names some (repeatable), or with one
--model / --checkpoint; a request's `voice` picks one ("default" and OpenAI's voice names: the first), GET
/v1/audio/voices (or /v1/voices) lists them.

Exit codes: 2 a bad setting (one line, before anything loads), 3 the address cannot be listened on (the port
is taken, the host is not this machine's, no permission; checked before the model loads), 4 a missing,
corrupt or untrusted checkpoint or vocoder, 5 a mel-config mismatch, 1 an internal error.  SIGTERM or
Ctrl-C stop it: new connections are refused, responses in progress get --shutdown-timeout seconds to
finish and are then cut, and the process ends by the signal (143 / 130 in a shell)."""

from __future__ import annotations

import argparse
import logging
import math
import os
import socket
import sys
from typing import NoReturn

try:
    from tts.serve.app import ServeLimits
    from tts.serve.connections import ConnectionLimits
except ModuleNotFoundError as e:  # fastapi / uvicorn are the `web` extra
    sys.exit(f"error: the speech server needs {e.name}: pip install -e '.[web]'")

from tts.errors import CheckpointError, MelConfigMismatchError

DEFAULTS = ServeLimits()
CONNECTIONS = ConnectionLimits()
EXIT_USAGE, EXIT_LISTEN, EXIT_CHECKPOINT, EXIT_MISMATCH, EXIT_INTERNAL = 2, 3, 4, 5, 1
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# the limit dataclasses' fields as the options that set them (their errors name the field)
OPTIONS = {"max_chars": "--max-chars", "max_body_bytes": "--max-body-bytes", "first_audio_timeout_s":
           "--first-audio-timeout", "request_timeout_s": "--request-timeout", "requests_per_minute": "--rate-limit",
           "seed": "--seed", "parts_ahead": "--parts-ahead", "max_head_bytes": "--max-header-bytes",
           "max_connections": "--max-connections", "max_per_client": "--max-connections-per-client",
           "head_timeout_s": "--header-timeout", "body_timeout_s": "--body-timeout", "send_timeout_s": "--send-timeout"}


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse prints the usage too: one line is enough
        print(f"error: {message} (python -m tts.serve --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m tts.serve", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a Host header to answer besides localhost, loopback and the bind address (repeatable; "
                        "'*' any): other Hosts get 421, against DNS rebinding")
    p.add_argument("--runtime", choices=["auto", "torch", "onnx"], default="auto",
                   help="auto (default: the ONNX export of the default voice when it is current and asked for), "
                        "torch, or onnx (the export of `python -m tts.export`, run by onnxruntime)")
    p.add_argument("--voice", action="append", default=None, metavar="NAME",
                   help="a shipped voice to serve (repeatable; default: every shipped voice, the default one first)")
    p.add_argument("--model", default=None,
                   help="serve this one shipped acoustic model (of --voice's when one is given; default: each voice's first)")
    p.add_argument("--checkpoint", default=None, help="serve this one acoustic checkpoint file (its voice: 'default')")
    p.add_argument("--vocoder", default=None, help="vocoder of every voice (default: each voice's own, checkpoints/default.json)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch / onnxruntime CPU threads")
    p.add_argument("--max-batch", type=int, default=8, help="parts (sentences) per batch across requests; 1 = one at a time")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="how long a batch waits for more requests")
    p.add_argument("--max-pad-ratio", type=float, default=1.5,
                   help="parts batched together differ in token length by at most this factor (padding costs)")
    p.add_argument("--max-pending", type=int, default=256, help="requests waiting or being spoken; more get 503")
    p.add_argument("--parts-ahead", type=int, default=DEFAULTS.parts_ahead,
                   help="parts of a response spoken before its client has read the earlier ones (back-pressure: "
                        "the audio held for a client that does not read)")
    p.add_argument("--max-chars", type=int, default=DEFAULTS.max_chars, help="input characters per request")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULTS.max_body_bytes)
    p.add_argument("--max-header-bytes", type=int, default=DEFAULTS.max_head_bytes,
                   help="request line + headers (431 past it)")
    p.add_argument("--first-audio-timeout", type=float, default=DEFAULTS.first_audio_timeout_s,
                   help="seconds a request may wait for its first audio (then 503)")
    p.add_argument("--request-timeout", type=float, default=DEFAULTS.request_timeout_s,
                   help="seconds a whole response may take (then the stream is ended early)")
    p.add_argument("--rate-limit", type=float, default=DEFAULTS.requests_per_minute,
                   help="requests per minute per client address (0 = none)")
    p.add_argument("--max-connections", type=int, default=CONNECTIONS.max_connections,
                   help="open connections in all (past it the oldest idle one is closed)")
    p.add_argument("--max-connections-per-client", type=int, default=CONNECTIONS.max_per_client,
                   help="open connections per client address, IPv6 per /64 (past it its oldest idle one is closed)")
    p.add_argument("--header-timeout", type=float, default=CONNECTIONS.head_timeout_s,
                   help="seconds for a whole request head to arrive (then 408)")
    p.add_argument("--body-timeout", type=float, default=CONNECTIONS.body_timeout_s,
                   help="seconds for a whole request body to arrive after its head (then 408)")
    p.add_argument("--send-timeout", type=float, default=CONNECTIONS.send_timeout_s,
                   help="seconds a client may read nothing of a response waiting for it (then it is dropped)")
    p.add_argument("--shutdown-timeout", type=float, default=5.0,
                   help="seconds responses in progress get to finish after SIGTERM / Ctrl-C")
    p.add_argument("--seed", type=int, default=DEFAULTS.seed, help="refiner noise seed (same text, same audio)")
    p.add_argument("--lexicon", default=None, metavar="FILE",
                   help="user lexicon (word TAB phones, one per line) over every voice's own pronunciations")
    p.add_argument("--log-level", default="warning", choices=LOG_LEVELS)
    args = p.parse_args(argv)
    if args.checkpoint is not None and args.voice:
        p.error("--voice and --checkpoint: a checkpoint speaks with its own voice; give one of them")
    if args.voice and any(not v.strip() for v in args.voice):
        p.error("--voice is empty: give a shipped voice (python -m tts.synthesize --list-voices)")
    try:
        check_settings(args)
        args.limits = ServeLimits(max_chars=args.max_chars, max_body_bytes=args.max_body_bytes,
                                  first_audio_timeout_s=args.first_audio_timeout, request_timeout_s=args.request_timeout,
                                  requests_per_minute=args.rate_limit, seed=args.seed, parts_ahead=args.parts_ahead,
                                  max_head_bytes=args.max_header_bytes)
        args.connection_limits = ConnectionLimits(
            max_connections=args.max_connections, max_per_client=args.max_connections_per_client,
            head_timeout_s=args.header_timeout, body_timeout_s=args.body_timeout, send_timeout_s=args.send_timeout,
            max_head_bytes=args.max_header_bytes)
    except ValueError as e:
        field, _, rest = str(e).partition(" ")
        p.error(f"{OPTIONS.get(field, field)} {rest}")
    return args


def check_settings(args: argparse.Namespace) -> None:
    """The settings ServeLimits / ConnectionLimits do not check; ValueError names the option.  Every float is
    checked finite (`--batch-wait-ms inf` once killed the batching thread, `--rate-limit nan` made every
    request 429) and every number against a range (a typo of 1e9 is refused, not run)."""
    ranges = {"port": (1, 65535), "max_batch": (1, 1024), "batch_wait_ms": (0, 10_000), "max_pad_ratio": (1, 1000),
              "max_pending": (1, 100_000), "shutdown_timeout": (0, 3600)}
    if args.threads is not None:
        ranges["threads"] = (1, 1024)
    for name, (low, high) in ranges.items():
        value = getattr(args, name)
        if not (math.isfinite(value) and low <= value <= high):
            raise ValueError(f"--{name.replace('_', '-')} must be in [{low:g}, {high:g}], got {value!r}")
    for name, value in (("rate_limit", args.rate_limit), ("first_audio_timeout", args.first_audio_timeout),
                        ("request_timeout", args.request_timeout), ("header_timeout", args.header_timeout),
                        ("body_timeout", args.body_timeout), ("send_timeout", args.send_timeout)):
        if not math.isfinite(value):
            raise ValueError(f"--{name.replace('_', '-')} must be a finite number, got {value!r}")
    for host in args.allow_host:
        if not host or any(c.isspace() or c in "/@" for c in host):
            raise ValueError(f"--allow-host {host!r} is not a host name")


def listen(host: str, port: int, backlog: int = 2048) -> list[socket.socket]:
    """Listening sockets for host:port, bound before the model loads: a taken port fails in a second, not
    after the load (uvicorn would bind only once the app is built).  As asyncio's create_server: every
    address the host resolves to, SO_REUSEADDR (a restart does not wait out TIME_WAIT; a port another
    process listens on stays refused), IPv6 sockets v6-only."""
    socks: list[socket.socket] = []
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def served_voices(args: argparse.Namespace) -> list[str | None]:
    """The voice names to load, in the server's order (None: --checkpoint's own, or --model's without --voice)."""
    from tts.runtime.release import shipped_defaults

    if args.checkpoint is not None or (args.model is not None and not args.voice):
        return [None]
    if args.voice:
        return list(dict.fromkeys(args.voice))
    defaults = shipped_defaults()
    return [defaults["voice"], *(v for v in defaults["voices"] if v != defaults["voice"])]


def load_voices(args: argparse.Namespace):
    """{name: Voice} in the server's order (the first the default), or (None, (exit code, one-line message))."""
    from tts.api import load

    try:
        voices = {}
        for name in served_voices(args):
            voice = load(args.model, voice=name, checkpoint=args.checkpoint, vocoder=args.vocoder, device=args.device,
                         runtime=args.runtime, threads=args.threads, lexicon=args.lexicon)
            voices[name or voice.voice or "default"] = voice
        return voices, None
    except MelConfigMismatchError as e:
        return None, (EXIT_MISMATCH, str(e))
    except (CheckpointError, FileNotFoundError) as e:  # an untrusted checkpoint is a CheckpointError
        return None, (EXIT_CHECKPOINT, str(e))
    except Exception as e:  # noqa: BLE001 - a start that fails is one line, never a traceback
        if type(e).__name__ == "PretrainedVocoderError":  # tts.vocoder.pretrained imports torch: not here
            return None, (EXIT_CHECKPOINT, str(e))
        if isinstance(e, (ValueError, TypeError)) or type(e).__name__ == "PronunciationError":
            # an unknown vocoder name, a device that is not there, a bad --lexicon line
            return None, (EXIT_USAGE, str(e))
        if os.environ.get("TTS_DEBUG"):
            raise
        return None, (EXIT_INTERNAL, f"internal error ({type(e).__name__}: {e}); rerun with TTS_DEBUG=1")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        socks = listen(args.host, args.port)
    except OSError as e:  # socket.gaierror too (a host name that does not resolve)
        print(f"error: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return EXIT_LISTEN
    try:
        voices, failure = load_voices(args)
        if failure is not None:
            print(f"error: {failure[1]}", file=sys.stderr)
            return failure[0]
        return serve(args, voices, socks)
    finally:
        for sock in socks:
            sock.close()


def serve(args: argparse.Namespace, voices: dict, socks: list[socket.socket]) -> int:
    import uvicorn

    from tts.serve.app import Speaker, create_app
    from tts.serve.batcher import Batcher
    from tts.serve.connections import ConnectionGuard, guarded_protocol
    from tts.web_limits import HostCheck

    # one batcher (one worker thread) per voice.  An AR decoder's prenet dropout is seeded per batch, not per
    # item: batch 1 keeps its audio reproducible
    speakers = {name: Speaker(voice, Batcher(
        voice.pipeline, max_batch=1 if voice.pipeline.capabilities.autoregressive else args.max_batch,
        max_wait_s=args.batch_wait_ms / 1000, max_jobs=args.max_pending, max_pad_ratio=args.max_pad_ratio))
        for name, voice in voices.items()}
    guard = ConnectionGuard(args.connection_limits)
    app = create_app(speakers, args.limits, hosts=HostCheck(args.host, args.allow_host), connections=guard.stats)
    logging.basicConfig(level=args.log_level.upper() if args.log_level != "trace" else 5)
    served = ", ".join(f"{name}={s.voice.name} ({s.voice.runtime}, max_batch={s.batcher.max_batch})"
                       for name, s in speakers.items())
    print(f"tts.serve: {served} on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        app, http=guarded_protocol(guard), lifespan="off", log_level=args.log_level,
        # no limit_concurrency: it answers 503 to every request once that many sockets are open (idle ones
        # too); the guard bounds connections and keeps room by closing idle ones
        timeout_keep_alive=5, timeout_graceful_shutdown=args.shutdown_timeout,
        # h11 buffers an incomplete head up to this; the guard answers 431 past max_head_bytes before it
        h11_max_incomplete_event_size=args.max_header_bytes + 4096)
    try:
        # uvicorn handles SIGINT/SIGTERM: stops accepting, drains for --shutdown-timeout, cuts what is left,
        # then re-raises the signal (the process ends by it)
        uvicorn.Server(config).run(sockets=socks)
    except KeyboardInterrupt:  # the re-raised SIGINT (SIGTERM's default action ends the process at once)
        return 130
    finally:
        for speaker in speakers.values():
            speaker.batcher.stop(timeout=2.0)  # a batch in progress is not waited out: the worker thread is a daemon
    return 0


if __name__ == "__main__":
    sys.exit(main())
