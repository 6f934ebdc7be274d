# Toolwarden. `make` (or `make help`) lists the targets.
#
# Variables:
#   VERSION    version stamped into the binary (default: git describe, else "dev")
#   ARGS       extra arguments for `toolwarden serve` in `make run`
#   TESTFLAGS  extra flags for `go test` in `make test` (e.g. TESTFLAGS='-run TestLogin -v')
#   BENCH      benchmark regexp for `make bench` (default: all)
#   FUZZTIME   how long `make fuzz` runs each fuzz target (default: 1m)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
# Targets list their steps as prerequisites (run: setup-run build); keep them in order under -j.
.NOTPARALLEL:

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
ARGS ?=
TESTFLAGS ?=
BENCH ?= .
FUZZTIME ?= 1m
# The fuzz targets, as package:target (go test fuzzes one target at a time). Their seed
# inputs run as ordinary tests in `make test`.
FUZZ_TARGETS := ./handlers:FuzzPlanText ./services/schema:FuzzValidateArguments ./views/form:FuzzDecodeForm \
	./internal/textcheck:FuzzJSON ./services/planner:FuzzRules

BIN := bin/toolwarden

.PHONY: help setup-run setup-test generate build run test test-race lint vendor bench fuzz clean

help: ## Show this list of targets
	@echo "Usage: make <target> [VAR=value]"
	@echo
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup-run: ## Check Go and templ; install PostgreSQL if missing (apt-get, as root)
	@bash scripts/setup.sh run

setup-test: ## As setup-run, plus Chromium, Node.js and the npm packages, and a C compiler for -race
	@bash scripts/setup.sh test

generate: ## Generate Go code from templ templates (go tool templ generate)
	go tool templ generate

# The build also makes bin/pg-template, a migrated cluster a first start copies instead
# of running initdb and the migrations (docs/architecture.md, Performance (Start-up)); it is remade
# only when the migrations or PostgreSQL change. Without PostgreSQL installed (exit 3)
# the build goes on without it, and a first start runs initdb; any other failure of it
# fails the build.
build: generate ## Build bin/toolwarden and its cluster template bin/pg-template
	go build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/toolwarden
	@./$(BIN) pg-template || { rc=$$?; [ $$rc -eq 3 ] && echo "make: no cluster template without PostgreSQL: a first start runs initdb"; } || exit $$rc

run: setup-run build ## Build and start the server: bin/toolwarden serve (ARGS for extra flags)
	./$(BIN) serve $(ARGS)

# make test runs every package once, without the race detector, to stay within the 15
# minutes it should take on the 2-core machine (the detector about doubles the suite's
# time: web took 405-429 s with it and 194 s without, 2026-12-07). make test-race runs
# the same under the race detector (19-22 minutes there); CI (.ci/run) runs both.
# The two longest packages are named first, so that go test starts them first (each
# package runs once): started last, as ./... orders them, they ran on alone after the
# others had finished, with a core idle (921 s in all before, 668 s after, 2026-12-07).
TEST_PKGS = ./e2e ./web ./...
test: setup-test generate ## Run all tests: unit, database, MCP, browser (TESTFLAGS for extra flags)
	go test -count=1 -timeout 30m $(TESTFLAGS) $(TEST_PKGS)
	@# The go-sdk fork is a module of its own: its tests of Toolwarden's changes (third_party/go-sdk/TOOLWARDEN.md).
	cd third_party/go-sdk && go test -count=1 -timeout 5m ./mcp/

test-race: setup-test generate ## Run all tests under the race detector, as make test does (CI runs both)
	go test -race -count=1 -timeout 45m $(TESTFLAGS) $(TEST_PKGS)
	cd third_party/go-sdk && go test -race -count=1 -timeout 5m ./mcp/

lint: ## Check gofmt (non-generated files), go vet, and that templ's generated code is current
	@files=$$(find . \( -path ./node_modules -o -path ./.git -o -path ./data -o -path ./bin \) -prune \
		-o -name '*.go' ! -name '*_templ.go' -print | xargs -r grep -L '^// Code generated .* DO NOT EDIT\.$$' || true); \
	if [ -n "$$files" ]; then \
		bad=$$(gofmt -l $$files); \
		if [ -n "$$bad" ]; then echo "gofmt: these files need formatting (gofmt -w):" >&2; echo "$$bad" >&2; exit 1; fi; \
	fi
	go vet ./...
	@# Regenerate and compare checksums: works without git, and against the work tree as it is.
	@sums() { find . \( -path ./node_modules -o -path ./.git -o -path ./data -o -path ./bin \) -prune \
		-o -name '*_templ.go' -print | LC_ALL=C sort | xargs -r sha256sum; }; \
	before=$$(sums); \
	if ! out=$$(go tool templ generate 2>&1); then echo "$$out" >&2; exit 1; fi; \
	after=$$(sums); \
	if [ "$$before" != "$$after" ]; then \
		echo "templ: generated code was stale; regenerated now, commit these:" >&2; \
		grep -vxF -f <(echo "$$before") <(echo "$$after") | sed 's/^[0-9a-f]*  //' >&2; \
		exit 1; \
	fi

vendor: ## Copy the front-end libraries pinned in package.json into static/vendor/
	bash scripts/vendor.sh

# Benchmarks get a durable test cluster (fsync and synchronous_commit on, as `make run`;
# services/db/dbtest.Durable): TOOLWARDEN_TEST_DURABLE=off make bench compares with the fast one.
# One package at a time (-p 1), so that packages' benchmarks do not share the cores. The
# output goes to bin/bench.txt, from which internal/benchdoc writes docs/benchmarks.md (a
# subset updates only the rows of the targets it measured). TOOLWARDEN_BENCH_AUDIT_ROWS
# sizes the audit log of P6 (default 10,000,000: loading it takes about half an hour).
BENCH_CMD = go test -p 1 -run '^$$' -bench '$(BENCH)' -benchmem -count=1 -timeout 4h ./...
bench: ## Run the benchmarks and write docs/benchmarks.md (BENCH=regexp to pick some)
	@mkdir -p bin
	@echo "benchdoc-start: $$(date -u '+%Y-%m-%d %H:%M UTC')" > bin/bench.txt
	@echo "benchdoc-load-start: $$(cat /proc/loadavg 2>/dev/null)" >> bin/bench.txt
	@status=0; $(BENCH_CMD) 2>&1 | tee -a bin/bench.txt || status=$$?; \
	echo "benchdoc-load-end: $$(cat /proc/loadavg 2>/dev/null)" >> bin/bench.txt; \
	go run ./internal/benchdoc -in bin/bench.txt -out docs/benchmarks.md \
		-command "$(if $(filter .,$(BENCH)),make bench,BENCH='$(BENCH)' make bench): $(BENCH_CMD)"; \
	exit $$status

fuzz: ## Run each fuzz target for FUZZTIME (plan JSON, tool arguments, forms, text, prompts)
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz: $$name in $$pkg for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

clean: ## Remove build output (bin/)
	rm -rf bin
