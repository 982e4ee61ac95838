# Two commands set everything up on a fresh machine with Python 3.11: `make demo` and `make test`.
# Each creates (or reuses) the local virtualenv .venv and installs the pinned requirements first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The GPU image's Python, emulated here (tests/test_jax_run.py runs a device call's printed line under it):
# Python 3.12 with requirements-accelerator.txt, no TensorFlow; the wheels a call carries (keras, namex, optree
# for Python 3.12) downloaded into $(VENV312)/wheels. Built by make, before pytest's workers start.
PYTHON312 ?= $(shell for p in $$(command -v python3.12) $(HOME)/.pyenv/versions/3.12*/bin/python; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && echo $$p && break; done)
VENV312 := .venv312

.PHONY: demo test clean-venv

# The demo keeps to its own data directory, so it never touches a dataset or model of yours.
DEMO_DATA := electra_demo
DEMO_PRETRAIN_HPARAMS := {"num_train_steps": 250, "iterations_per_loop": 25, "save_checkpoints_steps": 125, "do_eval": true, "num_eval_steps": 10}

demo: $(VENV)/.runtime-installed
	ELECTRA_DATA_DIR=$(DEMO_DATA) $(BIN)/python build_pretraining_dataset.py --overwrite
	ELECTRA_DATA_DIR=$(DEMO_DATA) $(BIN)/python -m data.inspect_dataset
	ELECTRA_DATA_DIR=$(DEMO_DATA) $(BIN)/python run_pretraining.py --model-name electra_tiny \
		--hparams '$(DEMO_PRETRAIN_HPARAMS)'
	ELECTRA_DATA_DIR=$(DEMO_DATA) $(BIN)/python -m inference.inspect_model --model-name electra_tiny --held-out 3
	@echo
	@echo 'What the numbers mean: after 250 steps this 2-layer, 64-wide discriminator gives almost every token about the same P(replaced), near the share of fakes in training (0.12), and flags only the most out-of-place fakes; that is the early plateau of docs/pretraining.md (held-out AUC near 0.55-0.6), where small ELECTRA discriminators stay for their first ~1,000 steps, so it is the objective at this scale, not a broken run.'
	@echo 'Where to look next: the run'"'"'s curves in $(DEMO_DATA)/models/electra_tiny/logs/curves.png, docs/pretraining.md for longer runs that leave the plateau, and your own sentences or a [MASK] with: $(BIN)/python -m inference.inspect_model --data-dir $(DEMO_DATA) --model-name electra_tiny [--fill-mask] "your text".'

TEST_ENVIRONMENTS := $(VENV)/.test-installed $(VENV)/.hf4-installed $(VENV312)/.installed
# The three environments install side by side: pip unpacks and compiles on one core, so the small two fit
# beside the large one. Then two worker processes, each test file on one of them (its module fixtures built
# once): the suite spends much of its time starting processes and tracing, which leaves a second core idle
# when run serially.
test:
	$(MAKE) --no-print-directory -j3 $(TEST_ENVIRONMENTS)
	$(BIN)/python -m pytest -n 2 --dist loadfile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.runtime-installed: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.test-installed: requirements-test.txt requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	touch $@ $(VENV)/.runtime-installed

# transformers 4.x beside the main pin, for the test that runs its TF-checkpoint converters in a subprocess.
$(VENV)/.hf4-installed: requirements-hf4.txt | $(BIN)/python
	rm -rf $(VENV)/hf4
	$(BIN)/python -m pip install --quiet --no-deps --target $(VENV)/hf4 -r requirements-hf4.txt
	touch $@

$(VENV312)/.installed: requirements-accelerator.txt requirements-accelerator-wheels.txt
	@test -n "$(PYTHON312)" || { echo "make: no Python 3.12 for $(VENV312): install one, or give" \
		"PYTHON312=/path/to/python3.12" >&2; exit 2; }
	rm -rf $(VENV312)
	$(PYTHON312) -m venv $(VENV312)
	$(VENV312)/bin/python -m pip install --quiet -r requirements-accelerator.txt
	$(VENV312)/bin/python -m pip download --quiet --no-deps --only-binary=:all: -d $(VENV312)/wheels \
		-r requirements-accelerator-wheels.txt
	touch $@

clean-venv:
	rm -rf $(VENV) $(VENV312)
