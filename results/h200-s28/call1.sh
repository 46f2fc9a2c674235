#!/usr/bin/env bash
# Written at the end of session 27 for the next device call (not yet run): what was built after call 6.
# 1. TestStepTimeline, TestStepperTunings (its timeline cases), TestChainMatVec (the block-counted per-warp
#    builds, chain_matvec_f16_regs16) beside the artifacts; 2. BenchmarkChain on the OLMoE programs;
# 3. the Qwen decode timeline at depth 1 and 8,064 with and without the shared-expert branch (PDL off, so
#    the event nodes change nothing else): which instruction grows with depth when the branch is on.
# From the repository root on the GPU machine, after `make gpu-bins` here. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c7; mkdir -p $W
DEADLINE=${DEADLINE:-560}
left() { echo $((DEADLINE - SECONDS)); }
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
( t0=$SECONDS; cd runtime/cuda && timeout 200 ../../carry/cuda.test -test.v -test.run 'TestStepTimeline|TestStepperTunings|TestChainMatVec' -test.timeout 195s > $W/tests.log 2>&1; echo "tests: rc=$? ($((SECONDS - t0)) s)" >> $W/tests-rc.txt ) &
sp=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
q=${arts#*:}
wait $sp
cat $W/tests-rc.txt | tee -a $summary
grep -E -- "^--- (PASS|FAIL)|^    --- FAIL" $W/tests.log | head -20 | tee -a $summary
grep -E -A8 -- "--- FAIL|panic" $W/tests.log | head -30 | tee -a $summary
t0=$SECONDS
(cd runtime/cuda && timeout 90 ../../carry/cuda.test -test.run '^$' -test.bench 'BenchmarkChain/olmoe' -test.benchtime 20x) > $W/chain-bench.log 2>&1
echo "BenchmarkChain: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E "^Benchmark|FAIL|panic" $W/chain-bench.log | sed -E 's/ +/ /g' | tee -a $summary
for order in a b; do
	modes=graph-full-nopdl-tl,graph-full-nosfork-nopdl-tl
	[ $order = b ] && modes=graph-full-nosfork-nopdl-tl,graph-full-nopdl-tl
	lim=$(( $(left) - 10 < 120 ? $(left) - 10 : 120 ))
	[ $lim -gt 30 ] || { echo "timeline $order: skipped (time)" | tee -a $summary; continue; }
	t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$q HORIZON_BENCH_DEPTHS=1,8064 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_MODES=$modes timeout $lim ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x) > $W/timeline-$order.log 2>&1
	echo "timeline $order: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark|FAIL|panic" $W/timeline-$order.log | sed -E 's/ +/ /g' | tee -a $summary
done
tar -C $W -czf $R/logs-c7.tgz . 2>/dev/null
echo "done at $SECONDS s"
