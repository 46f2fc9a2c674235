#!/usr/bin/env bash
# Session 33's last call, on what device time was left: TestRouteGroupsTable with its expectation
# fixed, TestAttnInRowsOnDevice with the fused norm build limited to 64 rows (the 529-token
# prompt's first chunk now runs the separate ops inside QKRoPEKVRows), and the three-stage
# small-entry kernels (tuning.tcFD16S3) under TestTCPreSplitSameBits, TestDeviceRoutedPrefillOnDevice
# and TestKernelResources.
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz"].
#   bash results/prefill-s33/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s33c4
(cd runtime/cuda && timeout 90 ../../carry/cuda.test -test.run 'TestRouteGroupsTable|TestAttnInRowsOnDevice|TestTopKRowsWarp|TestTCPreSplitSameBits|TestDeviceRoutedPrefillOnDevice|TestKernelResources|TestModuleFuncsCoverPTX' -test.v 2>&1 |
	grep -E -- "^--- |^    --- FAIL|_test.go" | head -30) | tee -a "$summary"
echo "done at $SECONDS s" | tee -a "$summary"
