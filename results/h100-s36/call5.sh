#!/usr/bin/env bash
# Session 36's fifth device call (a fresh H100): call 1's tests again with the binaries of the
# withTuning fix (TestAttentionTiled's F16 subtests had run with the default tuning left by an
# F32 subtest's cleanup), plus TestStepperTunings, which nests tunings too.
# carry ["carry/bins.tar.xz"].
#   bash results/h100-s36/call5.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
mkdir -p "$R"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
(cd runtime/cuda && timeout "${LIMIT:-150}" ../../carry/cuda.test -test.v -test.timeout "$((${LIMIT:-150} - 5))s" \
	-test.run 'TestExpertActivationsOnDevice|TestAttentionTiled|TestBatchedPrefillTensorCores|TestKV16OnDevice|TestExecutorsBitIdentical|TestStepperTunings') >"$R/tests.log" 2>&1
echo "tests: rc=$?" | tee "$R/summary.txt"
grep -E -- "^--- |^    --- FAIL|_test.go:[0-9]+:" "$R/tests.log" | grep -v "^    --- PASS" | head -60 | tee -a "$R/summary.txt"
