#!/usr/bin/env bash
# Session 32's device call (issue 15), whichever card comes: the burst split-K twin
# (matmul_tc_f16_pre_splitk_burst, tuning.tcBurst: a block's chunks copied into 5 stages with
# cp.async, up to 4 in flight together, where the two-stage split-K kernel keeps one) and the
# split-K reduce with eight loads in flight (the default's reduce, the same bits), on a GPU for
# the first time; then prompt tok/s of the default against the burst twin alone and with the
# fused q|k|v launch, at 16-512 tokens, two orders; then (time left) the lean fragment-direct
# kernel for every grouped launch (batched-tc-fdall) at 256 and 512.
# From the repository root on the GPU machine, after `make gpu-bins` here;
# carry ["carry/bins.tar.xz"].
#   DEADLINE=560 bash results/prefill-s32/call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s32
h200_tests_beside_artifacts 'TestTCPreSplitSameBits|TestKernelResources|TestDeviceRoutedPrefillOnDevice|TestModuleFuncs|TestMatmulTC$' olmoe-1b-7b:924 qwen15-moe-a27b:1
left() { echo $((DEADLINE - SECONDS - 10)); }
LENGTHS=16,64,256,512 MODES=batched-tc,batched-tc-burst,batched-tc-burst-qkv
l=$(left); [ "$l" -le 130 ] || l=130
[ "$l" -gt 30 ] && h200_prefill_bench burst-a ../../carry/cuda.test "$l"
MODES=batched-tc-burst-qkv,batched-tc-burst,batched-tc
l=$(left); [ "$l" -le 130 ] || l=130
[ "$l" -gt 30 ] && h200_prefill_bench burst-b ../../carry/cuda.test "$l"
LENGTHS=256,512 MODES=batched-tc,batched-tc-fdall
l=$(left); [ "$l" -le 90 ] || l=90
[ "$l" -gt 30 ] && h200_prefill_bench fdall ../../carry/cuda.test "$l"
cp "$W/tests.log" "$R/tests.log" 2>/dev/null
echo "done at $SECONDS s" | tee -a "$summary"
