#!/usr/bin/env bash
# Session 38's first call (H200 with needs_h200, else an H100). carry ["carry/bins.tar.xz"]
# (make gpu-bins at 6cfd9ef or later: both of session 37's fixes).
#   1. the GPU tests of session 37's device-routing fix and of what it turns on in production
#      (results/h100-s37/next-call.sh's list);
#   2. ttft-v1, then prefill-v1 (scripts/device-campaign.sh ttft prefill; resumable: call
#      `bash scripts/device-campaign.sh ttft prefill --budget 575` again while it exits 75).
#   DEADLINE=575 bash results/s38/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
DEADLINE=${DEADLINE:-575}
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$O/tests-summary.txt"
(cd runtime/cuda && timeout 200 ../../carry/cuda.test -test.v -test.timeout 195s \
	-test.run 'TestFreshBackendRunsTheDefaultTuning|TestDeviceRoutedPrefillOnDevice|TestBatchedPrefillTensorCores|TestStepperMatchesOps|TestExpertActivationsOnDevice') >/tmp/tests.log 2>&1
echo "tests: rc=$? at $SECONDS s" | tee -a "$O/tests-summary.txt"
grep -E -- "^--- |^    --- FAIL|_test.go:[0-9]+:" /tmp/tests.log | grep -v "^    --- PASS" | head -40 | tee -a "$O/tests-summary.txt"
if grep -q -- "--- FAIL" /tmp/tests.log; then
	echo "tests failed: no edition" | tee -a "$O/tests-summary.txt"
	exit 1
fi
bash scripts/device-campaign.sh ttft prefill --budget $((DEADLINE - SECONDS))
