#!/usr/bin/env bash
# fused-diag-h200.sh: where the fused routed-experts kernel's time goes (issue 14). Build here with
# `make gpu-bins`, then on the GPU machine from the repository root:
#
#   bash scripts/fused-diag-h200.sh
#
# 1. BenchmarkExperts' device-table variants (CUDA events, back to back, weights rotated over 1.5 GB):
#    the _t gate/up and down alone and as a pair, experts_moe_int4_t, and its diagnostic flags
#    (no L2 prefetch, no down phase, no barrier) -> experts-bench.log;
# 2. INT4 artifacts of both full shapes, then BenchmarkDecodeModes (256 tokens, full residency,
#    tokens compared) for graph-full (two launches), graph-full-fused and graph-full-fused-nopf
#    -> bench-modes.log. (At 9037cda, where it ran as call 3 of results/decode-tunings-h200, the
#    fused kernel was the default and the variants were graph-full, -unfused, -moe-nopf, -moe-pfpair
#    (its gate/up with the down prefetch, then the down kernel) and -moe-pair (its gate/up alone,
#    then the down kernel).)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/fused-diag}
MODES=${MODES:-graph-full|graph-full-fused|graph-full-fused-nopf}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
t0=$SECONDS
(cd runtime/cuda && timeout 150 ../../carry/cuda.test -test.run '^$' -test.bench 'BenchmarkExperts/.*/(t-|moe|gateup$|down$)' \
	-test.benchtime 20x -test.timeout 140s) >"$OUT/experts-bench.log" 2>&1
echo "BenchmarkExperts: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark" "$OUT/experts-bench.log" | awk '{printf "%-52s %8.2f us %6.1f %%HBM\n", $1, $3/1000, $5}' | tee -a "$summary"
KEEP_SUMMARY=1 SUITE='^$' MODES="$MODES" OUT="$OUT" bash scripts/tunings-h200.sh
exit 0
