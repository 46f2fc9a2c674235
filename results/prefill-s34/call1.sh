#!/usr/bin/env bash
# Session 34's first device call: the GPU tests of the code no GPU ran yet (session 33's list,
# and the FP16-activation builds of the fragment-direct grouped kernels: tuning.tcA16), then
#   - on an H200, editions/depth-v1 re-made alone (results/depth-v1-s30/call1.sh);
#   - on an H100, BenchmarkPrefillModes over an FP16 KV cache: the default against batched-tc-a16r
#     (FP16 activations in the grouped expert kernels, one shift a token row; other bits),
#     batched-tc-a16rall (that and FP16 activations in the burst split-K projections),
#     batched-tc-atc (the attention on the tensor cores), batched-tc-a16r-atc (all three) and
#     batched-tc-fdall (the fragment-direct kernel at every size, as the FP16 modes run it: at
#     2,048 tokens the default runs the ring) at 64, 512 and 2,048 tokens, twice.
# carry ["carry/bins.tar.xz"] (make gpu-bins first).
#   DEADLINE=560 bash results/prefill-s34/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s34a
TESTS='TestExpertActivationsOnDevice|TestRouteGroupsTable|TestAttnInRowsOnDevice|TestTopKRowsWarp|TestTCPreSplitSameBits|TestDeviceRoutedPrefillOnDevice|TestKernelResources|TestTCGroupedKernelChoice|TestAttentionTiled'
if [ "${FORCE_H100:-}" = "" ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
	SUITE_RUN="$TESTS" OUT=$R h200_suite 100
	grep -q -- "--- FAIL" "$R/cuda-test.log" && { echo "tests failed: no edition"; exit 1; }
	CAMPAIGN_BUDGET=$((DEADLINE - SECONDS - 40)) DEADLINE=$((DEADLINE - SECONDS)) exec bash results/depth-v1-s30/call1.sh
fi
h200_tests_beside_artifacts "$TESTS" olmoe-1b-7b:924 qwen15-moe-a27b:1
LENGTHS=${LENGTHS:-64,512,2048}
MODES=${MODES:-batched-tc,batched-tc-a16r-atc,batched-tc-a16r,batched-tc-atc,batched-tc-a16rall,batched-tc-fdall}
export HORIZON_BENCH_KV=fp16  # the tensor-core attention runs over an FP16 cache
for run in a b; do
	[ "$run" = a ] && l=$(((DEADLINE - SECONDS - 5) / 2))
	[ "$run" = b ] && l=$((DEADLINE - SECONDS - 5))
	[ "$l" -gt 30 ] && h200_prefill_bench "$run" ../../carry/cuda.test "$l"
done
echo "done at $SECONDS s" | tee -a "$summary"
