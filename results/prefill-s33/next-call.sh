#!/usr/bin/env bash
# The next device call (written in session 33): first the GPU tests of the code no GPU ran yet
# (call4.sh's list: the route-groups test's fixed expectation, the fused norm build up to 64 rows,
# the three-stage small-entry kernels), then on an H200 editions/depth-v1 re-made alone
# (results/depth-v1-s30/call1.sh; commit it with `make unpack-edition` after removing the old
# edition), or on an H100 the default against batched-tc-s3 and batched-tc-sep at 16, 64 and 512
# tokens, twice.
# carry ["carry/bins.tar.xz"] (make gpu-bins first).
#   DEADLINE=560 bash results/prefill-s33/next-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s33n
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
	SUITE_RUN='TestRouteGroupsTable|TestAttnInRowsOnDevice|TestTopKRowsWarp|TestTCPreSplitSameBits|TestDeviceRoutedPrefillOnDevice|TestKernelResources' \
		OUT=$R h200_suite 90
	grep -q -- "--- FAIL" "$R/cuda-test.log" && { echo "tests failed: no edition"; exit 1; }
	CAMPAIGN_BUDGET=$((DEADLINE - SECONDS - 40)) DEADLINE=$((DEADLINE - SECONDS)) exec bash results/depth-v1-s30/call1.sh
fi
h200_tests_beside_artifacts 'TestRouteGroupsTable|TestAttnInRowsOnDevice|TestTopKRowsWarp|TestTCPreSplitSameBits|TestDeviceRoutedPrefillOnDevice|TestKernelResources' olmoe-1b-7b:924 qwen15-moe-a27b:1
LENGTHS=16,64,512
MODES=batched-tc,batched-tc-s3,batched-tc-sep
for run in a b; do
	[ "$run" = a ] && l=$(((DEADLINE - SECONDS - 5) / 2))
	[ "$run" = b ] && l=$((DEADLINE - SECONDS - 5))
	[ "$l" -gt 30 ] && h200_prefill_bench "$run" ../../carry/cuda.test "$l"
done
echo "done at $SECONDS s" | tee -a "$summary"
