#!/usr/bin/env bash
# Session 33: the GPU tests of this session's code alone (call1.sh's tests, without its benchmarks),
# for an H200 call that must leave the rest of the device time to editions. The full shapes'
# artifacts are made beside them (the tests use the tiny models; the artifacts stay in
# /dev/shm/persistent for later calls on the warm machine).
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz"].
#   bash results/prefill-s33/tests.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s33t
h200_tests_beside_artifacts 'TestRouteGroupsTable|TestRoutePublished|TestTCDenseBurstChoice|TestTCPreSplitSameBits|TestMatmulTC$|TestBatchedPrefillOnDevice|TestDeviceRoutedPrefillOnDevice|TestKernelResources|TestModuleFuncsCoverPTX' olmoe-1b-7b:924 qwen15-moe-a27b:1
cp "$W/tests.log" "$R/tests.log" 2>/dev/null
echo "done at $SECONDS s" | tee -a "$summary"
