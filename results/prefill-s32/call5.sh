#!/usr/bin/env bash
# Session 32's fifth call: e659b13 (the burst twin from 8 chunks a block; the two-stage kernels skip
# padding m16 tiles) under the GPU tests, then prompt tok/s of the default against
# batched-tc-noburst at 16, 64 and 512 tokens.
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz"].
#   DEADLINE=125 bash results/prefill-s32/call5.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s32c5
h200_tests_beside_artifacts 'TestTCDenseBurstChoice|TestTCPreSplitSameBits|TestMatmulTC$|TestBatchedPrefillOnDevice|TestKernelResources' olmoe-1b-7b:924 qwen15-moe-a27b:1
LENGTHS=16,64,512 MODES=batched-tc,batched-tc-noburst
l=$((DEADLINE - SECONDS - 5))
[ "$l" -gt 20 ] && h200_prefill_bench call5 ../../carry/cuda.test "$l"
cp "$W/tests.log" "$R/tests.log" 2>/dev/null
echo "done at $SECONDS s" | tee -a "$summary"
