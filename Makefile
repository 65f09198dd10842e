# Two commands on a fresh machine with Python 3.11+ and make: `make run` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
# uv from PATH, else a private copy installed with pip into .tools/
UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
RUN := $(UV) run --frozen
# The venv's interpreter: the $(PYTHON) found on PATH; `make VENV_PYTHON=...` to choose another.
VENV_PYTHON ?= $(shell command -v $(PYTHON))
# `make bench` measures in a venv of its own (.venv-bench), on an optimised build of the same
# version when $(PYTHON) is a plain source build such as pyenv's (deploy/local/interpreter.py;
# `make bench BENCH_PYTHON=...` to choose): the figures are the engine's, not the build's.
BENCH_VENV := $(CURDIR)/.venv-bench
BENCH_PYTHON ?= $(shell $(PYTHON) deploy/local/interpreter.py)
BENCH_RUN := UV_PROJECT_ENVIRONMENT=$(BENCH_VENV) $(UV) run --frozen
SERVICES := webhook-hub scraper-manager commerce-content
PYTEST := $(RUN) pytest -p no:cacheprovider
# `make test`'s suites, longest first (see `test`).
SUITES := suite-e2e $(addprefix suite-,$(SERVICES)) suite-servicekit

.PHONY: help install run test test-fast test-unit test-e2e $(SUITES) lint check-deploy fmt migrate clean bench soak bench-log fuzz browser wrk nginx

help:
	@echo "make run      the whole stack on embedded Postgres and NATS (Ctrl-C stops it)"
	@echo "make test     lint, then every test"
	@echo "make test-fast every test that needs no server nor browser (pure decisions, parsers, schemas, templates), about a minute"
	@echo "make test-e2e the end-to-end suite alone (the stack as real processes)"
	@echo "make lint     ruff, ruff format --check, mypy --strict"
	@echo "make check-deploy  compose schema, kustomize overlays and ServiceMonitors validated, hadolint, Grafana dashboards, README's Secret and API-key commands"
	@echo "make fmt      format and auto-fix"
	@echo "make migrate  apply every service's migrations (DATABASE_URL or the dev defaults)"
	@echo "make fuzz     schemathesis with NUL and lone surrogates, FUZZ_EXAMPLES per operation (default 100), new inputs each run"
	@echo "make bench    benchmarks that print their figures (webhook delivery and HTTP ingest, crawling vs Scrapy, GraphQL vs REST, tracing overhead)"
	@echo "make soak     webhook-hub for 20 minutes at 2,000 events/s over HTTP, partitions created and dropped (SOAK_ARGS='--minutes 5')"
	@echo "make bench-log  webhook-hub's delivery log pages over HTTP with 50 million deliveries loaded (LOG_ARGS='--rows 5000000'; about 27 GB, 15 min)"
	@echo "make clean    remove the dev data (.data/) and caches"

$(CURDIR)/.tools/bin/uv:
	$(PYTHON) -m venv $(CURDIR)/.tools
	$(CURDIR)/.tools/bin/pip install --quiet uv

.venv/.synced: $(UV) uv.lock pyproject.toml libs/servicekit/pyproject.toml $(wildcard services/*/pyproject.toml) tests-e2e/pyproject.toml
	@# Bytecode compiled once here: otherwise the first imports of every suite, CLI and stack
	@# process, started side by side, compile the same files at once (a CLI took over 60 s).
	$(UV) sync --frozen --all-packages --compile-bytecode --python "$(VENV_PYTHON)"
	@touch $@

install: .venv/.synced

$(BENCH_VENV)/.synced: $(UV) uv.lock pyproject.toml libs/servicekit/pyproject.toml $(wildcard services/*/pyproject.toml) tests-e2e/pyproject.toml
	UV_PROJECT_ENVIRONMENT=$(BENCH_VENV) $(UV) sync --frozen --all-packages --compile-bytecode --python "$(BENCH_PYTHON)"
	@touch $@

run: install
	$(RUN) python deploy/local/stack.py

lint: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy libs/servicekit/src services/*/src services/webhook-hub/bench libs/servicekit/bench
	$(RUN) mypy services/commerce-content/bench
	@# Each service's tests are a package named `tests`, so each is checked from its own project.
	@for d in libs/servicekit $(addprefix services/,$(SERVICES)); do \
		(cd $$d && $(RUN) mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache tests) || exit 1; done
	(cd tests-e2e && $(RUN) mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache .)
	@# deploy/grafana, deploy/k8s and deploy/local: checkers beside their tests, which import them by name.
	(cd deploy/local && $(RUN) mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache .)
	(cd deploy/grafana && $(RUN) mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache .)
	(cd deploy/k8s && $(RUN) mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache .)

# Deployment files, checked without a cluster or a Docker engine: the Compose specification's
# schema (every profile), every kustomize overlay rendered and validated for the target
# Kubernetes version, its ServiceMonitors against the prometheus-operator CRD's schema
# (vendored under deploy/k8s/crds/; kubernetes-validate knows built-in kinds only), hadolint
# on the services' Dockerfile, the Grafana dashboards, and the README's Secret and API-key commands.
K8S_VERSION ?= 1.33.0
check-deploy: install
	$(RUN) check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml deploy/compose/tracing.yaml
	@for overlay in deploy/k8s/overlays/*/; do \
		rendered=$$(mktemp --suffix=.yaml) || exit 1; \
		$(RUN) kubectl kustomize $$overlay > $$rendered || exit 1; \
		$(RUN) kubernetes-validate --kubernetes-version $(K8S_VERSION) --strict --quiet --no-warn $$rendered || exit 1; \
		echo "$$overlay: $$(grep -c '^kind:' $$rendered) resources valid for Kubernetes $(K8S_VERSION)"; \
		monitors=$$(mktemp -d) || exit 1; \
		$(RUN) python deploy/k8s/servicemonitors.py extract $$rendered $$monitors || exit 1; \
		if compgen -G "$$monitors/*.json" > /dev/null; then \
			$(RUN) check-jsonschema --schemafile deploy/k8s/crds/servicemonitor-v1.schema.json $$monitors/*.json || exit 1; fi; \
		rm -rf $$rendered $$monitors; done
	$(RUN) hadolint deploy/Dockerfile
	@# Grafana dashboards: JSON with Grafana's keys, PromQL that parses and names only metrics
	@# the services register (read from their modules, not from a list); both checkers' tests.
	$(PYTEST) -q deploy/grafana deploy/k8s deploy/local
	$(RUN) python deploy/grafana/validate.py
	@# The README's commands that create each Secret and the first API keys, run with kubectl's
	@# client-side dry run and compared with what the overlays' pods read (deploy/k8s/operator_commands.py).
	$(RUN) python deploy/k8s/operator_commands.py

# One pair of embedded servers for the whole suite; each pytest run gets its own databases.
# The suites run side by side (TEST_JOBS at a time, longest first), each service's on its own
# throwaway PostgreSQL and NATS: run one after another they left a 2-core machine half idle.
# Each suite's output is printed whole when it ends. TEST_JOBS=1 runs them one by one.
TEST_JOBS ?= 3
test: lint check-deploy browser
	$(MAKE) --no-print-directory --keep-going -j$(TEST_JOBS) --output-sync=target $(SUITES)

suite-e2e: install
	$(PYTEST) tests-e2e
suite-servicekit: install browser
	$(RUN) python -m servicekit.embedded -- $(PYTEST) libs/servicekit/tests
$(addprefix suite-,$(SERVICES)): suite-%: install browser
	cd services/$* && $(RUN) python -m servicekit.embedded -- $(PYTEST) tests

# The fast loop: tests whose fixtures reach no server nor browser (servicekit's pytest plugin
# marks the others `server`), every suite side by side, no embedded server started.
FAST_SUITES := fast-servicekit $(addprefix fast-,$(SERVICES))
.PHONY: $(FAST_SUITES)
test-fast: install
	$(MAKE) --no-print-directory --keep-going -j4 --output-sync=target $(FAST_SUITES)
fast-servicekit: install
	cd libs/servicekit && $(PYTEST) -q -m "not server" tests
$(addprefix fast-,$(SERVICES)): fast-%: install
	cd services/$* && $(PYTEST) -q -m "not server" tests

# The whole stack as real processes (it starts its own servers), driven over HTTP and NATS.
test-e2e: install
	$(PYTEST) tests-e2e

# Browser tests drive Debian's chromium through Playwright (whose own browser download cannot
# work offline): installed here when missing (CI runs as root; elsewhere through sudo).
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

test-unit: install browser
	$(PYTEST) libs/servicekit/tests
	@for s in $(SERVICES); do (cd services/$$s && $(PYTEST) tests) || exit 1; done

# `make test` fuzzes each service's OpenAPI document with 3 examples per operation, always the
# same ones (the conformance tests); this runs the same test longer, with new inputs each run.
FUZZ_EXAMPLES ?= 100
fuzz: install
	@status=0; for s in $(SERVICES); do (cd services/$$s && FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_RANDOM=1 \
		$(PYTEST) tests/test_conformance.py -k openapi_fuzz) || status=1; done; \
	(cd services/commerce-content && FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_RANDOM=1 \
		$(PYTEST) tests/test_graphql_fuzz.py) || status=1; exit $$status

# Figures, not pass/fail: each benchmark starts its own servers on loopback and stops itself.
# wrk (Debian's package) drives the HTTP front door's benchmark: installed here when missing.
wrk:
	@command -v wrk > /dev/null || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq wrk; }

# The delivery bench's receiver: nginx answering from memory, so every machine measures the
# engine, not a Python receiver slower than it (bench/run.py starts its own, on loopback).
nginx:
	@test -x /usr/sbin/nginx || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nginx-light; }

bench: $(BENCH_VENV)/.synced wrk nginx
	$(BENCH_RUN) python services/webhook-hub/bench/run.py --workers 2
	$(BENCH_RUN) python services/webhook-hub/bench/ingest.py --processes 2
	@# End to end over HTTP (issue 31): batches at 5,000 and 10,000 events/s for a minute.
	$(BENCH_RUN) python services/webhook-hub/bench/soak.py --minutes 1 --window-minutes 1 \
		--warmup-seconds 10 --rate 5000 --workers 2 --p99-target-ms 250
	$(BENCH_RUN) python services/webhook-hub/bench/soak.py --minutes 1 --window-minutes 1 \
		--warmup-seconds 10 --rate 10000 --workers 2 --p99-target-ms 500
	$(BENCH_RUN) python services/webhook-hub/bench/live_streams.py
	@# The delivery controls (issue 32): a shared rate limit, CEL filters and transforms, order by key.
	$(BENCH_RUN) python services/webhook-hub/bench/rate_limit.py --seconds 60
	$(BENCH_RUN) python services/webhook-hub/bench/expressions.py
	$(BENCH_RUN) python services/webhook-hub/bench/ordered.py
	UV=$(UV) $(BENCH_RUN) python services/scraper-manager/bench/run.py
	$(BENCH_RUN) python services/commerce-content/bench/run.py
	$(BENCH_RUN) python services/commerce-content/bench/persisted_lookup.py
	$(BENCH_RUN) python services/commerce-content/bench/subscriptions.py
	$(BENCH_RUN) python libs/servicekit/bench/tracing_overhead.py

# Figures too: webhook-hub at a fixed rate over HTTP for many minutes (bench/soak.py), per
# window and against issue 31's soak targets. SOAK_ARGS passes options, e.g. --minutes 5.
SOAK_ARGS ?=
soak: $(BENCH_VENV)/.synced nginx
	$(BENCH_RUN) python services/webhook-hub/bench/soak.py $(SOAK_ARGS)

# The delivery log's pages with 50 million deliveries loaded (bench/delivery_log_at_scale.py):
# not in `bench`, as loading them takes most of half an hour and about 25 GB.
LOG_ARGS ?=
bench-log: $(BENCH_VENV)/.synced
	$(BENCH_RUN) python services/webhook-hub/bench/delivery_log_at_scale.py $(LOG_ARGS)

fmt: install
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

migrate: install
	@for s in $(SERVICES); do $(RUN) $$s migrate --create-database || exit 1; done

clean:
	rm -rf .data .mypy_cache .ruff_cache .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
