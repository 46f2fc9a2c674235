#!/usr/bin/env bash
# session 27, call 5: the chain probe's fourth round (issue 14): one- and two-row dot paths. 1. TestChainMatVec
# (four builds; 90 s cap, a hang is a dependency bug); 2. BenchmarkChain twice. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c5; mkdir -p $W
DEADLINE=${DEADLINE:-300}
left() { echo $((DEADLINE - SECONDS)); }
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
t0=$SECONDS
(cd runtime/cuda && timeout 90 ../../carry/cuda.test -test.v -test.run 'TestChainMatVec' -test.timeout 85s) > $W/chain-test.log 2>&1
echo "TestChainMatVec: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E -- "--- |^(ok|FAIL|panic)|chain_test.go" $W/chain-test.log | head -10 | tee -a $summary
for i in 1 2; do
	t0=$SECONDS
	(cd runtime/cuda && timeout 150 ../../carry/cuda.test -test.run '^$' -test.bench 'BenchmarkChain$' -test.benchtime 20x) > $W/chain-bench-$i.log 2>&1
	echo "BenchmarkChain $i: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark|FAIL|panic" $W/chain-bench-$i.log | sed -E 's/ +/ /g' | tee -a $summary
done
tar -C $W -czf $R/logs-c5.tgz . 2>/dev/null
echo "done at $SECONDS s"
