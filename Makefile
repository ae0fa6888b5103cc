# Every task has one target; `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime
DIST ?= dist
CHART_DIR := charts/storage-affinity-webhook
CERT_DIR := dev-certs
BIND ?= 127.0.0.1:8443
CLUSTER ?= examples/cluster.yaml
FILE ?= examples/mover-pod.yaml
PYTEST_ARGS ?=
HELM := .tools/bin/helm
# pytest-xdist: one worker more than there are cores (0 runs the tests in this process, for --pdb), as much of the
# suite waits on servers, sockets and timeouts: on 2 cores, 3 workers took 6 min 1 s, 2 took 7 min 44 s and 4 took
# 6 min 24 s. Each test file runs on one worker (--dist loadfile), so a module's shared fixtures start once.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN) + 1 )))
PYTEST := $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile
# The project's own modules, compiled before the tests: every server and command a test starts imports them, and
# where PYTHONDONTWRITEBYTECODE is set nothing else keeps their bytecode (valgrind's count of one review spent 7 of
# its 32 s compiling them). Up-to-date files are skipped; a file that does not compile is printed and left to the
# lint and the tests to name.
COMPILE := $(BIN)/python -m compileall -q -j0 rules webhook certs testkit bench tests || true

.PHONY: help install run test unit chart chart-test dist lint fmt certs review suites clean bench tools bench-tools monitoring-tools kubectl-tools soak fuzz docs

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' \
		'{name[NR] = $$1; text[NR] = $$2; if (length($$1) > width) width = length($$1)} \
		END {for (i = 1; i <= NR; i++) printf "  %-" width "s  %s\n", name[i], text[i]}'

# The venv with uv, which installs the package: uv resolves, fetches and compiles in parallel, 12 s here where pip
# took 35 s of the 2 cores' CPU. Compiled, as pip does: where PYTHONDONTWRITEBYTECODE is set, each server a test
# starts would otherwise compile its imports again (1.8 s a process). The venv's own pip stays for
# scripts/install-helm.sh's download.
UV := $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python
# uv reads its own settings, not pip's: a mirror set for pip (PIP_INDEX_URL) is handed on.
ifdef PIP_INDEX_URL
export UV_DEFAULT_INDEX ?= $(PIP_INDEX_URL)
endif
$(VENV)/.uv:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'uv>=0.13,<0.14'
	@touch $@

$(STAMP): setup.cfg pyproject.toml | $(VENV)/.uv
	$(UV) -e '.[test]'
	@touch $@ $(RUNTIME)

# What serving and the CLI need, without the test toolchain: `run`, `review` and `suites` stop here.
$(RUNTIME): setup.cfg pyproject.toml | $(VENV)/.uv
	$(UV) -e .
	@touch $@

install: $(STAMP) ## create .venv and install the package with its test tools

$(CERT_DIR)/tls.crt: | $(RUNTIME)
	$(BIN)/storage-affinity-webhook certs --service storage-affinity-webhook --namespace storage-affinity \
		--out $(CERT_DIR)

certs: $(CERT_DIR)/tls.crt ## issue a development CA and serving certificate into dev-certs/

run: $(RUNTIME) certs ## serve the webhook on https://127.0.0.1:8443 (embedded policy, example cluster, a log line per review)
	$(BIN)/storage-affinity-webhook serve --cert $(CERT_DIR)/tls.crt --key $(CERT_DIR)/tls.key \
		--bind $(BIND) --cluster $(CLUSTER) --log-reviews

review: $(RUNTIME) ## run the admission pipeline offline: make review FILE=examples/mover-pod.yaml
	$(BIN)/storage-affinity-webhook review -f $(FILE) --cluster $(CLUSTER) -o json

suites: $(RUNTIME) ## run the policy test suites under examples/ (storage-affinity-test.yaml; make unit runs them too)
	$(BIN)/storage-affinity-webhook test examples/

docs: $(STAMP) ## regenerate what is generated: docs/policy.md, the chart's values.schema.json and README.md
	$(BIN)/python -m webhook.policy.doc > docs/policy.md
	$(BIN)/python scripts/sync-chart-policy-schema.py
	$(BIN)/python scripts/chart-readme.py

# The lint, as one shell command: `lint` runs it, and `test` beside the tests (not through $(MAKE), which `make -n`
# would run).
LINT = $(BIN)/ruff format --check . && $(BIN)/ruff check . && $(BIN)/mypy && $(BIN)/lint-imports

lint: $(STAMP) ## formatter check, linter, mypy strict, import contracts
	$(LINT)

fmt: $(STAMP) ## format and autofix
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

unit: $(STAMP) kubectl-tools $(HELM) ## run the tests only (no lint, no chart; the docs tests render `helm install` commands)
	@$(COMPILE)
	$(PYTEST) --ignore=tests/chart $(PYTEST_ARGS)

chart-test: $(STAMP) monitoring-tools $(HELM) ## render, lint and check the chart in every mode, its alerts and dashboard (installs helm)
	@$(COMPILE)
	$(PYTEST) tests/chart $(PYTEST_ARGS)

# helm, pinned: reinstalled when the script's pin changes.
$(HELM): scripts/install-helm.sh | $(VENV)/.uv
	scripts/install-helm.sh

chart: $(HELM) ## package the chart into $(DIST)/ (helm package), ready for `helm push` to an OCI registry
	$(HELM) package $(CHART_DIR) --destination $(DIST)

dist: | $(VENV)/.uv ## build the wheel and sdist into $(DIST)/ (pipx install $(DIST)/*.whl installs the CLI)
	$(BIN)/uv build --quiet --out-dir $(DIST) .

# The installs run at once (pip, apt-get, helm's download: mostly waiting on the network), then the lint beside one
# pytest run over every test, unit and chart, on every core; either failing fails the target.
test: ## install, then lint and run every test on every core (apt-get installs hey, wrk, valgrind, prometheus, kubectl if missing)
	@$(MAKE) --no-print-directory -j3 $(STAMP) $(HELM) tools
	@$(COMPILE)
	@{ $(LINT); } & lint=$$!; \
		$(PYTEST) --durations=25 $(PYTEST_ARGS); tests=$$?; \
		wait $$lint || { echo "make test: the lint failed" >&2; exit 1; }; exit $$tests

fuzz: $(STAMP) ## hypothesis, long profile: 20,000 examples per property (FUZZ_EXAMPLES=N to bound it)
	HYPOTHESIS_PROFILE=long $(if $(FUZZ_EXAMPLES),HYPOTHESIS_MAX_EXAMPLES=$(FUZZ_EXAMPLES)) \
		$(BIN)/python -m pytest tests/fuzz --timeout=0 --hypothesis-show-statistics $(PYTEST_ARGS)

# $(call apt_install,COMMANDS,PACKAGES): install the Debian PACKAGES (through sudo unless root) unless every one
# of COMMANDS is already on PATH.
apt_install = @for c in $(1); do command -v $$c >/dev/null || missing=1; done; [ -z "$$missing" ] || { \
	SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends $(2); }

# The commands each group of tests runs, and the Debian packages that bring them.
BENCH_COMMANDS := hey wrk valgrind
BENCH_PACKAGES := hey wrk valgrind
MONITORING_COMMANDS := promtool prometheus
MONITORING_PACKAGES := prometheus
KUBECTL_COMMANDS := kubectl
KUBECTL_PACKAGES := kubernetes-client

tools: ## install every command the tests run when missing: bench-, monitoring- and kubectl-tools in one apt-get
	$(call apt_install,$(BENCH_COMMANDS) $(MONITORING_COMMANDS) $(KUBECTL_COMMANDS),$(BENCH_PACKAGES) \
		$(MONITORING_PACKAGES) $(KUBECTL_PACKAGES))

bench-tools: ## install the load generators hey and wrk, and valgrind (Debian packages) when missing
	$(call apt_install,$(BENCH_COMMANDS),$(BENCH_PACKAGES))

monitoring-tools: ## install promtool and the Prometheus server (Debian package prometheus) when missing
	$(call apt_install,$(MONITORING_COMMANDS),$(MONITORING_PACKAGES))

kubectl-tools: ## install kubectl (Debian package kubernetes-client) when missing: a test runs `kubectl storage-affinity`
	$(call apt_install,$(KUBECTL_COMMANDS),$(KUBECTL_PACKAGES))

bench: $(STAMP) bench-tools ## measure the webhook against its stack's limit (about 11 minutes; not part of test)
	$(BIN)/python -m bench $(BENCH_ARGS)

soak: $(STAMP) bench-tools ## 5 minutes at a fixed rate while the cluster churns: memory and p99 must stay flat
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

clean: ## remove the venv, caches and development certificates
	rm -rf $(VENV) $(CERT_DIR) $(DIST) .tools .pytest_cache .mypy_cache .ruff_cache *.egg-info
