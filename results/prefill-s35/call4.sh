#!/usr/bin/env bash
# Session 35's fourth device call: the tests of what changed after call 1 (binaries of 18ab5db):
# TestExpertActivationsOnDevice with its restated CPU tolerance, and the tensor-core prefill
# attention as the default over FP16 caches (TestAttentionTiled, TestBatchedPrefillTensorCores,
# TestKV16OnDevice, TestExecutorsBitIdentical). carry ["carry/bins.tar.xz"].
#   bash results/prefill-s35/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
mkdir -p "$R"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
(cd runtime/cuda && timeout "${LIMIT:-150}" ../../carry/cuda.test -test.v -test.timeout "$((${LIMIT:-150} - 5))s" \
	-test.run 'TestExpertActivationsOnDevice|TestAttentionTiled|TestBatchedPrefillTensorCores|TestKV16OnDevice|TestExecutorsBitIdentical') >"$R/tests.log" 2>&1
echo "tests: rc=$?" | tee "$R/summary.txt"
grep -E -- "^--- |^    --- FAIL|_test.go:[0-9]+:" "$R/tests.log" | head -40 | tee -a "$R/summary.txt"
