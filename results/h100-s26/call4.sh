#!/usr/bin/env bash
# session 26, call 4: the decode attention's shared-memory ring (tuning.attRing) checked and measured.
# 1. the attention and step-tuning tests beside the artifacts; 2. BenchmarkDecodeDepth graph-full against
# graph-full-attring at depth (FP16 KV, batched prefill; Qwen in both orders, OLMoE once); 3. the whole
# CUDA suite (PTX regenerated for every module) with what is left. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c4; mkdir -p $W
export OUT=$W
DEADLINE=${DEADLINE:-560}
left() { echo $((DEADLINE - SECONDS)); }
summary=$R/summary.txt; : > $summary  # in $OUT from the start: a call cut short still brings it back
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
SUITE='TestAttentionStepVariants|TestKernelResources|TestStepperTunings|TestKV16OnDevice|TestPDLModulesWait'
( t0=$SECONDS; cd runtime/cuda && timeout 100 ../../carry/cuda.test -test.v -test.run "$SUITE" -test.timeout 95s > $W/cuda-test-ring.log 2>&1; echo "ring tests: rc=$? ($((SECONDS - t0)) s)" >> $W/suite-rc.txt ) &
sp=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
o=${arts%%:*}; q=${arts#*:}
wait $sp
cat $W/suite-rc.txt | tee -a $summary
grep -E -- "^--- (PASS|FAIL|SKIP)" $W/cuda-test-ring.log | tee -a $summary
grep -E -B2 -A10 -- "--- FAIL|panic" $W/cuda-test-ring.log | head -40 | tee -a $summary
grep -E "attention_ring_step_kv16 " $W/cuda-test-ring.log | tee -a $summary
db() { # label art depths modes limit
	local t0=$SECONDS lim=$(( $5 < $(left) - 5 ? $5 : $(left) - 5 ))
	[ $lim -gt 20 ] || { echo "$1: skipped (time)" | tee -a $summary; return; }
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$2 HORIZON_BENCH_DEPTHS=$3 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_MODES=$4 timeout $lim ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x -test.v) > $W/$1.log 2>&1
	echo "$1: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark.*tok/s|FAIL|panic|differ" $W/$1.log | tee -a $summary
}
db qwen-a $q 1,2048,8064 graph-full,graph-full-attring 90
db olmoe-a $o 1,2048,3968 graph-full,graph-full-attring 50
db qwen-b $q 1,2048,8064 graph-full-attring,graph-full 90
lim=$(( $(left) - 15 ))
if [ $lim -gt 60 ]; then
	t0=$SECONDS
	(cd runtime/cuda && timeout $lim ../../carry/cuda.test -test.v -test.timeout $((lim - 5))s) > $W/cuda-test.log 2>&1
	echo "whole suite: rc=$? ($((SECONDS - t0)) s), $(grep -c '^--- PASS' $W/cuda-test.log) top-level PASS, $(grep -c -- '--- FAIL' $W/cuda-test.log) FAIL" | tee -a $summary
	grep -E -A8 -- "--- FAIL|panic" $W/cuda-test.log | head -30 | tee -a $summary
else
	echo "whole suite: skipped ($lim s)" | tee -a $summary
fi

tar -C $W -czf $R/logs.tgz . 2>/dev/null
echo "done at $SECONDS s"
