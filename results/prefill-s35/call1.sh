#!/usr/bin/env bash
# Session 35's first device call (session 34's call1 with the declared FP16 expert activations):
#   - the GPU tests of the code no GPU ran yet: TestExpertActivationsOnDevice (the declared
#     mode: engine.LoadOptions.ExpertActivations fp16), session 33's and session 34's list;
#   - the HF oracle with FP16 expert activations on the tiny models (scripts/oracle_hf.py
#     --expert-activations fp16: the INT4 path against transformers on the dequantized checkpoint,
#     tolerance 1e-2, and the FP16-expert path at 1e-3);
#   - on an H200, editions/depth-v1 re-made alone (results/depth-v1-s30/call1.sh);
#   - on an H100, BenchmarkPrefillModes over an FP16 KV cache: the default against
#     batched-tc-a16r (the row-shift FP16 expert builds, which the declared mode runs),
#     batched-tc-a16r-atc, batched-tc-atc, batched-tc-a16rall and batched-tc-fdall at 64, 512 and
#     2,048 tokens, twice.
# carry ["carry/bins.tar.xz"] (make gpu-bins first).
#   DEADLINE=540 bash results/prefill-s35/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s35a
TESTS='TestExpertActivationsOnDevice|TestRouteGroupsTable|TestAttnInRowsOnDevice|TestTopKRowsWarp|TestTCPreSplitSameBits|TestDeviceRoutedPrefillOnDevice|TestKernelResources|TestTCGroupedKernelChoice|TestAttentionTiled'
oracle_a16() {
	local t0=$SECONDS
	timeout "$1" python3 scripts/oracle_hf.py --bin carry/horizon-bench-cuda --device cuda --expert-activations fp16 \
		--prefill batched --work /tmp/s35-oracle --arch olmoe-tiny --arch qwen2moe-tiny --out "$R/oracle-a16.json" >/tmp/s35-oracle.log 2>&1
	echo "oracle a16: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	grep -v '^+ ' /tmp/s35-oracle.log | tail -30 | cut -c1-600 >>"$summary"
}
if [ "${FORCE_H100:-}" = "" ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
	SUITE_RUN="$TESTS" OUT=$R h200_suite 110
	oracle_a16 90
	grep -q -- "--- FAIL" "$R/cuda-test.log" && { echo "tests failed: no edition"; exit 1; }
	CAMPAIGN_BUDGET=$((DEADLINE - SECONDS - 40)) DEADLINE=$((DEADLINE - SECONDS)) exec bash results/depth-v1-s30/call1.sh
fi
h200_tests_beside_artifacts "$TESTS" olmoe-1b-7b:924 qwen15-moe-a27b:1
oracle_a16 90
LENGTHS=${LENGTHS:-64,512,2048}
MODES=${MODES:-batched-tc,batched-tc-a16r-atc,batched-tc-a16r,batched-tc-atc,batched-tc-a16rall,batched-tc-fdall}
export HORIZON_BENCH_KV=fp16  # the tensor-core attention runs over an FP16 cache
for run in a b; do
	[ "$run" = a ] && l=$(((DEADLINE - SECONDS - 5) / 2))
	[ "$run" = b ] && l=$((DEADLINE - SECONDS - 5))
	[ "$l" -gt 30 ] && h200_prefill_bench "$run" ../../carry/cuda.test "$l"
done
echo "done at $SECONDS s" | tee -a "$summary"
