#!/usr/bin/env bash
# Session 32's fourth call: the new defaults (the burst split-K twin, the fused q|k|v launch, the
# fragment-direct kernel up to 64 pairs an expert; 0dedfcd) under the GPU tests, then prompt tok/s
# of the default against session 31's (batched-tc-noburst) and the burst twin alone
# (batched-tc-nofuse) at 64 and 512 tokens.
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz"].
#   DEADLINE=330 bash results/prefill-s32/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s32c4
h200_tests_beside_artifacts 'TestTCGroupedKernelChoice|TestMatMulParts|TestTCPreSplitSameBits|TestDeviceRoutedPrefillOnDevice|TestBatchedPrefillOnDevice|TestKernelResources' olmoe-1b-7b:924 qwen15-moe-a27b:1
LENGTHS=64,512 MODES=batched-tc,batched-tc-noburst,batched-tc-nofuse
l=$((DEADLINE - SECONDS - 10)); [ "$l" -le 150 ] || l=150
[ "$l" -gt 30 ] && h200_prefill_bench defaults ../../carry/cuda.test "$l"
cp "$W/tests.log" "$R/tests.log" 2>/dev/null
echo "done at $SECONDS s" | tee -a "$summary"
