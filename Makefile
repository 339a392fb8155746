# Phalanx: the two commands are `make demo` and `make test`. Both set everything up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench bench-peers lint unit e2e binaries cluster-up cluster-down clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Phalanx needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	@touch $(STAMP)

binaries:
	@bash tests/localcluster/build-binaries.sh >/dev/null

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

unit: $(STAMP)
	$(PY) -m pytest -m 'not e2e' -q

e2e: $(STAMP) binaries
	$(PY) -m pytest -m e2e -q

# Everything CI runs: lint, unit, component and end-to-end tests on a real local control plane.
test: $(STAMP) binaries lint
	$(PY) -m pytest -q --durations=10

demo: $(STAMP) binaries
	$(PY) -m tests.demo

bench: $(STAMP) binaries
	$(PY) -m tests.bench

# Phalanx beside Coscheduling, Kueue and Volcano on the same local cluster (builds the peers it
# lacks; about an hour on a quiet machine). Not part of `make test`. PEERS_ARGS="--size small" etc.
bench-peers: $(STAMP) binaries
	$(PY) -m tests.bench.peers $(PEERS_ARGS)

cluster-up: $(STAMP) binaries
	$(PY) -m tests.localcluster up

cluster-down: $(STAMP)
	$(PY) -m tests.localcluster down

clean:
	-$(PY) -m tests.localcluster down
	rm -rf $(VENV) .local out .mypy_cache .ruff_cache
