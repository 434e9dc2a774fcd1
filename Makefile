# mcpvisor — `make run` runs the gateway on the bundled example config;
# `make test` installs what the tests need and runs the whole suite.

GO        ?= go
BIN       := bin
DEPS      := .deps
NPM_DIR   := $(DEPS)/npm
EVERYTHING_VERSION := 2026.8.31
EVERYTHING := $(NPM_DIR)/node_modules/.bin/mcp-server-everything
# An npm cache holding server-everything and its dependencies (no _npx
# install), from which the root package's TestNpxServerConfined runs
# `npx -y` offline on a copy: the tests reach nothing beyond loopback.
NPX_CACHE       := $(DEPS)/npx-cache-$(EVERYTHING_VERSION)
NPX_CACHE_READY := $(NPX_CACHE)/.prepared
# The official TypeScript SDK, whose client the gateway tests run.
TS_SDK_VERSION := 1.32.2
TS_SDK := $(NPM_DIR)/.sdk-$(TS_SDK_VERSION)
# The conformance suite needs Node >= 22; npm installs one next to it.
CONFORMANCE_VERSION := 0.2.0-alpha.12
CONFORMANCE_DIR     := $(DEPS)/conformance-$(CONFORMANCE_VERSION)
CONFORMANCE         := $(CONFORMANCE_DIR)/node_modules/.bin/conformance
CONFORMANCE_RESULTS := $(DEPS)/conformance-results
# node-oidc-provider: the real authorization server of the OAuth tests
# (testdata/oidc/provider.mjs, run with the Node 22 above).
OIDC_DIR     := $(DEPS)/npm-oidc
OIDC_VERSION := 9.13.3
OIDC         := $(OIDC_DIR)/node_modules/oidc-provider/package.json
# The Claude Agent SDK, whose sdk-tools.d.ts declares the shapes the
# management tools follow (management's TestManagementToolShapes). 0.2.76
# still declares the subscribing tools; later releases dropped them.
AGENT_SDK_VERSION := 0.2.76
AGENT_SDK_DIR     := $(DEPS)/npm-agentsdk-$(AGENT_SDK_VERSION)
AGENT_SDK_TOOLS   := $(AGENT_SDK_DIR)/node_modules/@anthropic-ai/claude-agent-sdk/sdk-tools.d.ts
# The MCP Inspector's CLI and Claude Code, which the interop tests of
# cmd/mcpvisor drive against the gateway (Claude Code in a network
# namespace, its model a stand-in on loopback).
INSPECTOR_VERSION := 2.12.0
INSPECTOR_DIR     := $(DEPS)/npm-inspector-$(INSPECTOR_VERSION)
INSPECTOR         := $(INSPECTOR_DIR)/node_modules/.bin/mcp-inspector
CLAUDE_VERSION    := 2.1.332
CLAUDE_DIR        := $(DEPS)/npm-claude-$(CLAUDE_VERSION)
CLAUDE            := $(CLAUDE_DIR)/node_modules/.bin/claude
# The scenarios that must pass: every client scenario of the pinned suite
# (testdata/conformance/baseline.yml, the expected failures, is empty);
# check.mjs asserts that each ran and passed. sep-2322-client-request-state
# needs multi-round-trip requests (SEP-2322, the gateway half of issue 27).
CONFORMANCE_AUTH := metadata-default metadata-var1 metadata-var2 metadata-var3 basic-cimd \
	scope-from-www-authenticate scope-from-scopes-supported scope-omitted-when-undefined \
	scope-step-up scope-retry-limit token-endpoint-auth-basic token-endpoint-auth-post \
	token-endpoint-auth-none pre-registration 2025-03-26-oauth-metadata-backcompat \
	2025-03-26-oauth-endpoint-fallback resource-mismatch offline-access-scope \
	offline-access-not-supported authorization-server-migration iss-supported \
	iss-not-advertised iss-supported-missing iss-wrong-issuer iss-unexpected iss-normalized \
	metadata-issuer-mismatch client-credentials-jwt client-credentials-basic \
	enterprise-managed-authorization dpop dpop-nonce wif-jwt-bearer
CONFORMANCE_REQUIRED := initialize tools_call elicitation-sep1034-client-defaults sse-retry \
	request-metadata sep-2322-client-request-state http-standard-headers http-custom-headers \
	http-invalid-tool-headers json-schema-ref-no-deref json-schema-2020-12-preservation \
	sep-2640-client-no-prefetch sep-2640-client-verify-digest sep-2640-client-verify-size \
	sep-2640-client-verify-frontmatter $(addprefix auth/,$(CONFORMANCE_AUTH))

.PHONY: all build run cluster cluster-demo test test-lanes-run test-lanes-build test-compile test-rest test-go test-run test-build test-nested vet-nested test-nested-run test-nobody go-deps apt-deps test-etcd etcd-deps flake deps npm-deps os-deps browser-deps sandbox-deps lint fmt vet cross fuzz bench bench-peers conformance conformance-server clean

all: build

build:
	$(GO) build -o $(BIN)/mcpvisor ./cmd/mcpvisor

# cluster-demo starts three `supervise --cluster` members and one mock
# serving 12 remote servers on this machine (examples/cluster/run.sh;
# docs/cluster.md). Ctrl-C stops them.
cluster-demo: build
	BIN=$(BIN)/mcpvisor sh examples/cluster/run.sh

# cluster is cluster-demo's short name.
cluster: cluster-demo

# run starts the gateway over the example config (Ctrl-C stops it).
RUN_LISTEN ?= 127.0.0.1:7979
run: build
	@echo "mcpvisor gateway over examples/demo.mcp.json"
	@echo "  dashboard: http://$(RUN_LISTEN)/   (live servers, tools, events, channels; works offline)"
	@echo "  MCP endpoint (Streamable HTTP): http://$(RUN_LISTEN)/mcp"
	@echo "    e.g. claude mcp add --transport http mcpvisor http://$(RUN_LISTEN)/mcp"
	@echo "  as a stdio server instead:      $(abspath $(BIN))/mcpvisor supervise --stdio --config $(abspath examples/demo.mcp.json)"
	@echo "  status: $(BIN)/mcpvisor status --url http://$(RUN_LISTEN)   (JSON: http://$(RUN_LISTEN)/status)"
	@echo "  metrics: http://$(RUN_LISTEN)/metrics   events (SSE): http://$(RUN_LISTEN)/events"
	$(BIN)/mcpvisor supervise --config examples/demo.mcp.json --listen $(RUN_LISTEN) --watch

# deps installs everything the tests use: Go modules of the main module and
# of the nested test modules, and the npm packages (into $(NPM_DIR), which
# git ignores).
deps: npm-deps os-deps browser-deps sandbox-deps etcd-deps go-deps

go-deps:
	$(GO) mod download
	cd testdata/gosdkserver && $(GO) mod download
	cd testdata/mcpgoserver && $(GO) mod download
	cd bench/peers && $(GO) mod download
	cd testdata/gosdkclient && $(GO) mod download

npm-deps: $(EVERYTHING) $(NPX_CACHE_READY) $(TS_SDK) $(CONFORMANCE) $(OIDC) $(AGENT_SDK_TOOLS) $(INSPECTOR) $(CLAUDE)

# os-deps installs the services the secret-store tests run against
# (oauth/secretstore): Debian's gnome-keyring (the Secret Service) started
# under dbus-run-session, and keyutils for the kernel keyring. apt-get
# runs only when one is missing (root or sudo needed then); elsewhere the
# tests say what is missing.
OS_DEPS_BIN := gnome-keyring-daemon dbus-run-session dbus-send keyctl
os-deps:
	@missing=; for b in $(OS_DEPS_BIN); do command -v $$b >/dev/null 2>&1 || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
		if ! command -v apt-get >/dev/null 2>&1; then echo "os-deps: missing$$missing, and no apt-get to install them"; exit 1; fi; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		echo "os-deps: installing gnome-keyring dbus keyutils (missing:$$missing)"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends \
			gnome-keyring dbus dbus-daemon keyutils >/dev/null; \
	fi

# browser-deps installs Debian's chromium for the dashboard's browser tests
# (gateway/dashboard_browser_test.go, driven by
# chromedp) when no chromium is on PATH.
browser-deps:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
		echo "installing chromium (apt)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# sandbox-deps installs bubblewrap (bwrap), one of the two Linux sandbox
# mechanisms the tests run (the other, Landlock, is the kernel's), through
# apt where it is missing; as root, or with sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
sandbox-deps:
	@if [ "$$(uname -s)" = Linux ] && ! command -v bwrap >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1; then \
			$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq bubblewrap; \
		else echo "bwrap (bubblewrap) is missing and there is no apt-get: install it to run the sandbox tests"; exit 1; fi; \
	fi
	@# util-linux's prlimit starts confined servers without the exec stage
	@# (without it the tests of that path skip, and the exec stage is used).
	@if [ "$$(uname -s)" = Linux ] && [ ! -x /usr/bin/prlimit ] && [ ! -x /bin/prlimit ] && command -v apt-get >/dev/null 2>&1; then \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq util-linux; \
	fi

$(EVERYTHING):
	mkdir -p $(NPM_DIR)
	cd $(NPM_DIR) && { [ -f package.json ] || npm init -y >/dev/null; } && \
		npm install --no-audit --no-fund --loglevel=error @modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)

# npm exec fills the cache with the packuments and tarballs npx -y needs
# (run in an empty directory, so that no local install answers it), then
# the install it made under _npx and its logs are removed: offline, npx
# installs from the cache as it would from the registry.
$(NPX_CACHE_READY):
	rm -rf $(NPX_CACHE) $(NPX_CACHE).tmp && mkdir -p $(NPX_CACHE).tmp/cwd
	cd $(NPX_CACHE).tmp/cwd && npm_config_cache=$(abspath $(NPX_CACHE)).tmp/cache npm exec --yes --no-audit --no-fund \
		--loglevel=error --package=@modelcontextprotocol/server-everything@$(EVERYTHING_VERSION) -- node -e 0
	rm -rf $(NPX_CACHE).tmp/cache/_npx $(NPX_CACHE).tmp/cache/_logs
	mv $(NPX_CACHE).tmp/cache $(NPX_CACHE) && rm -rf $(NPX_CACHE).tmp
	touch $@

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

$(INSPECTOR):
	mkdir -p $(INSPECTOR_DIR)
	cd $(INSPECTOR_DIR) && { [ -f package.json ] || npm init -y >/dev/null; } && \
		npm install --no-audit --no-fund --loglevel=error @modelcontextprotocol/inspector@$(INSPECTOR_VERSION)

$(CLAUDE):
	mkdir -p $(CLAUDE_DIR)
	cd $(CLAUDE_DIR) && { [ -f package.json ] || npm init -y >/dev/null; } && \
		npm install --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@$(CLAUDE_VERSION)

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
# it, three times: the default (active) suite, --suite all, and the
# requirement set frozen for 2026-07-28 (--requirements, run at that
# revision's wire version). The expected failures' server list is empty;
# check-server.mjs then fails any scenario that recorded no check, no
# SUCCESS, or a FAILURE or WARNING (the runner passes a scenario with no
# checks). CONFORMANCE_SERVER_UNEXERCISED names the scenarios the suite
# itself does not test yet (they report only INFO or SKIPPED whatever the
# server does).
CONFORMANCE_SERVER_LISTEN ?= 127.0.0.1:17980
CONFORMANCE_SERVER_RESULTS := $(DEPS)/conformance-server-results
CONFORMANCE_SERVER_RUNS := active:--suite=active all:--suite=all 2026-07-28:--requirements=2026-07-28
CONFORMANCE_SERVER_UNEXERCISED := tasks-status-notifications
conformance-server: build $(CONFORMANCE)
	rm -rf $(CONFORMANCE_SERVER_RESULTS) $(DEPS)/conformance-state
	@$(BIN)/mcpvisor supervise --config testdata/conformance/gateway.mcp.json --bare-names --state-dir $(DEPS)/conformance-state \
		--listen $(CONFORMANCE_SERVER_LISTEN) --sse-poll-after 500ms --log-level warn 2>$(DEPS)/conformance-gateway.log & pid=$$!; \
	trap 'kill -INT $$pid; wait $$pid' EXIT; \
	for i in $$(seq 100); do $(BIN)/mcpvisor status --url http://$(CONFORMANCE_SERVER_LISTEN) >/dev/null 2>&1 && break; sleep 0.1; done; \
	for run in $(CONFORMANCE_SERVER_RUNS); do \
		name=$${run%%:*}; args=$$(echo $${run#*:} | tr = ' '); \
		echo "conformance server $$args"; \
		PATH=$(abspath $(CONFORMANCE_DIR))/node_modules/.bin:$$PATH conformance server $$args \
			--url http://localhost:$(lastword $(subst :, ,$(CONFORMANCE_SERVER_LISTEN)))/mcp \
			--expected-failures testdata/conformance/baseline.yml -o $(CONFORMANCE_SERVER_RESULTS)/$$name \
			> $(DEPS)/conformance-server-$$name.txt || { cat $(DEPS)/conformance-server-$$name.txt; exit 1; }; \
		grep -E '^Total:' $(DEPS)/conformance-server-$$name.txt; \
		$(CONFORMANCE_DIR)/node_modules/.bin/node testdata/conformance/check-server.mjs \
			$(CONFORMANCE_SERVER_RESULTS)/$$name $(CONFORMANCE_SERVER_UNEXERCISED) || exit 1; \
	done

$(AGENT_SDK_TOOLS):
	mkdir -p $(AGENT_SDK_DIR)
	cd $(AGENT_SDK_DIR) && { [ -f package.json ] || npm init -y >/dev/null; } && \
		npm install --no-audit --no-fund --loglevel=error --omit=optional --ignore-scripts @anthropic-ai/claude-agent-sdk@$(AGENT_SDK_VERSION)

# The environment of the Go tests: the npm-installed peers they talk to
# (a missing one fails the tests rather than skipping them), and
# GORACE=atexit_sleep_ms=0: a race-enabled binary otherwise sleeps 1 s as
# it exits while goroutines remain, and every test binary did (about 60
# in make test, one after another in each lane). The tests already set it
# for the race-enabled binaries and servers they start; a race is still
# reported by the test during which it happens.
TEST_ENV = GORACE=atexit_sleep_ms=0 MCPVISOR_SERVER_EVERYTHING=$(abspath $(EVERYTHING)) MCPVISOR_NPX_CACHE=$(abspath $(NPX_CACHE)) MCPVISOR_REQUIRE_INTEROP=1 MCPVISOR_REQUIRE_KEYRING=1 MCPVISOR_REQUIRE_BROWSER=1 \
	MCPVISOR_REQUIRE_ETCD=1 \
	MCPVISOR_OIDC_MODULES=$(abspath $(OIDC_DIR))/node_modules \
	MCPVISOR_AGENT_SDK_TOOLS=$(abspath $(AGENT_SDK_TOOLS)) \
	MCPVISOR_NODE=$(abspath $(CONFORMANCE_DIR))/node_modules/.bin/node \
	MCPVISOR_INSPECTOR=$(abspath $(INSPECTOR)) MCPVISOR_CLAUDE_CODE=$(abspath $(CLAUDE))

# How long one run of a package's tests may take (go test -timeout, which
# applies to each test binary): about three times the slowest run measured
# under -race on a loaded 2-vCPU machine (docs/testing.md), so that a hang
# fails within minutes and prints every goroutine's stack (a wait inside a
# test fails sooner: internal/testwait bounds each). make flake budgets
# each package by these classes; test-go runs every package in one go test
# (both cores busy to the end), whose one -timeout is the longest class's.
TIMEOUT_LONGEST := 15m
TIMEOUT_LONG    := 7m
TIMEOUT_MEDIUM  := 5m
TIMEOUT_SHORT   := 1m
MODULE       := github.com/mcpvisor/mcpvisor

# The order in which test-go starts the packages' tests: longest first
# (seconds a run under -race: docs/testing.md), so that the short packages fill the
# gaps at the end and neither core waits for a last long package. One
# variable per group; a directory that does not exist (a package that
# moved) is ignored, and a package no group names runs after them, in
# `go list` order: these lists only order, they select nothing.
PKGS_LONGEST := . ./cmd/mcpvisor ./cluster
PKGS_LONG    := ./gateway ./gateway/dashboard
PKGS_MEDIUM  := ./bench/cluster ./cluster/etcdstore ./transports/stdio ./internal/session ./bench/mockserver
PKGS_ORDER    = $(patsubst .%,$(MODULE)%,$(foreach d,$(PKGS_LONGEST) $(PKGS_LONG) $(PKGS_MEDIUM),$(if $(wildcard $(d)/*_test.go),$(d))))
PKGS_TEST     = $(PKGS_ORDER) $(filter-out $(PKGS_ORDER),$(shell $(GO) list ./...))

# test installs what the tests need (deps' npm installs and Go downloads
# run at once, beside its apt installs, one at a time: apt-get holds a
# lock), builds the binary, then runs two lanes at once:
# - test-lanes-run, the steps that run programs, one after another at the
#   usual priority: the conformance suite's client scenarios (alone among
#   the running steps: they run all at once, and the client's 20 s
#   deadline per scenario did not hold beside the Go tests on 2 cores, 62
#   of them timed out there), test-run (conformance-server, the nested
#   modules' tests, test-nobody), then test-go, whose go test keeps both
#   cores busy with packages' tests;
# - test-lanes-build, the steps that only compile (test-build: gofmt,
#   vet, cross), at the lowest CPU priority (BATCH): they take only the
#   CPU the running steps leave idle (a test waiting on a process, a
#   timer, a peer), so they load the cores no more than the running steps
#   alone do. Beside test-go at the usual priority, vet and cross loaded
#   the cores enough that timing-sensitive tests failed in 3 rehearsals
#   of 3; one after the other, the lanes took 15 min.
# Their output interleaves as it comes (go test prints a package's whole
# output when it ends); a failure of any lane fails test.
test:
	$(MAKE) --no-print-directory -j4 npm-deps go-deps apt-deps
	$(MAKE) --no-print-directory build
	$(MAKE) --no-print-directory -j2 test-lanes-run test-lanes-build

# BATCH runs a command at the lowest CPU priority: SCHED_IDLE (chrt, of
# util-linux) where the kernel has it, else nice 19. Its children inherit it.
BATCH := $(shell if chrt --idle 0 true >/dev/null 2>&1; then echo chrt --idle 0; else echo nice -n 19; fi)

test-lanes-run:
	$(MAKE) --no-print-directory conformance
	$(MAKE) --no-print-directory test-run
	$(MAKE) --no-print-directory test-go

test-lanes-build:
	$(BATCH) $(MAKE) --no-print-directory test-compile
	$(BATCH) $(MAKE) --no-print-directory test-build

# test-compile compiles every package of the main module and its tests as
# test-go and test-nobody will (-race), without linking or running them
# (go list -export): the compiled packages land in the Go build cache,
# and those go tests then only link. In make test it runs first in the
# build lane, while conformance and test-run leave CPU idle; a compile
# error is reported by vet and test-go, not here.
test-compile:
	$(GO) list -e -export -test -race -deps -f '{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}' ./... >/dev/null

# test-rest: the steps of test other than conformance and test-go, one
# after another.
test-rest:
	$(MAKE) --no-print-directory test-run
	$(MAKE) --no-print-directory test-build

apt-deps:
	$(MAKE) --no-print-directory os-deps
	$(MAKE) --no-print-directory browser-deps
	$(MAKE) --no-print-directory sandbox-deps
	$(MAKE) --no-print-directory etcd-deps

# test-run: the steps of test that run programs other than conformance
# and test-go: conformance-server (mostly waiting on its peer), then the
# nested modules' tests beside test-nobody (-j2: about one core and two
# thirds of one; one after the other they kept test-go waiting about
# 70 s longer, while the cores they left idle went to the build lane).
test-run:
	$(MAKE) --no-print-directory conformance-server
	$(MAKE) --no-print-directory -j2 test-nested-run test-nobody

# test-build: the steps of test that only compile, one after another.
test-build:
	$(MAKE) --no-print-directory vet
	$(MAKE) --no-print-directory vet-nested
	$(MAKE) --no-print-directory cross

# test-nobody runs the tests whose paths depend on privilege again as the
# user nobody (.ci/as-nobody, go test -exec), where make runs as root, as
# CI does: test-go ran them as root (a writable cgroup, bubblewrap without
# a user namespace, capabilities to drop, a tmpfs to mount), this runs the
# unprivileged side. PKGS_NOBODY run whole; of the root package, the
# sandbox tests (NOBODY_ROOT_RUN), with the probe server built here
# (as nobody, go build has no module cache to read). Under another user
# test-go already ran the unprivileged side, and the tests that need root
# skipped, saying so (docs/testing.md lists them).
PKGS_NOBODY    := ./transports/stdio ./transports/stdio/reaper ./transports/stdio/sandbox ./transports/stdio/sandbox/confine
NOBODY_ROOT_RUN := TestSandbox|TestRequireSandbox|TestTrustSandboxRunsConfined
test-nobody:
	@if [ "$$(uname -s)" != Linux ]; then echo "test-nobody: the privilege-dependent tests are Linux's"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "test-nobody: make runs as $$(id -un), not root: the tests ran unprivileged, and those that need root skipped"; exit 0; fi; \
	probe=$$(mktemp -d /tmp/mcpvisor-probe.XXXXXX) && trap 'rm -rf "$$probe"' EXIT && chmod 755 "$$probe" && \
	$(GO) build -o "$$probe/sandbox-probe" ./transports/stdio/sandbox/sandboxtest/probe && \
	$(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) -exec $(abspath .ci/as-nobody) $(PKGS_NOBODY) && \
	$(TEST_ENV) MCPVISOR_TEST_PROBE="$$probe/sandbox-probe" $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) \
		-exec $(abspath .ci/as-nobody) -run '$(NOBODY_ROOT_RUN)' .

# test-go runs the main module's Go tests alone: one go test over every
# package, longest first (PKGS_ORDER). It leaves out (-skip) the twins
# that, run as root, run a privilege-dependent test again as nobody from
# inside the run (stdiotest.RunUnprivileged): test-nobody runs those tests
# as nobody already, whole packages and all; and where it does not (not
# root, not Linux) the twins skip anyway. Each test so runs once as root
# and once as nobody (docs/testing.md).
SKIP_TWINS := ^(TestSandboxProbesUnprivileged|TestCloseEndsDetachedDescendantsUnprivileged)$$
test-go:
	$(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_LONGEST) -skip '$(SKIP_TWINS)' $(PKGS_TEST)

# test-nested vets the nested modules (the test peers run on the host
# only; vet-nested) and runs the tests of those that have some
# (test-nested-run). make test runs the two halves in its two lanes.
test-nested:
	$(MAKE) --no-print-directory vet-nested
	$(MAKE) --no-print-directory test-nested-run

vet-nested:
	cd testdata/gosdkserver && $(GO) vet ./...
	cd testdata/mcpgoserver && $(GO) vet ./...
	cd bench/peers && $(GO) vet ./...
	cd testdata/gosdkclient && $(GO) vet ./...

test-nested-run:
	cd bench/peers && $(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) ./...
	cd testdata/gosdkclient && $(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) ./...

# test-etcd runs only the tests against a real etcd (the shared OAuth
# token store and session store of package cluster/etcdstore, the refresh of two
# members sharing a token through it, and gateway replicas keeping their
# sessions in it); make test runs them too, with the rest (deps installs
# Debian's etcd-server where etcd is missing, and TEST_ENV makes a missing
# etcd fail them rather than skip). Each test starts its own etcd on
# 127.0.0.1 ports it picks.
test-etcd: etcd-deps npm-deps
	MCPVISOR_REQUIRE_ETCD=1 $(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) ./cluster/etcdstore/
	MCPVISOR_REQUIRE_ETCD=1 $(TEST_ENV) $(GO) test -race -count=1 -timeout $(TIMEOUT_MEDIUM) -run 'Etcd' ./cmd/mcpvisor/

etcd-deps:
	@command -v etcd >/dev/null 2>&1 || { \
		command -v apt-get >/dev/null 2>&1 || { echo "etcd is missing, and there is no apt-get to install it"; exit 1; }; \
		echo "installing etcd-server (apt)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends etcd-server >/dev/null; }

# flake runs the tests of every package (those of bench/peers and
# testdata/gosdkclient included) FLAKE_COUNT times in each of three modes,
# -race, -cover and -shuffle=on, one package at a time, and prints runs
# and failed runs per package (internal/flakerun, docs/testing.md); the
# output of a failed package is kept in $(DEPS)/flake. It takes hours on
# 2 vCPUs and is not part of test. FLAKE_PKG (a regexp) runs some only.
FLAKE_COUNT ?= 20
FLAKE_MODES ?= race,cover,shuffle
FLAKE_PKG   ?=
FLAKE_BUDGETS = mcpvisor/actors$$=$(TIMEOUT_LONGEST),(mcpvisor|/cmd/mcpvisor|/gateway|/gateway/dashboard)$$=$(TIMEOUT_LONG),(/session|/bench/mockserver|/transports/stdio|/bench/peers|/gosdkclient)$$=$(TIMEOUT_MEDIUM)
flake: deps
	$(TEST_ENV) $(GO) run ./internal/flakerun -count $(FLAKE_COUNT) -modes $(FLAKE_MODES) -pkg '$(FLAKE_PKG)' \
		-budget $(TIMEOUT_SHORT) -budgets '$(FLAKE_BUDGETS)' -logs $(DEPS)/flake

# cross checks that every package of the main module compiles for the six
# targets the project supports, and vets it, tests included, once per OS:
# the host's own by vet, the two others at amd64 here (no file of the
# module depends on the architecture: no _amd64/_arm64 file, no arch
# build tag, so a second vet per architecture would check the same files
# again). A target that is vetted is not also built: vet type-checks every
# package of the module, tests included, and compiles each package another
# imports, so a build would only add the compile of the main packages.
# The host's own target is not built either (vet above type-checks it,
# and test-go compiles every package for it; linux/arm64 builds the
# CGO_ENABLED=0 Linux file set). The builds that remain compile the
# module's packages without optimization (-gcflags '-N -l', the command
# line's packages only, so cached dependencies stay valid): they check that
# the code compiles, and discard what it compiles into. Of the nested
# modules, the test peers run on the host only (test-nested vets them
# there); bench/peers, which is Unix only (getrusage, /proc), is also
# vetted for darwin/amd64. A row per module and target; any failure fails
# the target after the table.
CROSS_TARGETS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
CROSS_HOST     = $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)
CROSS_VET      = $(filter-out $(shell $(GO) env GOOS)/%,linux/amd64 darwin/amd64 windows/amd64)
CROSS_NESTED  := bench/peers:darwin/amd64
cross:
	@fail=0; for row in $(addprefix .:,$(CROSS_TARGETS)) $(CROSS_NESTED); do \
		m=$${row%%:*}; t=$${row#*:}; os=$${t%/*}; arch=$${t#*/}; \
		if [ $$m = . ] && [ $$t = $(CROSS_HOST) ]; then printf '%-22s %-14s (the host: vet and test-go)\n' $$m $$t; continue; fi; \
		if [ $$m != . ] || echo " $(CROSS_VET) " | grep -q " $$t "; then what=vet; \
			(cd $$m && GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) vet ./... ) >$(CROSS_LOG) 2>&1 || { what="vet FAIL"; cat $(CROSS_LOG); fail=1; }; \
		else what=build; \
			(cd $$m && GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -gcflags='-N -l' -o /dev/null ./... ) >$(CROSS_LOG) 2>&1 || { what="build FAIL"; cat $(CROSS_LOG); fail=1; }; fi; \
		printf '%-22s %-14s %s\n' $$m $$t "$$what"; \
	done; rm -f $(CROSS_LOG); exit $$fail
CROSS_LOG = $(or $(TMPDIR),/tmp)/mcpvisor-cross.$$$$.log

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# fuzz runs every fuzz target of the main module for FUZZTIME each (30s;
# the closing notes' runs used 10m), one at a time with one worker
# (FUZZ_PARALLEL), and fails on a crasher. Go 1.26's coordinator may end a
# target that found nothing with "context deadline exceeded" at the
# fuzztime boundary (golang/go#75804, fixed in Go 1.27): such a run is
# reported and not counted as a failure when it wrote no new input under
# testdata/fuzz. New interesting inputs stay in the Go build cache
# (`go env GOCACHE`/fuzz); the committed corpus is testdata/fuzz of each package.
# FUZZ_TIMEOUT is the test binary's -timeout: it must exceed FUZZTIME plus
# the run of the seed corpus (go test's default 10m would end a 10m run).
FUZZTIME ?= 30s
FUZZ_TIMEOUT ?= 30m
FUZZ_PARALLEL ?= 1
fuzz:
	@fail=0; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^./\.deps' | sort); do \
		pkg=./$$(dirname $${f#./}); \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			before=$$(ls $$pkg/testdata/fuzz/$$t 2>/dev/null | wc -l); \
			echo "== $$pkg $$t"; \
			if $(GO) test $$pkg -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) -parallel $(FUZZ_PARALLEL) >$(DEPS)/fuzz.log 2>&1; then \
				grep -E '^fuzz: elapsed' $(DEPS)/fuzz.log | tail -1; \
			elif [ "$$(ls $$pkg/testdata/fuzz/$$t 2>/dev/null | wc -l)" = "$$before" ] && grep -q 'context deadline exceeded' $(DEPS)/fuzz.log; then \
				grep -E '^fuzz: elapsed' $(DEPS)/fuzz.log | tail -1; echo "   (ended by golang/go#75804 at the fuzztime boundary; no crasher)"; \
			else cat $(DEPS)/fuzz.log; fail=1; fi; \
		done; \
	done; exit $$fail

# bench runs the benchmark runner's quick profile (about three minutes on
# 2 vCPUs) through `mcpvisor bench`, into bench/results/latest (which git
# ignores). `bin/mcpvisor bench` without -quick runs every size; see
# `bin/mcpvisor bench -h`. bench-peers runs bench/peers' go test
# benchmarks (what `make bench` ran before the runner).
bench: build
	$(BIN)/mcpvisor bench -quick -out bench/results/latest

bench-peers:
	cd bench/peers && $(GO) test -run '^$$' -bench . -benchtime 3s -count 3 .


# proto regenerates the protobuf envelopes that cross cluster members
# (cluster/internal/wire/wire.proto); the generated file is committed, so this is
# not part of `make test`. Needs protoc (apt-get install -y protobuf-compiler).
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO := $(DEPS)/bin/protoc-gen-go
$(PROTOC_GEN_GO):
	GOBIN=$(abspath $(DEPS)/bin) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

.PHONY: proto
proto: $(PROTOC_GEN_GO)
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler" >&2; exit 1; }
	PATH=$(abspath $(DEPS)/bin):$$PATH protoc --go_out=. --go_opt=paths=source_relative cluster/internal/wire/wire.proto

clean:
	rm -rf $(BIN) $(DEPS)
