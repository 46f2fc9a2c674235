#!/usr/bin/env bash
# session 27, call 6: chain_matvec_f16_regs (issue 14's probe, warps streaming rows into registers across the
# waits). 1. BenchmarkChain on the OLMoE programs; 2. TestChainMatVec. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c6; mkdir -p $W
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
t0=$SECONDS
(cd runtime/cuda && timeout 80 ../../carry/cuda.test -test.run '^$' -test.bench 'BenchmarkChain/olmoe' -test.benchtime 20x) > $W/chain-bench.log 2>&1
echo "BenchmarkChain: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E "^Benchmark|FAIL|panic" $W/chain-bench.log | sed -E 's/ +/ /g' | tee -a $summary
t0=$SECONDS
(cd runtime/cuda && timeout 60 ../../carry/cuda.test -test.v -test.run 'TestChainMatVec' -test.timeout 55s) > $W/chain-test.log 2>&1
echo "TestChainMatVec: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E -- "--- |^(ok|FAIL|panic)|chain_test.go" $W/chain-test.log | head -12 | tee -a $summary
tar -C $W -czf $R/logs-c6.tgz . 2>/dev/null
echo "done at $SECONDS s"
