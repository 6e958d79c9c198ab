# Fresh-machine entry points (see README): `make demo` and `make test` each set everything up first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system venv demo test corpus-sample

setup: system venv

system:
	bash scripts/setup_system.sh

venv: $(STAMP)

# Re-installs only when pyproject.toml changes (the stamp is newer otherwise).
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,eval]"
	touch $(STAMP)

# The main job: synthesise a sentence with the shipped default model.
demo: setup
	$(PY) -m data_prep.festival_corpus --n 100 --out data/sample

test: setup
	$(PY) -m pytest -q tests
