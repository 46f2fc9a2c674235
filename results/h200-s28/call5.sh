#!/usr/bin/env bash
# session 28, call 5: which decode variant holds up at depth on the H200 (issue 16's Qwen d8064
# target and OLMoE's d2048-within-10%), and the mended TestStepperTunings.
# 1. TestStepperTunings and TestStepTimeline beside the artifacts;
# 2. BenchmarkDecodeDepth, Qwen at depths 1 and 8,064: graph-full (the default: the whole
#    shared-expert branch at one block an SM), -nosfork (in line), -sforkgum1 (gate|up|mix alone on
#    the branch), -sfork2 (two blocks an SM), -attpipe and -attpf64, in two orders;
# 3. the same for OLMoE at 1 and 2,048: graph-full, -attpf64, -attpf128, -attpipe-pf128.
# From the repository root on the GPU machine, after `make gpu-bins` here. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c5; mkdir -p $W
DEADLINE=${DEADLINE:-560}
left() { echo $((DEADLINE - SECONDS)); }
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
( t0=$SECONDS; cd runtime/cuda && timeout 150 ../../carry/cuda.test -test.v -test.run 'TestStepTimeline|TestStepperTunings' -test.timeout 145s > $W/tests.log 2>&1; echo "tests: rc=$? ($((SECONDS - t0)) s)" >> $W/tests-rc.txt ) &
sp=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
o=${arts%%:*}; q=${arts#*:}
wait $sp
cat $W/tests-rc.txt | tee -a $summary
grep -E -- "^--- (PASS|FAIL)|^    --- FAIL" $W/tests.log | head -20 | tee -a $summary
db() { # label art depths modes limit
	local t0=$SECONDS lim=$(( $5 < $(left) - 5 ? $5 : $(left) - 5 ))
	[ $lim -gt 20 ] || { echo "$1: skipped (time)" | tee -a $summary; return; }
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$2 HORIZON_BENCH_DEPTHS=$3 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_MODES=$4 timeout $lim ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x -test.v) > $W/$1.log 2>&1
	echo "$1: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark.*tok/s|FAIL|panic|differ" $W/$1.log | sed -E 's/ +/ /g; s/\t/ /g' | tee -a $summary
}
qm=graph-full,graph-full-nosfork,graph-full-sforkgum1,graph-full-sfork2,graph-full-attpipe,graph-full-attpf64
db qwen-a $q 1,8064 $qm 130
db qwen-b $q 1,8064 $(echo $qm | tr ',' '\n' | tac | paste -sd,) 130
om=graph-full,graph-full-attpf64,graph-full-attpf128,graph-full-attpipe-pf128
db olmoe-a $o 1,2048 $om 70
db olmoe-b $o 1,2048 $(echo $om | tr ',' '\n' | tac | paste -sd,) 70
tar -C $W -czf $R/logs-c5.tgz . 2>/dev/null
echo "done at $SECONDS s" | tee -a $summary
