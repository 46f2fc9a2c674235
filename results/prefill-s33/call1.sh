#!/usr/bin/env bash
# Session 33's first call: the GPU tests of the gate|up launch (RoutedGateUp's
# matmul_tc_grouped_pre_fd(16)_gu_w4a16), of the ids published through mapped memory (d2d9a23) and of e659b13 (the burst twin from 8 chunks a block;
# the two-stage kernels skip padding m16 tiles), then prompt tok/s of the default against
# batched-tc-nogateup, batched-tc-sep (the attn-in and top-k small ops separate), the split-K
# projections aiming for 132 blocks (batched-tc-goal132)
# and e659b13's default (carry/old/cuda.test.xz) at 16, 64 and 512 tokens.
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz", "carry/old/cuda.test.xz"].
#   DEADLINE=480 bash results/prefill-s33/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s33c1
h200_tests_beside_artifacts 'TestRouteGroupsTable|TestRoutePublished|TestTopKRowsWarp|TestAttnInRowsOnDevice|TestTCDenseBurstChoice|TestTCPreSplitSameBits|TestMatmulTC$|TestBatchedPrefillOnDevice|TestDeviceRoutedPrefillOnDevice|TestKernelResources|TestModuleFuncsCoverPTX' olmoe-1b-7b:924 qwen15-moe-a27b:1
cp "$W/tests.log" "$R/tests.log" 2>/dev/null
LENGTHS=16,64,512
# new (the default and three tunings), e659b13's default (carry/old/cuda.test.xz), new again.
h200_old_bins
l=$(((DEADLINE - SECONDS - 10) * 2 / 5))
MODES=batched-tc,batched-tc-nogateup,batched-tc-sep,batched-tc-goal132 h200_prefill_bench new-a ../../carry/cuda.test "$l"
MODES=batched-tc h200_prefill_bench old ../../carry/old/cuda.test "$((l / 2))"
l=$((DEADLINE - SECONDS - 5))
[ "$l" -gt 30 ] && MODES=batched-tc,batched-tc-nogateup,batched-tc-sep,batched-tc-goal132 h200_prefill_bench new-b ../../carry/cuda.test "$l"
echo "done at $SECONDS s" | tee -a "$summary"
