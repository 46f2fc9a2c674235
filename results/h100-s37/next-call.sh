#!/usr/bin/env bash
# The next lease's first call (session 37 found, after its last device call, that a fresh CUDA
# backend read every batched-prefill layer's routing back: 1e9b41a). carry ["carry/bins.tar.xz"]
# (make gpu-bins at 1e9b41a or later); on an H200 with needs_h200, else an H100.
#   1. the GPU tests of the fix and of what it turns on in production:
#      TestFreshBackendRunsTheDefaultTuning, TestDeviceRoutedPrefillOnDevice,
#      TestBatchedPrefillTensorCores, TestStepperMatchesOps, TestExpertActivationsOnDevice (the declared
#      FP16 expert activations now run through device routing in every worker);
#   2. ttft-v1 again (scripts/device-campaign.sh ttft; resumable: call it again while it exits 75).
#      On an H200 it replaces editions/ttft-v1 (make unpack-edition); on an H100 it goes to
#      results/ beside results/h100-s37/call2 (7.02 and 12.66 ms with the read-back prefill).
#   bash results/h100-s37/next-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
(cd runtime/cuda && timeout 200 ../../carry/cuda.test -test.v -test.timeout 195s \
	-test.run 'TestFreshBackendRunsTheDefaultTuning|TestDeviceRoutedPrefillOnDevice|TestBatchedPrefillTensorCores|TestStepperMatchesOps|TestExpertActivationsOnDevice') >/tmp/tests.log 2>&1
echo "tests: rc=$? at $SECONDS s" | tee "$O/tests-summary.txt"
grep -E -- "^--- |^    --- FAIL|_test.go:[0-9]+:" /tmp/tests.log | grep -v "^    --- PASS" | head -40 | tee -a "$O/tests-summary.txt"
if grep -q -- "--- FAIL" /tmp/tests.log; then
	echo "tests failed: no edition" | tee -a "$O/tests-summary.txt"
	exit 1
fi
bash scripts/device-campaign.sh ttft --budget $((${DEADLINE:-570} - SECONDS))
