#!/usr/bin/env bash
# Session 35's second device call: TestExpertActivationsOnDevice alone with its whole -v log (call 1
# failed it on olmoe-tiny and kept no message), then session 34's Nsight Compute call (a 512-token
# OLMoE prefill, the default against batched-tc-a16r) in what is left.
# carry ["carry/bins.tar.xz"].
#   DEADLINE=400 bash results/prefill-s35/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
mkdir -p "$R"
DEADLINE=${DEADLINE:-400}
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
(cd runtime/cuda && timeout 120 ../../carry/cuda.test -test.v -test.run 'TestExpertActivationsOnDevice' -test.timeout 110s) >"$R/activations-test.log" 2>&1
echo "test: rc=$?" | tee "$R/summary.txt"
grep -E -B2 -A8 -- "--- FAIL|panic|_test.go:[0-9]+:" "$R/activations-test.log" | head -60
left=$((DEADLINE - SECONDS))
if [ "$left" -gt 200 ]; then
	MODES="batched-tc batched-tc-a16r" PROMPT=512 COUNT=4 SKIP=32 ALL_KERNELS=1 NCU_LIMIT=$((left - 120)) \
		OUT=$R/p512 timeout $((left - 5)) bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
	echo "ncu: rc=$? at $SECONDS s" | tee -a "$R/summary.txt"
fi
