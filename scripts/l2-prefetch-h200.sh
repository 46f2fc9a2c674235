#!/usr/bin/env bash
# l2-prefetch-h200.sh: the captured steps' L2 prefetch branch (issue 14,
# runtime/cuda/step_prefetch.go, off by default: tuning.l2Prefetch), checked
# and measured in one device call on one GPU: scripts/pdl-h200.sh with the
# branch's BenchmarkDecodeModes variants. Build here with `make gpu-bins`
# (carry/bins.tar.xz), then on the GPU machine, from the repository root:
#
#   bash scripts/l2-prefetch-h200.sh
#
# The whole CUDA suite (TestStepperTunings (its l2-prefetch case) holds the branch to op by op's
# bits), then graph-full (no branch) against graph-full-l2 (24 MiB a fork,
# evict_last) and its variants: -l2normal (normal eviction priority), -l2-12m
# and -l2-40m (budgets), -l2-grid4 and -l2-grid132 (prefetch grids) and
# -l2-empty (the branch with 0-byte prefetches: what the branch alone costs),
# then decode at depth.
cd "$(dirname "$0")/.."
OUT=${OUT:-out/l2-prefetch-h200} \
	BENCH_MODES='graph-full|graph-full-l2|graph-full-l2normal|graph-full-l2-12m|graph-full-l2-40m|graph-full-l2-grid4|graph-full-l2-grid132|graph-full-l2-empty' \
	MODES_S=${MODES_S:-260} exec bash scripts/pdl-h200.sh
