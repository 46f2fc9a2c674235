#!/usr/bin/env bash
# Session 31's third device call (issue 15): the ring and two-stage kernels' fragments by ldmatrix
# (tc_chunk; the same bits) against the build before (carry/old/cuda.test.xz, d5ea237), and does
# the lean fragment-direct body now beat the ring at 256 and 512 prompt tokens (tuning.tcFDAlways,
# mode batched-tc-fdall, against the default, which runs the ring where the pairs average over 32
# an expert)? Then where a 512-token OLMoE prefill's time goes (Nsight Compute, every kernel).
# From the repository root on the GPU machine, after `make gpu-bins` here;
# carry ["carry/bins.tar.xz", "carry/old"].
#   DEADLINE=360 bash results/prefill-s31/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s31c3
h200_old_bins
# The kernels' GPU tests (new build) beside the artifacts.
h200_tests_beside_artifacts 'TestMatmulTC|TestBatchedPrefillTensorCores|TestTCPreSplitSameBits|TestKernelResources|TestExpertMatMulGroupTC' olmoe-1b-7b:924 qwen15-moe-a27b:1
LENGTHS=${LENGTHS:-256,512} MODES=${MODES:-batched-tc,batched-tc-fdall}
# Each run's share of what is left (at most 90 s): new, old, new.
per=$(((DEADLINE - SECONDS - 10) / 3)); [ "$per" -le 90 ] || per=90
[ "$per" -gt 20 ] && h200_prefill_bench new-a ../../carry/cuda.test "$per"
[ "$per" -gt 20 ] && h200_prefill_bench old ../../carry/old/cuda.test "$per"
left=$((DEADLINE - SECONDS - 10)); [ "$left" -le 90 ] || left=90
[ "$left" -gt 20 ] && h200_prefill_bench new-b ../../carry/cuda.test "$left"
left=$((DEADLINE - SECONDS - 10))
if [ "$left" -gt 60 ]; then
	t0=$SECONDS
	OUT=$R/ncu512 MODES=batched-tc ALL_KERNELS=1 PROMPT=512 timeout "$left" bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924 > "$W/ncu512.log" 2>&1
	echo "ncu 512: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	head -30 "$R/ncu512/summary.txt" 2>/dev/null | tee -a "$summary"
fi
cp "$W/tests.log" "$R/tests.log" 2>/dev/null
echo "done at $SECONDS s" | tee -a "$summary"
