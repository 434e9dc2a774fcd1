# mcpvisor — `make run` runs the supervisor on the bundled example config;
# `make test` installs what the tests need and runs the whole suite.

GO        ?= go
BIN       := bin
DEPS      := .deps
NPM_DIR   := $(DEPS)/npm
EVERYTHING_VERSION := 2026.8.31
EVERYTHING := $(NPM_DIR)/node_modules/.bin/mcp-server-everything

.PHONY: all build run test test-go deps npm-deps lint fmt vet fuzz bench clean

all: build

build:
	$(GO) build -o $(BIN)/mcpvisor ./cmd/mcpvisor

run: build
	$(BIN)/mcpvisor supervise --config examples/demo.mcp.json

# deps installs everything the tests use: Go modules of the main module and
# of the nested test modules, and the npm packages (into $(NPM_DIR), which
# git ignores).
deps: npm-deps
	$(GO) mod download
	cd testdata/gosdkserver && $(GO) mod download
	cd bench/peers && $(GO) mod download

npm-deps: $(EVERYTHING)

$(EVERYTHING):
	mkdir -p $(NPM_DIR)
	cd $(NPM_DIR) && { [ -f package.json ] || npm init -y >/dev/null; } && \
		npm install --no-audit --no-fund --loglevel=error @modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)

test: deps vet
	MCPVISOR_SERVER_EVERYTHING=$(abspath $(EVERYTHING)) MCPVISOR_REQUIRE_INTEROP=1 \
		$(GO) test -race -count=1 -timeout 15m ./...
	cd bench/peers && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

fuzz:
	$(GO) test ./protocol -run '^$$' -fuzz FuzzDecode -fuzztime 30s

bench:
	cd bench/peers && $(GO) test -run '^$$' -bench . -benchtime 3s -count 3 .

clean:
	rm -rf $(BIN) $(DEPS)
