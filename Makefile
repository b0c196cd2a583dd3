# Two entry points for a newcomer: `make demo` (set up + a completion on the embedded model) and
# `make test` (set up + the test suite). Both create .venv on first use.
VENV := .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==$(TORCH_VERSION)
	$(PY) -m pip install --quiet -e '.[dev,cuda,serve,bench]'
	touch $@

.PHONY: setup demo test lint
setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/dice-lsp complete examples/vector_add.cu --line 7 --character 4

test: setup
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy dice_lsp
