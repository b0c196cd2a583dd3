# Two entry points for a newcomer: `make demo` (set up + a completion on the embedded model) and
# `make test` (set up + the test suite). Both create .venv on first use.
VENV := .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0
# The official SDAR code's own small environment (transformers 4.52.4), kept out of .venv: tests/test_sdar_parity.py
# runs tests/sdar_reference/run_official.py in it.
SDAR_VENV := .venv-sdar

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==$(TORCH_VERSION)
	$(PY) -m pip install --quiet -e '.[dev,cuda,serve,bench]'
	touch $@

$(SDAR_VENV)/.installed: tests/sdar_reference/requirements.txt
	python3 -m venv --clear $(SDAR_VENV)
	$(SDAR_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SDAR_VENV)/bin/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(SDAR_VENV)/bin/python -m pip install --quiet -r tests/sdar_reference/requirements.txt
	touch $@

.PHONY: setup sdar-env demo test lint
setup: $(VENV)/.installed
	@$(VENV)/bin/dice-lsp --version

sdar-env: $(SDAR_VENV)/.installed

demo: setup
	$(VENV)/bin/dice-lsp complete examples/vector_ops.cu --line 12 --character 4

# The tests run on every core (pytest-xdist; each test process uses one torch thread, tests/__init__.py):
# most tests wait on a server, nvcc or clang in another process, so two cores run the suite in ~60% of the time.
# A file's tests run on one worker (a module's server starts once), the longest files first (pyproject's addopts,
# tests/scheduling.py; `pytest --store-durations` rewrites the times in tests/durations.json).
TEST_WORKERS ?= auto
test: setup sdar-env
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n $(TEST_WORKERS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy dice_lsp
