# Fresh-machine entry points (see README): `make demo` and `make test` each set everything up first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system browser venv demo test

setup: system venv

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

# The main job: synthesise a sentence with the shipped default model.
# Offline, with the checkpoints committed in checkpoints/ (default model: checkpoints/default.json).
demo: setup
	$(PY) -m tts.synthesize --text "Hello! This sentence was synthesised by the shipped default model." --out out.wav

test: setup browser
	$(PY) -m pytest -q tests
