# Horizon RunMap. `make help` lists the targets.
GO      ?= go
BIN     := bin
PKGS    := ./...

.PHONY: help setup build run test bench oracle-inputs clean

help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

setup: ## fetch Go modules (Go itself must be installed)
	$(GO) mod download

build: ## build the CLIs into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

run: ## the main job on the embedded default (tiny synthetic OLMoE on the CPU)
	$(GO) run ./cmd/horizon-bench generate --prompt "The quick brown fox" --tokens 32

test: ## vet and run every test, plus the cache's concurrency tests under -race (what CI runs)
	$(GO) vet $(PKGS)
	$(GO) test -count=1 $(PKGS)
	$(GO) test -count=1 -race ./runtime/cache/

bench: ## CPU benchmarks: qpack matvec and tiny-model decode
	$(GO) test -run '^$$' -bench . -benchtime 2s ./runtime/cpu/ ./runtime/engine/

clean: ## remove build outputs
	rm -rf $(BIN) carry
