# Two commands set everything up on a fresh machine with Python 3.11: `make demo` and `make test`.
# Each creates (or reuses) the local virtualenv .venv and installs the pinned requirements first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test clean-venv

demo: $(VENV)/.runtime-installed
	$(BIN)/python build_pretraining_dataset.py --overwrite
	$(BIN)/python -m data.inspect_dataset

test: $(VENV)/.test-installed
	$(BIN)/python -m pytest

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.runtime-installed: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.test-installed: requirements-test.txt requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	touch $@ $(VENV)/.runtime-installed

clean-venv:
	rm -rf $(VENV)
