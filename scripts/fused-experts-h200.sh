#!/usr/bin/env bash
# fused-experts-h200.sh: the fused routed-experts kernel (experts_moe_int4_t, issue 14) checked and
# measured in one device call. Build here with `make gpu-bins`, then on the GPU machine from the
# repository root:
#
#   bash scripts/fused-experts-h200.sh
#
# 1. scripts/pdl-h200.sh with BENCH_MODES graph-full|graph-full-fused: the kernels' stale-PTX test,
#    the whole CUDA suite (TestStepperTunings compares the fused kernel's steps bit for bit with op
#    by op), the INT4 artifacts of both full shapes, and BenchmarkDecodeModes with the two launches
#    (graph-full) against the fused kernel (graph-full-fused), tokens compared; decode at depth is
#    skipped. (At bcc1ff5, where it ran as call 1 of results/decode-tunings-h200, the fused kernel
#    was the default: the variants were graph-full and graph-full-unfused.)
# 2. scripts/ncu-detail-h200.sh on the OLMoE-1B-7B shape: Nsight Compute's detailed sections for
#    one step's kernels (into $OUT/ncu).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/fused-experts}
BENCH_MODES=${BENCH_MODES:-graph-full|graph-full-fused} DEPTH_BEFORE_S=0 OUT="$OUT" bash scripts/pdl-h200.sh
OUT="$OUT/ncu" ART_ROOT=/dev/shm/persistent COUNT=${COUNT:-24} bash scripts/ncu-detail-h200.sh olmoe-1b-7b:924
exit 0
