#!/usr/bin/env bash
# Session 33: the GPU tests of this session's code alone (call1.sh's tests, without its benchmarks),
# for an H200 call that must leave the rest of the device time to editions (the tests use the
# tiny models; no full-shape artifact is made).
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz"].
#   bash results/prefill-s33/tests.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s33t
SUITE_RUN='TestRouteGroupsTable|TestRoutePublished|TestTopKRowsWarp|TestAttnInRowsOnDevice|TestTCDenseBurstChoice|TestTCPreSplitSameBits|TestMatmulTC$|TestBatchedPrefillOnDevice|TestDeviceRoutedPrefillOnDevice|TestKernelResources|TestModuleFuncsCoverPTX' \
	OUT=$R h200_suite 150
echo "done at $SECONDS s" | tee -a "$summary"
