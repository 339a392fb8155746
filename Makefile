# Phalanx: the two commands are `make demo` and `make test`. Both set everything up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-versions demo bench bench-peers lint unit e2e floors lock binaries operators autoscaler promtool cluster-up cluster-down clean

# The Kubernetes release the local cluster runs ($PHALANX_K8S_VERSION, else the default), the one whose
# v1alpha1 Workload API `make test` also checks, and every supported one (tests/localcluster/versions.py).
K8S_CURRENT := $(shell $(PYTHON) tests/localcluster/versions.py current)
K8S_COMPAT := $(shell $(PYTHON) tests/localcluster/versions.py compat)
K8S_ALL := $(shell $(PYTHON) tests/localcluster/versions.py all)
ifeq ($(K8S_CURRENT),)
$(error unsupported PHALANX_K8S_VERSION; see tests/localcluster/versions.py)
endif

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Phalanx needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	@touch $(STAMP)

# The control planes `make test` needs: the chosen release and the compatibility one, cached per version.
binaries:
	@for v in $(sort $(K8S_CURRENT) $(K8S_COMPAT)); do \
	  K8S_VERSION=$$v bash tests/localcluster/build-binaries.sh >/dev/null || exit 1; done

# The workload operators the e2e tests start (each `operators.ensure("name")` under tests/e2e), built
# before the run so their build time is not spent inside a test; cached by version like the binaries.
E2E_OPERATORS := $(sort $(shell grep -rhoE 'operators\.ensure\("[a-z-]+"\)' tests/e2e | sed -E 's/.*"([a-z-]+)".*/\1/'))

operators:
	$(if $(E2E_OPERATORS),@nice -n 10 bash tests/localcluster/build-operators.sh $(E2E_OPERATORS) >/dev/null)

# The cluster-autoscaler (kwok provider) the ProvisioningRequest e2e tests start beside the cluster,
# built only when a test under tests/e2e starts it (`autoscaler.ensure`); cached by version.
E2E_AUTOSCALER := $(shell grep -rlF 'autoscaler.ensure' tests/e2e 2>/dev/null | head -n 1)

autoscaler:
	$(if $(E2E_AUTOSCALER),@nice -n 10 bash tests/localcluster/build-autoscaler.sh >/dev/null)

# promtool runs the alert-rule tests (tests/unit/deploy/test_alert_rules.py); cached by version.
promtool:
	@nice -n 10 bash tests/localcluster/build-promtool.sh >/dev/null

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

unit: $(STAMP) promtool
	$(PY) -m pytest -m 'not e2e' -q

e2e: $(STAMP) binaries operators autoscaler
	$(PY) -m pytest -m e2e -q

# Everything CI runs: lint, unit, component and end-to-end tests on a real local control plane
# (with the operators the e2e tests use), then the in-cluster install tier where this machine can
# run a real node (else it says why not).
test: $(STAMP) binaries operators autoscaler promtool lint
	$(PY) -m pytest -q --durations=10
	$(if $(filter-out $(K8S_COMPAT),$(K8S_CURRENT)),PHALANX_K8S_VERSION=$(K8S_COMPAT) $(PY) -m pytest -q -m 'e2e and k8s_versions')
	@$(MAKE) --no-print-directory floors
	@$(MAKE) --no-print-directory install-test-if-possible

# The runtime dependencies at the lowest versions pyproject.toml allows (uv's lowest-direct
# resolution; their own dependencies and the test tools float), in a fresh .venv-floors, under the
# tests that exercise each of them: the webhook serving reviews over TLS on uvloop (aiohttp, msgspec,
# orjson, prometheus-client), certificates (cryptography), the controller's clients
# (kubernetes-asyncio) and the plugin (pyyaml). A floor the code has outgrown fails here. docs/development.md "The dependency floors".
# Left out: the fuzzers, the memory and throughput checks and the heap-trim cadence (slow or
# timing-bound, and none exercises a dependency the tests kept do not).
FLOORS := .venv-floors
FLOOR_TOOLS := pytest pytest-asyncio pytest-timeout hypothesis jsonpatch
FLOOR_TESTS := tests/component tests/unit/shared tests/unit/webhook tests/unit/certs tests/unit/controller \
  --deselect tests/unit/webhook/test_webhook_fuzz.py --deselect tests/component/webhook/test_webhook_memory.py \
  --deselect tests/component/webhook/test_bench_floor.py --deselect tests/component/webhook/test_webhook_abuse.py \
  --deselect tests/unit/webhook/test_webhook_body.py::test_the_heap_is_trimmed_after_a_large_burst_and_once_more_later_never_for_small_ones

floors: $(STAMP)
	@$(VENV)/bin/uv venv -q --clear --python $(PY) $(FLOORS)
	@$(VENV)/bin/uv pip install -q --python $(FLOORS)/bin/python --resolution lowest-direct -r pyproject.toml
	@$(VENV)/bin/uv pip install -q --python $(FLOORS)/bin/python $(FLOOR_TOOLS)
	@$(VENV)/bin/uv pip install -q --python $(FLOORS)/bin/python --no-deps -e .
	@printf 'dependency floors: ' && $(FLOORS)/bin/python -m tests.floors
	$(FLOORS)/bin/python -m pytest -q -p no:randomly $(FLOOR_TESTS)

# requirements.lock: the exact, hash-checked versions the image installs (Dockerfile), within
# pyproject.toml's ranges (tests/unit/test_dependency_lock.py). Regenerate after changing them.
lock: $(STAMP)
	$(VENV)/bin/uv pip compile -q pyproject.toml --universal --python-version 3.11 --generate-hashes \
	  --custom-compile-command 'make lock' -o requirements.lock

# The e2e suite on every supported Kubernetes release, one after the other (building what is missing).
test-versions: $(STAMP) operators
	@failed=""; for v in $(K8S_ALL); do \
	  start=$$SECONDS; echo "== e2e on Kubernetes $$v"; \
	  if K8S_VERSION=$$v bash tests/localcluster/build-binaries.sh >/dev/null \
	     && PHALANX_K8S_VERSION=$$v $(PY) -m pytest -m e2e -q; then result=passed; else result=FAILED; failed="$$failed $$v"; fi; \
	  echo "== e2e on Kubernetes $$v: $$result in $$(( (SECONDS - start) / 60 )) min"; \
	done; \
	[ -z "$$failed" ] || { echo "e2e failed on:$$failed"; exit 1; }

# DEMO_ARGS=--autoscaler: a gang grows the cluster through the real cluster-autoscaler.
demo: $(STAMP) binaries
	$(PY) -m tests.demo $(DEMO_ARGS)

bench: $(STAMP) binaries
	$(PY) -m tests.bench

# Phalanx beside Coscheduling, Kueue, Volcano and KAI on the same local cluster (builds the peers it
# lacks; about an hour on a quiet machine). Not part of `make test`. PEERS_ARGS="--size small" etc.
bench-peers: $(STAMP) binaries
	$(PY) -m tests.bench.peers $(PEERS_ARGS)

cluster-up: $(STAMP) binaries
	$(PY) -m tests.localcluster up

cluster-down: $(STAMP)
	$(PY) -m tests.localcluster down

clean:
	-$(PY) -m tests.localcluster down
	rm -rf $(VENV) $(FLOORS) .local out dist .mypy_cache .ruff_cache

# ---- install: the release, the container image and the in-cluster install tier (tests/install) ----
.PHONY: release image install-test install-test-if-possible kind-demo
# The release artefacts in dist/: an install manifest per variant, each compatibility group's CRDs,
# the Helm chart, the image as an OCI archive and the plugin's wheel (docs/operations.md "Releases").
# Needs kubectl (`make binaries` builds one) and docker or podman for the image.
release: $(STAMP) binaries
	$(PY) -m deploy.release

# localhost/phalanx:<version> with docker or podman; see docs/operations.md "The image".
image:
	@bash tests/install/image.sh >/dev/null

# Phalanx installed with kubectl apply -k on a real node (kubelet + containerd) of the local cluster.
install-test: $(STAMP) binaries
	@K8S_VERSION=$(K8S_CURRENT) nice -n 10 bash tests/localcluster/build-binaries.sh --node >/dev/null
	$(PY) -m pytest -m install -q -rs --durations=10 tests/install

# The same install on a kind cluster (podman provider, node image made locally); docs/operations.md "Trying it on kind".
kind-demo: $(STAMP) binaries
	@bash tests/kind/demo.sh

install-test-if-possible: $(STAMP)
	@if reason=$$($(PY) -m tests.install.prereqs); then \
	  $(MAKE) --no-print-directory install-test; \
	else echo "install tier skipped: $$reason"; fi
