#!/usr/bin/env bash
# session 27, call 4: the chain probe's third round (issue 14): latency ops, x in registers. 1. TestChainMatVec
# (three builds; 90 s cap, a hang is a dependency bug); 2. BenchmarkChain twice (adds the OLMoE-shaped layer
# program with its latency, and chain-across-p64); 3. Nsight Compute's full set on one chain-across launch of the OLMoE dense program.
# Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c4; mkdir -p $W
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
m='Duration|DRAM Throughput|Achieved Occupancy|Registers Per Thread|Issue Slots Busy|Warp Cycles Per Issued Instruction|One or More Eligible|Stall|L2 Hit Rate'
for k in 'chain_matvec_f16$:chain-across$'; do
	kern=${k%%:*} sub=${k#*:}
	[ $(left) -gt 60 ] || { echo "ncu $kern: skipped (time)" | tee -a $summary; continue; }
	t0=$SECONDS
	(cd runtime/cuda && timeout $(( $(left) - 10 < 120 ? $(left) - 10 : 120 )) ncu --set full --clock-control none -k regex:"^$kern" --launch-skip 40 --launch-count 1 --csv --page details \
		../../carry/cuda.test -test.run '^$' -test.bench "BenchmarkChain/olmoe-dense-16x2/$sub" -test.benchtime 2x) > $W/ncu-${sub%\$}.csv 2> $W/ncu-${sub%\$}.err
	echo "ncu $kern: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "\"($m)" $W/ncu-${sub%\$}.csv | awk -F'","' '{print $(NF-2)" = "$NF" "$(NF-1)}' | head -40 | tee -a $summary
done
tar -C $W -czf $R/logs-c4.tgz . 2>/dev/null
echo "done at $SECONDS s"
