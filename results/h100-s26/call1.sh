#!/usr/bin/env bash
# session 26, call 1: GPU checks of the code after f116fa9 (beside the artifacts), BenchmarkPrefillModes on the
# new defaults against PDL/qkv, then decode at depth with and without Qwen's shared-expert fork. Everything under a wall deadline (DEADLINE s from the start).
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c1; mkdir -p $W
export OUT=$W
DEADLINE=${DEADLINE:-585}
left() { echo $((DEADLINE - SECONDS)); }
summary=$W/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
# 1. the GPU tests, beside the artifacts (CPU)
SUITE=${SUITE:-'TestMatMulParts|TestDeviceRoutedPrefillOnDevice|TestTCGroupedKernelChoice|TestTCPreSplitSameBits|TestBatchedPrefillOnDevice|TestBatchedPrefillTensorCores|TestStepperPrefillTimer|TestAttentionTiled|TestKernelResources|TestRouteGroupsTable'}
( t0=$SECONDS; cd runtime/cuda && timeout 170 ../../carry/cuda.test -test.v -test.run "$SUITE" -test.timeout 165s > $W/cuda-test.log 2>&1; echo "suite: rc=$? ($((SECONDS - t0)) s)" >> $W/suite-rc.txt ) &
sp=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
o=${arts%%:*}; q=${arts#*:}
wait $sp
cat $W/suite-rc.txt | tee -a $summary
echo "tests: $(grep -c '^--- PASS' $W/cuda-test.log) top-level PASS, $(grep -c -- '--- FAIL' $W/cuda-test.log) FAIL" | tee -a $summary
grep -E -- "^--- (PASS|FAIL|SKIP)" $W/cuda-test.log | tee -a $summary
grep -E -B2 -A10 -- "--- FAIL|panic" $W/cuda-test.log | head -60 | tee -a $summary
# 2. prefill modes
pb() { # label arts lengths modes limit
	local t0=$SECONDS lim=$(( $5 < $(left) - 5 ? $5 : $(left) - 5 ))
	[ $lim -gt 20 ] || { echo "$1: skipped (time)" | tee -a $summary; return; }
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$2 HORIZON_BENCH_PROMPTS=$3 HORIZON_BENCH_PREFILL_MODES=$4 \
		timeout $lim ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) > $W/$1.log 2>&1
	echo "$1: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "prompt-tok/s|within|FAIL|panic" $W/$1.log | tee -a $summary
}
PM=${PM:-batched-tc,batched-tc-readback-nofd,batched-tc-pdl,batched-tc-qkv,batched-tc-qkv-pdl}
pb prefill $o:$q 64,512,2048 $PM 260
# 3. decode attention variants at depth (FP16 KV, batched prefill)
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 200 > $W/smi.csv 2>&1 &)
db() { # label art depths modes limit
	local t0=$SECONDS lim=$(( $5 < $(left) - 5 ? $5 : $(left) - 5 ))
	[ $lim -gt 20 ] || { echo "$1: skipped (time)" | tee -a $summary; return; }
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$2 HORIZON_BENCH_DEPTHS=$3 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_MODES=$4 timeout $lim ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x -test.v) > $W/$1.log 2>&1
	echo "$1: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark.*tok/s|FAIL|panic|differ" $W/$1.log | tee -a $summary
}
A=${MODES_A:-graph-full,graph-full-nosfork}
B=$(echo $A | tr , '\n' | tac | paste -sd,)
db qwen-a $q 1,2048,8064 $A 100
db olmoe-a $o 1,2048,3968 graph-full 50
db qwen-b $q 1,2048,8064 $B 100
pkill -f "nvidia-smi --query" || true
cp $summary $R/summary.txt
tar -C $W -cJf $R/logs.tar.xz . 2>/dev/null
echo "done at $SECONDS s"
