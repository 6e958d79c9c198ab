"""Runs NVIDIA's `nemo-text-processing` normaliser for `recipes.peers.measure_nemo`, inside NeMo's own venv.

This file imports nothing from `tts`: it is executed as a script by the Python of a separate virtual
environment (`nemo-text-processing` pins pynini and pulls pandas/transformers, which we keep out of
the project's venv).  Protocol: a JSON object on stdin, a JSON object on stdout.

    {"cache_dir": DIR, "inputs": [written, ...]}   ->   {"import_s", "init_s", "outputs", "latency_s"}

`init_s` is the grammar build when `cache_dir` holds no compiled grammar yet (first use) and the
load of the cached .far file otherwise; the caller runs the worker twice to get both.
`outputs[i]` is NeMo's spoken form of `inputs[i]`, or null when NeMo raised (the error is in
`errors[i]`); `latency_s[i]` is the wall time of that one call.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    request = json.load(sys.stdin)
    t0 = time.perf_counter()
    from nemo_text_processing.text_normalization.normalize import Normalizer

    t1 = time.perf_counter()
    # input_case="cased" and post_process=True: the settings of NeMo's own English TN unit tests
    normalizer = Normalizer(
        input_case="cased", lang="en", cache_dir=request["cache_dir"], overwrite_cache=False, post_process=True
    )
    t2 = time.perf_counter()
    outputs: list[str | None] = []
    errors: list[str | None] = []
    latency: list[float] = []
    for text in request["inputs"]:
        start = time.perf_counter()
        try:
            outputs.append(normalizer.normalize(text, verbose=False))
            errors.append(None)
        except Exception as exc:  # noqa: BLE001 -- one bad case must not lose the others' figures
            outputs.append(None)
            errors.append(f"{type(exc).__name__}: {exc}")
        latency.append(time.perf_counter() - start)
    json.dump(
        {"import_s": t1 - t0, "init_s": t2 - t1, "outputs": outputs, "errors": errors, "latency_s": latency},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
