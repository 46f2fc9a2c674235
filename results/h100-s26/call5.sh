#!/usr/bin/env bash
# session 26, call 5 (little device time left): the ring's GPU tests, then one attention launch
# at depth per kernel (BenchmarkAttentionStep: plain, pipe, pipe-pf128, ring), no artifacts.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
summary=$R/summary.txt; : > $summary
[ -x carry/cuda.test ] || tar -xJf carry/bins.tar.xz -C carry cuda.test
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
cd runtime/cuda
t0=$SECONDS
timeout ${TEST_LIMIT:-70} ../../carry/cuda.test -test.v -test.run 'TestAttentionStepVariants|TestKernelResources' > $R/tests.log 2>&1
echo "tests: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E -- "^--- (PASS|FAIL)|attention_ring_step_kv16 " $R/tests.log | tee -a $summary
grep -E -A6 -- "--- FAIL" $R/tests.log | head -20 | tee -a $summary
t0=$SECONDS
HORIZON_BENCH_DEPTHS=${DEPTHS:-1024,2048,8064} timeout ${BENCH_LIMIT:-90} ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkAttentionStep \
	-test.benchtime ${BT:-20x} -test.count ${COUNT:-2} > $R/bench.log 2>&1
echo "bench: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E "^BenchmarkAttentionStep" $R/bench.log | tee -a $summary
