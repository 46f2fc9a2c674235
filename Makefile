# Horizon RunMap. `make help` lists the targets.
GO      ?= go
BIN     := bin
PKGS    := ./...

.PHONY: help setup build run test test-slurm verify-editions reproduce-smoke attest-check jit-cache-check bench clean

help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

setup: ## fetch Go modules (Go itself must be installed)
	$(GO) mod download

build: ## build the CLIs into bin/
	$(GO) build -buildvcs=true -o $(BIN)/ ./cmd/...

run: ## the main job: PERF-REAL-v1 smoke campaign on the CPU into out/smoke-cpu, then verify it
	rm -rf out/smoke-cpu
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/smoke.yaml --out out/smoke-cpu
	$(GO) run -buildvcs=true ./cmd/horizon-verify out/smoke-cpu

test: ## vet, every test, the cache's concurrency tests under -race, and horizon-verify on every committed edition (what CI runs)
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 30m $(PKGS)
	$(GO) test -count=1 -race ./runtime/cache/
	$(MAKE) verify-editions
	$(MAKE) ifeval-smoke-check
	$(MAKE) fidelity-smoke-check
	$(MAKE) prefill-smoke-check
	$(MAKE) depth-smoke-check
	$(MAKE) reproduce-smoke
	$(MAKE) dequantize-check
	$(MAKE) attest-check
	$(MAKE) jit-cache-check
	$(MAKE) test-slurm

jit-cache-check: ## scripts/jit-cache.sh (the GPU driver's JIT cache carried between leases) restores, keeps and saves as it says, without a GPU
	@command -v xz >/dev/null || { echo "jit-cache-check: installing xz-utils (apt)"; apt-get update -qq && apt-get install -y -qq xz-utils >/dev/null; }
	bash scripts/jit-cache-check.sh

test-slurm: ## the smoke campaign through a real one-node Slurm (installs slurm-wlm + munge if missing; root): submit, kill, scancel, re-run, verify, tokens equal editions/smoke-cpu; a failing task names its log (~3 min)
	bash scripts/slurm-smoke.sh

verify-editions: ## horizon-verify every edition committed under editions/
	@set -e; for e in editions/*/; do [ -f "$$e/manifest.json" ] || continue; \
		echo "horizon-verify $$e"; $(GO) run ./cmd/horizon-verify "$$e"; done

reproduce-smoke: ## rerun one partial-residency worker (block 1) of smoke-cpu, prefill-smoke-cpu and depth-smoke-cpu into out/repro-*; tokens and counters must be identical, and horizon-verify checks each record (per-prompt claims included)
	rm -rf out/repro-smoke out/repro-prefill-smoke out/repro-depth-smoke
	$(GO) run ./cmd/horizon-bench reproduce editions/smoke-cpu --configs olmoe-tiny-c6 --blocks 1 --out out/repro-smoke
	$(GO) run ./cmd/horizon-verify editions/smoke-cpu --reproduction out/repro-smoke
	$(GO) run ./cmd/horizon-bench reproduce editions/prefill-smoke-cpu --configs olmoe-tiny-c6 --blocks 1 --out out/repro-prefill-smoke
	$(GO) run ./cmd/horizon-verify editions/prefill-smoke-cpu --reproduction out/repro-prefill-smoke
	$(GO) run ./cmd/horizon-bench reproduce editions/depth-smoke-cpu --configs qwen2moe-tiny-c8 --blocks 1 --out out/repro-depth-smoke
	$(GO) run ./cmd/horizon-verify editions/depth-smoke-cpu --reproduction out/repro-depth-smoke

attest-check: ## sign a copy of smoke-cpu with a fresh key; horizon-verify --trusted-key must pass with that key and fail with another
	rm -rf out/attest-check && mkdir -p out/attest-check
	cp -r editions/smoke-cpu out/attest-check/smoke-cpu
	$(GO) run ./cmd/horizon-bench keygen --out out/attest-check/key
	$(GO) run ./cmd/horizon-bench keygen --out out/attest-check/other
	$(GO) run ./cmd/horizon-bench attest out/attest-check/smoke-cpu --key out/attest-check/key/horizon.key
	$(GO) run ./cmd/horizon-verify out/attest-check/smoke-cpu --trusted-key out/attest-check/key/horizon.pub
	@if $(GO) run ./cmd/horizon-verify out/attest-check/smoke-cpu --trusted-key out/attest-check/other/horizon.pub >out/attest-check/wrong-key.txt 2>&1; then \
		echo "attest-check: a signature by another key passed --trusted-key"; cat out/attest-check/wrong-key.txt; exit 1; \
	else grep -q signature.wrong-key out/attest-check/wrong-key.txt && echo "attest-check: the wrong key fails (signature.wrong-key), as it must"; fi

bench: ## CPU benchmarks: qpack matvec, tiny-model decode and prefill (token at a time against batched)
	$(GO) test -run '^$$' -bench . -benchtime 2s ./runtime/cpu/ ./runtime/engine/

clean: ## remove build outputs, run directories (runs/) and scratch output (out/)
	rm -rf $(BIN) carry runs out

# ---- CUDA: kernels, the cuda-tagged build, GPU tests -----------------------
# Debian 12 build machines have no GPU: `make cuda-deps` installs nvcc 11.8 and
# the CUDA headers (root), `make kernels` regenerates the committed PTX,
# `make cuda` / `make gpu-test` build into carry/, which travels to the GPU
# machine, where `bash scripts/gpu-test.sh` runs the tests and benchmarks.
CUDA_DEPS ?= $(BIN)/cuda-deps
CARRY     ?= carry

.PHONY: cuda-deps kernels cuda cuda-vet gpu-test gpu-bins carry unpack-edition

cuda-deps: ## install nvcc 11.8 + cuda.h + libcuda stub from Debian contrib/non-free (root; ~3 min)
	bash scripts/install-cuda-headers.sh toolkit

kernels: ## regenerate kernels/*.ptx (compute_90) from kernels/*.cu; needs nvcc (make cuda-deps)
	bash kernels/gen.sh

cuda: ## build the cuda-tagged CLI into carry/horizon-bench-cuda (needs cuda.h + libcuda)
	mkdir -p $(CARRY)
	$(GO) build -buildvcs=true -tags cuda -trimpath -ldflags="-s -w" -o $(CARRY)/horizon-bench-cuda ./cmd/horizon-bench

cuda-vet: ## CI compile check of the cuda-tagged code with only cuda.h and the stub libcuda
	CUDA_DEPS=$(CUDA_DEPS) bash scripts/install-cuda-headers.sh headers
	CGO_CFLAGS="-I$(abspath $(CUDA_DEPS))/include" CGO_LDFLAGS="-L$(abspath $(CUDA_DEPS))/lib" \
		$(GO) vet -tags cuda ./runtime/cuda/ ./cmd/...

carry: cuda ## build what scripts/device-campaign.sh runs on the GPU machine: carry/horizon-bench-cuda and carry/horizon-verify
	mkdir -p $(CARRY)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(CARRY)/horizon-verify ./cmd/horizon-verify
	@ls -la $(CARRY)/horizon-bench-cuda $(CARRY)/horizon-verify

unpack-edition: ## unpack an edition archive from scripts/device-campaign.sh into editions/ and verify it: make unpack-edition ARCHIVE=path/<edition>.tar.gz (or its .part-0, .part-1, ... beside it)
	@test -n "$(ARCHIVE)" || { echo "usage: make unpack-edition ARCHIVE=path/<edition>.tar.gz"; exit 2; }
	@name=$$(basename "$(ARCHIVE)" .tar.gz); arch="$(ARCHIVE)"; \
	if [ ! -e "$$arch" ] && [ -e "$$arch.part-0" ]; then \
		arch=$$(mktemp) && cat "$(ARCHIVE)".part-* > "$$arch" && echo "joined $$(ls "$(ARCHIVE)".part-* | wc -l) parts of $(ARCHIVE)"; \
	fi; \
	tar -tzf "$$arch" | grep -qv "^$$name/" && { echo "$(ARCHIVE): entries outside $$name/; refusing"; exit 1; }; \
	test ! -e "editions/$$name" || { echo "editions/$$name exists; remove it first to replace it"; exit 1; }; \
	tar -xzf "$$arch" -C editions && echo "unpacked editions/$$name" && \
	$(GO) run ./cmd/horizon-verify "editions/$$name"

gpu-test: ## build the cuda test binaries (+ the CLI) into carry/ for scripts/gpu-test.sh
	mkdir -p $(CARRY)
	$(GO) test -c -tags cuda -trimpath -ldflags="-s -w" -o $(CARRY)/cuda.test ./runtime/cuda/
	$(GO) test -c -trimpath -ldflags="-s -w" -o $(CARRY)/kernels.test ./kernels/
	$(MAKE) cuda || echo "gpu-test: the CLI did not build; scripts/gpu-test.sh skips its smoke run"
	@ls -la $(CARRY)

# The device tool copies at most 64 MiB of the working tree (tracked files
# included); the largest committed editions are set aside under carry/aside
# (ignored) for a device call and put back afterwards.
DEVICE_ASIDE := editions/fidelity-v1 editions/residency-ablation editions/policy-ablation-v1 editions/smoke-cuda editions/ifeval541-olmoe-synthetic results/report-html results/reproduce-h200-s7 editions/full-residency-v1 editions/technical-preview-v3 editions/full-residency-v2 editions/depth-v1 results/one-plan-h200-stepper results/one-plan-h200 results/ablation-h200-session5 results/reproduce-h200 results/attention-one-launch-h200 editions/prefill-v1 editions/ttft-v1 editions/policy-smoke-cpu results/h200-s22 results/instruction-profile-h200 editions/smoke-cpu results/h100-s36/call1 results/h100-s36/call6 results/h100-s37/call1 results/h100-s37/call2 results/s38/call1 results/s38/call2 results/s39/call2 results/s39/call3 ifeval/testdata results/h200-session3 results/h200-s19 results/prefill-s35
device-aside: ## before a device call: move the largest committed editions to carry/aside (the tree must stay under 64 MiB)
	@for d in $(DEVICE_ASIDE); do if [ -d "$$d" ]; then mkdir -p $(CARRY)/aside/$$(dirname $$d) && mv "$$d" $(CARRY)/aside/$$d && echo "aside: $$d"; fi; done
	@du -cb $$(git ls-files | while read f; do [ -e "$$f" ] && echo "$$f"; done) 2>/dev/null | tail -1
device-back: ## after a device call: put the editions device-aside moved back
	@for d in $(DEVICE_ASIDE); do if [ -d $(CARRY)/aside/$$d ]; then mv $(CARRY)/aside/$$d "$$d" && echo "back: $$d"; fi; done
	@git status --short --untracked-files=no | grep '^ D' && { echo "device-back: tracked files still missing"; exit 1; } || true

gpu-bins: ## build every GPU binary from a clean clone of HEAD (so records name a clean revision) and pack them as carry/bins.tar.xz, the one file to carry to the GPU machine
	@test -z "$$(git status --porcelain --untracked-files=no)" || echo "gpu-bins: uncommitted changes are not in the build (it builds HEAD)"
	rm -rf $(CARRY)/clone && git clone -q . $(CARRY)/clone && git -C $(CARRY)/clone checkout -q $$(git rev-parse HEAD)
	cd $(CARRY)/clone && CUDA_DEPS=$(abspath $(CUDA_DEPS)) bash scripts/install-cuda-headers.sh headers && \
		export CGO_CFLAGS="-I$(abspath $(CUDA_DEPS))/include" CGO_LDFLAGS="-L$(abspath $(CUDA_DEPS))/lib" && \
		$(GO) test -c -tags cuda -trimpath -ldflags="-s -w" -o ../cuda.test ./runtime/cuda/ && \
		$(GO) test -c -trimpath -ldflags="-s -w" -o ../kernels.test ./kernels/ && \
		$(GO) build -buildvcs=true -tags cuda -trimpath -ldflags="-s -w" -o ../horizon-bench-cuda ./cmd/horizon-bench && \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o ../horizon-verify ./cmd/horizon-verify
	rm -rf $(CARRY)/clone
	tar -cJf $(CARRY)/bins.tar.xz -C $(CARRY) cuda.test kernels.test horizon-bench-cuda horizon-verify
	@ls -la $(CARRY)/bins.tar.xz

# The llama.cpp peer (docs/peers.md): the llama.cpp source tarball and its build hook are kept
# under carry/ and never committed; this target builds the synth binary the device script needs and
# checks that the rest is there.
llamacpp-carry: ## carry/horizon-bench.xz (CGO-free, for synth) for scripts/llamacpp/llamacpp-h200.sh; checks carry/llamacpp-src.tar.xz and carry/llamacpp/build.sh (docs/peers.md)
	mkdir -p $(CARRY)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(CARRY)/horizon-bench ./cmd/horizon-bench
	xz -T2 -6 -f $(CARRY)/horizon-bench
	@for f in $(CARRY)/llamacpp-src.tar.xz $(CARRY)/llamacpp-src.commit $(CARRY)/llamacpp/build.sh; do \
		test -e "$$f" || { echo "llamacpp-carry: $$f is missing (it is not committed; docs/peers.md says how it is made)"; exit 1; }; done
	@ls -la $(CARRY)/horizon-bench.xz $(CARRY)/llamacpp-src.tar.xz
	@echo "carry: $(CARRY)/horizon-bench.xz $(CARRY)/llamacpp-src.tar.xz $(CARRY)/llamacpp-src.commit $(CARRY)/llamacpp"

.PHONY: llamacpp-carry device-aside device-back edition-smoke edition-smoke-check ifeval-smoke-check edition-fidelity-smoke fidelity-smoke-check edition-prefill-smoke prefill-smoke-check edition-depth-smoke depth-smoke-check edition-policy-smoke

ifeval-smoke-check: ## run the IFEval smoke campaign (IFEVAL-SMOKE-v1, tiny CPU models, ~40 s) into out/ifeval-smoke, verify it, and check its responses equal editions/ifeval-smoke-cpu's
	rm -rf out/ifeval-smoke out/ifeval-smoke-run
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/ifeval-smoke.yaml --out out/ifeval-smoke --run-dir out/ifeval-smoke-run
	$(GO) run ./cmd/horizon-verify out/ifeval-smoke
	HORIZON_EDITION_A=$(CURDIR)/editions/ifeval-smoke-cpu HORIZON_EDITION_B=$(CURDIR)/out/ifeval-smoke \
		$(GO) test -count=1 -run TestEditionTokensMatch -v ./campaigns/

edition-fidelity-smoke: ## run the paired fidelity smoke campaign (FIDELITY-SMOKE-v1: olmoe-tiny and qwen2moe-tiny, FP16 against INT4 experts, 4 prompts, 12 tokens; CPU, ~25 s) into editions/fidelity-smoke-cpu
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/fidelity-smoke.yaml --force

fidelity-smoke-check: ## run the fidelity smoke campaign again into out/fidelity-smoke, verify it, run every fidelity forgery on it, and check its responses and forced positions equal editions/fidelity-smoke-cpu's
	rm -rf out/fidelity-smoke out/fidelity-smoke-run
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/fidelity-smoke.yaml --out out/fidelity-smoke --run-dir out/fidelity-smoke-run
	$(GO) run ./cmd/horizon-verify out/fidelity-smoke
	HORIZON_FIDELITY_EDITION=$(CURDIR)/out/fidelity-smoke $(GO) test -count=1 -run 'TestFidelity' ./verifier/
	HORIZON_EDITION_A=$(CURDIR)/editions/fidelity-smoke-cpu HORIZON_EDITION_B=$(CURDIR)/out/fidelity-smoke \
		$(GO) test -count=1 -run TestEditionTokensMatch -v ./campaigns/

edition-prefill-smoke: ## run the prefill smoke campaign (PERF-PREFILL-SMOKE-v1, tiny synthetic models, CPU, ~25 s) into editions/prefill-smoke-cpu
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/prefill-smoke.yaml --force

prefill-smoke-check: ## run the prefill smoke campaign again into out/prefill-smoke-check, verify it, and check its token ids equal editions/prefill-smoke-cpu's
	rm -rf out/prefill-smoke-check out/prefill-smoke-check-run
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/prefill-smoke.yaml --out out/prefill-smoke-check --run-dir out/prefill-smoke-check-run
	$(GO) run ./cmd/horizon-verify out/prefill-smoke-check
	HORIZON_EDITION_A=$(CURDIR)/editions/prefill-smoke-cpu HORIZON_EDITION_B=$(CURDIR)/out/prefill-smoke-check \
		$(GO) test -count=1 -run TestEditionTokensMatch -v ./campaigns/

dequantize-check: ## the HF oracle's dequantized INT4 checkpoint (scripts/dequantized_checkpoint.py) is exact: preparing it as INT4 again gives the same experts.bin
	@command -v python3 >/dev/null || { echo "dequantize-check: installing python3 (apt)"; apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
	rm -rf out/dequantize-check && mkdir -p out/dequantize-check
	$(GO) build -o out/dequantize-check/horizon-bench ./cmd/horizon-bench
	cd out/dequantize-check && for a in olmoe-tiny qwen2moe-tiny; do \
		./horizon-bench synth --arch $$a --seed 3 --out $$a-ckpt >/dev/null && \
		./horizon-bench prepare --checkpoint $$a-ckpt --out $$a-int4 --experts int4 >/dev/null && \
		python3 ../../scripts/dequantized_checkpoint.py $$a-int4 $$a-deq && \
		./horizon-bench prepare --checkpoint $$a-deq --out $$a-again --experts int4 >/dev/null && \
		cmp $$a-int4/experts.bin $$a-again/experts.bin && \
		cmp $$a-int4/nonrouted.safetensors $$a-again/nonrouted.safetensors && echo "$$a: dequantized checkpoint re-prepares to the same experts and non-routed tensors" || exit 1; \
	done

edition-policy-smoke: ## run the eviction-policy smoke campaign (PERF-POLICY-v1: olmoe-tiny c6 under lru, fifo, lfu, arc; qwen2moe-tiny c8 under lru, arc; CPU, ~10 min) into editions/policy-smoke-cpu
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/policy-smoke.yaml --force

edition-depth-smoke: ## run the depth smoke campaign (PERF-DEPTH-SMOKE-v1, tiny synthetic models, CPU, ~35 s) into editions/depth-smoke-cpu
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/depth-smoke.yaml --force

depth-smoke-check: ## run the depth smoke campaign again into out/depth-smoke-check, verify it, run every forgery on it, and check its token ids equal editions/depth-smoke-cpu's
	rm -rf out/depth-smoke-check out/depth-smoke-check-run
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/depth-smoke.yaml --out out/depth-smoke-check --run-dir out/depth-smoke-check-run
	$(GO) run ./cmd/horizon-verify out/depth-smoke-check
	HORIZON_DEPTH_EDITION=$(CURDIR)/out/depth-smoke-check $(GO) test -count=1 -run TestDepthForgeries ./verifier/
	HORIZON_EDITION_A=$(CURDIR)/editions/depth-smoke-cpu HORIZON_EDITION_B=$(CURDIR)/out/depth-smoke-check \
		$(GO) test -count=1 -run TestEditionTokensMatch -v ./campaigns/

edition-smoke: ## run the smoke campaign (PERF-REAL-v1, tiny synthetic models, CPU, ~1.5 min) into editions/smoke-cpu
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/smoke.yaml --force

edition-smoke-check: ## run the smoke campaign again into out/ and check its token ids equal editions/smoke-cpu's
	rm -rf out/smoke-check
	$(GO) run -buildvcs=true ./cmd/horizon-bench run campaigns/smoke.yaml --out out/smoke-check --run-dir out/smoke-check-run
	HORIZON_EDITION_A=$(CURDIR)/editions/smoke-cpu HORIZON_EDITION_B=$(CURDIR)/out/smoke-check \
		$(GO) test -count=1 -run TestEditionTokensMatch -v ./campaigns/
