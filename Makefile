# Fresh-machine entry points (see README): `make demo` and `make test` each set everything up first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system browser venv onnx demo test

setup: system venv onnx

system:
	bash scripts/setup_system.sh

# Debian chromium, only for the listening-test browser tests
browser:
	bash scripts/setup_browser.sh

venv: $(STAMP)

# Re-installs only when pyproject.toml changes (the stamp is newer otherwise).
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,eval,web,peers,export]"
	touch $(STAMP)

# The ONNX export of the default voice (derived from the committed checkpoints, a few seconds, not
# committed): `--runtime auto`, the CLI's default, runs it without importing torch (the fast start).
ONNX_MANIFEST := checkpoints/onnx/manifest.json
onnx: $(ONNX_MANIFEST)

# The graphs trace the models' own maths, so a change to it (tts/models, tts/vocoder, the exporter) makes the
# export stale too: tts.runtime.onnx_engine.export_is_current sees only the checkpoints' hashes.
ONNX_SOURCES := tts/export.py $(wildcard tts/models/*.py tts/models/layers/*.py tts/vocoder/*.py)
$(ONNX_MANIFEST): $(STAMP) checkpoints/default.json checkpoints/nar.pt checkpoints/nar_block.pt \
		checkpoints/vocoder/source_filter.pt $(ONNX_SOURCES)
	$(PY) -m tts.export --out checkpoints/onnx

# The main job: synthesise a sentence with the shipped default model.
# Offline, with the checkpoints committed in checkpoints/ (default model: checkpoints/default.json).
demo: setup
	$(PY) -m tts.synthesize --text "Hello! This sentence was synthesised by the shipped default model." --out out.wav

test: setup browser
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=25 tests
