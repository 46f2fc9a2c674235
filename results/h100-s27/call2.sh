#!/usr/bin/env bash
# session 27, call 2: the chain probe (issue 14). 1. TestChainMatVec alone (a hang is a dependency bug:
# 60 s cap); 2. BenchmarkChain twice (OLMoE's and Qwen's dense decode matvecs: launched, launched-pdl,
# chain-plain, chain-pdl, chain-across, stream); 3. the whole CUDA suite beside the artifacts (every
# PTX regenerated: common.cuh gained ld_acquire). Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c2; mkdir -p $W
DEADLINE=${DEADLINE:-560}
left() { echo $((DEADLINE - SECONDS)); }
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
t0=$SECONDS
(cd runtime/cuda && timeout 60 ../../carry/cuda.test -test.v -test.run 'TestChainMatVec$' -test.timeout 55s) > $W/chain-test.log 2>&1
echo "TestChainMatVec: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E -- "^--- |^(ok|FAIL|panic)|chain_test.go" $W/chain-test.log | head -10 | tee -a $summary
for i in 1 2; do
	t0=$SECONDS
	(cd runtime/cuda && timeout 120 ../../carry/cuda.test -test.run '^$' -test.bench 'BenchmarkChain$' -test.benchtime 20x) > $W/chain-bench-$i.log 2>&1
	echo "BenchmarkChain $i: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark|FAIL|panic" $W/chain-bench-$i.log | sed -E 's/ +/ /g' | tee -a $summary
done
cp $summary $W/
export OUT=$W
lim=$(( $(left) - 15 ))
if [ $lim -gt 150 ]; then
	h200_suite $lim &
	sp=$!
	h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
	wait $sp
else
	echo "whole suite: skipped ($lim s)" | tee -a $summary
fi
tar -C $W -czf $R/logs-c2.tgz . 2>/dev/null
echo "done at $SECONDS s"
