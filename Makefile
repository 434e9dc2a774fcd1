# mcpvisor — `make run` runs the gateway on the bundled example config;
# `make test` installs what the tests need and runs the whole suite.

GO        ?= go
BIN       := bin
DEPS      := .deps
NPM_DIR   := $(DEPS)/npm
EVERYTHING_VERSION := 2026.8.31
EVERYTHING := $(NPM_DIR)/node_modules/.bin/mcp-server-everything
# The official TypeScript SDK, whose client the gateway tests run.
TS_SDK_VERSION := 1.32.2
TS_SDK := $(NPM_DIR)/.sdk-$(TS_SDK_VERSION)
# The conformance suite needs Node >= 22; npm installs one next to it.
CONFORMANCE_DIR     := $(DEPS)/conformance
CONFORMANCE_VERSION := 0.1.16
CONFORMANCE         := $(CONFORMANCE_DIR)/node_modules/.bin/conformance
CONFORMANCE_RESULTS := $(DEPS)/conformance-results
# node-oidc-provider: the real authorization server of the OAuth tests
# (testdata/oidc/provider.mjs, run with the Node 22 above).
OIDC_DIR     := $(DEPS)/npm-oidc
OIDC_VERSION := 9.13.3
OIDC         := $(OIDC_DIR)/node_modules/oidc-provider/package.json
# The scenarios that must pass: all of them (testdata/conformance/baseline.yml,
# the expected failures, is empty).
CONFORMANCE_AUTH := metadata-default metadata-var1 metadata-var2 metadata-var3 basic-cimd \
	scope-from-www-authenticate scope-from-scopes-supported scope-omitted-when-undefined \
	scope-step-up scope-retry-limit token-endpoint-auth-basic token-endpoint-auth-post \
	token-endpoint-auth-none pre-registration 2025-03-26-oauth-metadata-backcompat \
	2025-03-26-oauth-endpoint-fallback resource-mismatch offline-access-scope \
	offline-access-not-supported client-credentials-jwt client-credentials-basic \
	cross-app-access-complete-flow
CONFORMANCE_REQUIRED := initialize tools_call elicitation-sep1034-client-defaults sse-retry \
	$(addprefix auth/,$(CONFORMANCE_AUTH))

.PHONY: all build run test test-go flake deps npm-deps lint fmt vet fuzz bench bench-peers conformance conformance-server clean

all: build

build:
	$(GO) build -o $(BIN)/mcpvisor ./cmd/mcpvisor

# run starts the gateway over the example config (Ctrl-C stops it).
RUN_LISTEN ?= 127.0.0.1:7979
run: build
	@echo "mcpvisor gateway over examples/demo.mcp.json"
	@echo "  MCP endpoint (Streamable HTTP): http://$(RUN_LISTEN)/mcp"
	@echo "    e.g. claude mcp add --transport http mcpvisor http://$(RUN_LISTEN)/mcp"
	@echo "  as a stdio server instead:      $(abspath $(BIN))/mcpvisor supervise --stdio --config $(abspath examples/demo.mcp.json)"
	@echo "  status: $(BIN)/mcpvisor status --url http://$(RUN_LISTEN)   (JSON: http://$(RUN_LISTEN)/status)"
	@echo "  metrics: http://$(RUN_LISTEN)/metrics   events (SSE): http://$(RUN_LISTEN)/events"
	$(BIN)/mcpvisor supervise --config examples/demo.mcp.json --listen $(RUN_LISTEN) --watch

# deps installs everything the tests use: Go modules of the main module and
# of the nested test modules, and the npm packages (into $(NPM_DIR), which
# git ignores).
deps: npm-deps
	$(GO) mod download
	cd testdata/gosdkserver && $(GO) mod download
	cd testdata/mcpgoserver && $(GO) mod download
	cd bench/peers && $(GO) mod download
	cd testdata/gosdkclient && $(GO) mod download

npm-deps: $(EVERYTHING) $(TS_SDK) $(CONFORMANCE) $(OIDC)

$(EVERYTHING):
	mkdir -p $(NPM_DIR)
	cd $(NPM_DIR) && { [ -f package.json ] || npm init -y >/dev/null; } && \
		npm install --no-audit --no-fund --loglevel=error @modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)

$(TS_SDK): $(EVERYTHING)
	cd $(NPM_DIR) && npm install --no-audit --no-fund --loglevel=error @modelcontextprotocol/sdk@$(TS_SDK_VERSION)
	touch $@

$(CONFORMANCE):
	mkdir -p $(CONFORMANCE_DIR)
	cd $(CONFORMANCE_DIR) && { [ -f package.json ] || npm init -y >/dev/null; } && \
		npm install --no-audit --no-fund --loglevel=error node@22 @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION)

$(OIDC):
	mkdir -p $(OIDC_DIR)
	cd $(OIDC_DIR) && { [ -f package.json ] || npm init -y >/dev/null; } && \
		npm install --no-audit --no-fund --loglevel=error oidc-provider@$(OIDC_VERSION)

# conformance runs the official suite (all scenarios, in parallel) against
# `mcpvisor conformance`, with the known failures as the baseline, then
# checks that the required scenarios really ran and passed.
conformance: build $(CONFORMANCE)
	rm -rf $(CONFORMANCE_RESULTS)
	PATH=$(abspath $(CONFORMANCE_DIR))/node_modules/.bin:$$PATH conformance client \
		--command "$(abspath $(BIN))/mcpvisor conformance" --suite all \
		--expected-failures testdata/conformance/baseline.yml -o $(CONFORMANCE_RESULTS) \
		> $(DEPS)/conformance-summary.txt || { cat $(DEPS)/conformance-summary.txt; exit 1; }
	tail -n 4 $(DEPS)/conformance-summary.txt
	$(CONFORMANCE_DIR)/node_modules/.bin/node testdata/conformance/check.mjs $(CONFORMANCE_RESULTS) $(CONFORMANCE_REQUIRED)

# conformance-server runs the suite's server scenarios against the gateway
# (mcpvisor supervise) with the mock server's conformance fixtures behind
# it; the scenarios it cannot pass yet are in the baseline's server list.
CONFORMANCE_SERVER_LISTEN ?= 127.0.0.1:17980
CONFORMANCE_SERVER_RESULTS := $(DEPS)/conformance-server-results
conformance-server: build $(CONFORMANCE)
	rm -rf $(CONFORMANCE_SERVER_RESULTS)
	@$(BIN)/mcpvisor supervise --config testdata/conformance/gateway.mcp.json --bare-names \
		--listen $(CONFORMANCE_SERVER_LISTEN) --log-level warn 2>$(DEPS)/conformance-gateway.log & pid=$$!; \
	trap 'kill -INT $$pid; wait $$pid' EXIT; \
	for i in $$(seq 100); do $(BIN)/mcpvisor status --url http://$(CONFORMANCE_SERVER_LISTEN) >/dev/null 2>&1 && break; sleep 0.1; done; \
	PATH=$(abspath $(CONFORMANCE_DIR))/node_modules/.bin:$$PATH conformance server \
		--url http://localhost:$(lastword $(subst :, ,$(CONFORMANCE_SERVER_LISTEN)))/mcp \
		--expected-failures testdata/conformance/baseline.yml -o $(CONFORMANCE_SERVER_RESULTS) \
		> $(DEPS)/conformance-server-summary.txt || { cat $(DEPS)/conformance-server-summary.txt; exit 1; }; \
	sed -n '/SUMMARY/,$$p' $(DEPS)/conformance-server-summary.txt

# The environment of the Go tests: the npm-installed peers they talk to
# (a missing one fails the tests rather than skipping them).
TEST_ENV = MCPVISOR_SERVER_EVERYTHING=$(abspath $(EVERYTHING)) MCPVISOR_REQUIRE_INTEROP=1 \
	MCPVISOR_OIDC_MODULES=$(abspath $(OIDC_DIR))/node_modules \
	MCPVISOR_NODE=$(abspath $(CONFORMANCE_DIR))/node_modules/.bin/node

# How long one run of a package's tests may take (go test -timeout, which
# applies to each test binary): about three times the slowest run measured
# under -race on a loaded 2-vCPU machine (docs/testing.md), so that a hang
# fails within minutes and prints every goroutine's stack. Three classes:
TIMEOUT_LONG   := 5m
TIMEOUT_MEDIUM := 2m
TIMEOUT_SHORT  := 1m
PKGS_LONG   := ./actors
PKGS_MEDIUM := . ./actors/session ./bench/mockserver ./cmd/mcpvisor ./cmd/mcpvisor/internal/gateway ./transports/stdio
MODULE      := github.com/mcpvisor/mcpvisor
PKGS_SHORT   = $(filter-out $(patsubst .%,$(MODULE)%,$(PKGS_LONG) $(PKGS_MEDIUM)),$(shell $(GO) list ./...))

test: deps vet conformance conformance-server test-go

# test-go runs the Go tests alone (what test runs after its other steps).
test-go:
	$(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_SHORT) $(PKGS_SHORT)
	$(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) $(PKGS_MEDIUM)
	$(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_LONG) $(PKGS_LONG)
	cd bench/peers && $(GO) vet ./... && $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) ./...
	cd testdata/gosdkclient && $(GO) vet ./... && $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) ./...

# flake runs the tests of every package (those of bench/peers and
# testdata/gosdkclient included) FLAKE_COUNT times in each of three modes,
# -race, -cover and -shuffle=on, one package at a time, and prints runs
# and failed runs per package (internal/flakerun, docs/testing.md); the
# output of a failed package is kept in $(DEPS)/flake. It takes hours on
# 2 vCPUs and is not part of test. FLAKE_PKG (a regexp) runs some only.
FLAKE_COUNT ?= 20
FLAKE_MODES ?= race,cover,shuffle
FLAKE_PKG   ?=
FLAKE_BUDGETS = mcpvisor/actors$$=$(TIMEOUT_LONG),(mcpvisor|/actors/session|/bench/mockserver|/cmd/mcpvisor|/gateway|/transports/stdio|/bench/peers|/gosdkclient)$$=$(TIMEOUT_MEDIUM)
flake: deps
	$(TEST_ENV) $(GO) run ./internal/flakerun -count $(FLAKE_COUNT) -modes $(FLAKE_MODES) -pkg '$(FLAKE_PKG)' \
		-budget $(TIMEOUT_SHORT) -budgets '$(FLAKE_BUDGETS)' -logs $(DEPS)/flake

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

fuzz:
	$(GO) test ./protocol -run '^$$' -fuzz FuzzDecode -fuzztime 30s
	$(GO) test ./transports/eventstream -run '^$$' -fuzz FuzzReader -fuzztime 30s
	$(GO) test ./oauth -run '^$$' -fuzz FuzzParseChallenges -fuzztime 30s

# bench runs the benchmark runner's quick profile (about three minutes on
# 2 vCPUs) through `mcpvisor bench`, into bench/results/latest (which git
# ignores). `bin/mcpvisor bench` without -quick runs every size; see
# `bin/mcpvisor bench -h`. bench-peers runs bench/peers' go test
# benchmarks (what `make bench` ran before the runner).
bench: build
	$(BIN)/mcpvisor bench -quick -out bench/results/latest

bench-peers:
	cd bench/peers && $(GO) test -run '^$$' -bench . -benchtime 3s -count 3 .

clean:
	rm -rf $(BIN) $(DEPS)
