#!/usr/bin/env bash
# Session 37, call 2 (the same warm H100 as call 1, artifacts in /dev/shm/persistent): the
# per-instruction profile of a full-residency decode step of today's build
# (scripts/instruction-profile-h200.sh; the last one was the H200's at 32e7acf), HBM time at
# 3.08 TB/s (session 27's H100 stream read), then the stepper's GPU tests that the lookahead
# change touches. carry ["carry/bins.tar.xz"].
#   bash results/h100-s37/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
for a in olmoe-1b-7b:924 qwen15-moe-a27b:1; do
	n=${a%%:*}
	ART_ROOT=/dev/shm/persistent HBM_TBS=${HBM_TBS:-3.08} OUT=/tmp/prof-$n bash scripts/instruction-profile-h200.sh "$a" >/dev/null 2>&1
	cp /tmp/prof-$n/instruction-profile.tar.gz "$O/prof-$n.tar.gz"
	cat /tmp/prof-$n/summary.txt >>"$O/summary.txt"
	echo "profile $n done at $SECONDS s" | tee -a "$O/summary.txt"
done
left=$((${DEADLINE:-580} - SECONDS))
if [ $left -gt 60 ]; then
	(cd runtime/cuda && timeout $((left - 5)) ../../carry/cuda.test -test.v -test.timeout "$((left - 10))s" \
		-test.run 'TestStepperMatchesOps|TestExecutorsBitIdentical|TestDeterminism') >/tmp/tests.log 2>&1
	echo "tests: rc=$? at $SECONDS s" | tee -a "$O/summary.txt"
	grep -E -- "^--- |^    --- FAIL|_test.go:[0-9]+:" /tmp/tests.log | grep -v "^    --- PASS" | head -40 | tee -a "$O/summary.txt"
	xz -c /tmp/tests.log >"$O/tests.log.xz"
fi
