#!/usr/bin/env bash
# Session 31's device call (issue 15): the lean fragment-direct body (ldmatrix A fragments, one
# LOP3 a code pair, one PRMT a transpose step, loads at constant offsets; the same products and
# order, so the same bits) against the build before it, and the small-entry build (tuning.tcFD16)
# against the default, at 16, 64 and 512 prompt tokens on both shapes.
# From the repository root on the GPU machine, after `make gpu-bins` here (the new build) and
# with the build before it as carry/old/cuda.test.xz; carry ["carry/bins.tar.xz", "carry/old"].
#   DEADLINE=570 bash results/prefill-s31/call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s31
xz -dc carry/old/cuda.test.xz > carry/old/cuda.test && chmod +x carry/old/cuda.test
# 1. The kernels' GPU tests (new build) beside the artifacts.
h200_tests_beside_artifacts 'TestTCPreSplitSameBits|TestTCGroupedKernelChoice|TestDeviceRoutedPrefillOnDevice|TestKernelResources|TestMatmulTC|TestBatchedPrefillTensorCores|TestBatchedPrefillOnDevice' olmoe-1b-7b:924 qwen15-moe-a27b:1
# 2. BenchmarkPrefillModes, new / old / new, each bounded so all three fit.
bench() { # LABEL BINARY SECONDS
	local t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$arts HORIZON_BENCH_PROMPTS=${LENGTHS:-16,64,512} \
		HORIZON_BENCH_PREFILL_MODES=${MODES:-batched-tc,batched-tc-fd16} \
		timeout "$3" "$2" -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) >"$R/bench-$1.log" 2>&1
	echo "bench $1: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	grep -E "prompt-tok/s|within" "$R/bench-$1.log" | tee -a "$summary"
}
left=$((DEADLINE - SECONDS - 15)); per=$((left / 3))
[ "$per" -gt 30 ] && bench new1 ../../carry/cuda.test "$per"
[ "$per" -gt 30 ] && bench old ../../carry/old/cuda.test "$per"
left=$((DEADLINE - SECONDS - 10))
[ "$left" -gt 30 ] && bench new2 ../../carry/cuda.test "$left"
cp "$W/tests.log" "$R/tests.log" 2>/dev/null
echo "done at $SECONDS s" | tee -a "$summary"
