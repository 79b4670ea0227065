# mcp-mux developer commands. `make help` lists them.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin

export PATH := $(PATH):/usr/local/go/bin

.PHONY: help run test check bench sessionmem bench-tasks build soak shape

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-6s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## run the example: demo HTTP server + mcp-mux on http://127.0.0.1:8931/mcp
	./examples/run.sh

test: ## run the test suite (what CI runs)
	$(GO) test -race -timeout 25m ./...

check: ## gofmt check, go vet, then the test suite
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race -timeout 25m ./...

bench: ## measure what the mux adds to a tools/call
	$(GO) run ./bench/mcpbench

sessionmem: ## memory per idle 2025-11-25 session: mux RSS and Redis bytes (needs redis-server)
	$(GO) run ./bench/sessionmem

shape: ## the code's shape: lines per package, methods per type, cyclomatic complexity (targets in ARCHITECTURE.md)
	$(GO) run ./bench/shape

bench-tasks: ## measure the durable-task poller on Redis and bbolt (needs redis-server)
	$(GO) run ./bench/taskbench

build: ## static binary in bin/mcp-mux (as the Dockerfile builds it)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/mcp-mux ./cmd/mcp-mux

soak: ## 64 sessions for 10 minutes with restarts and reloads; checks for leaks
	$(GO) run ./bench/soak
