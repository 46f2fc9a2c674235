#!/usr/bin/env bash
# session 28, call 7: does Qwen's shared-expert branch lose its gain at depth through the attention's
# KV reads? BenchmarkDecodeDepth at depths 1 and 8,064 with the branch and in line, each also with
# tuning.attWindow 64 (a diagnostic: the attention reads the first 64 positions at any depth, while
# the step keeps its deep KV cache, appends and RoPE; tokens change), in two orders. On an H200 also
# the attention candidates for OLMoE at 1 and 2,048 and Qwen's branch variants at 8,064.
# From the repository root on the GPU machine, after `make gpu-bins` here. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c7; mkdir -p $W
DEADLINE=${DEADLINE:-400}
left() { echo $((DEADLINE - SECONDS)); }
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
o=${arts%%:*}; q=${arts#*:}
db() { # label art depths modes limit
	local t0=$SECONDS lim=$(( $5 < $(left) - 5 ? $5 : $(left) - 5 ))
	[ $lim -gt 20 ] || { echo "$1: skipped (time)" | tee -a $summary; return; }
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$2 HORIZON_BENCH_DEPTHS=$3 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_MODES=$4 timeout $lim ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x) > $W/$1.log 2>&1
	echo "$1: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark.*tok/s|FAIL|panic|differ" $W/$1.log | sed -E 's/ +/ /g; s/\t/ /g' | tee -a $summary
}
qm=graph-full,graph-full-nosfork,graph-full-attw64,graph-full-nosfork-attw64
db qwen-a $q 1,8064 $qm 100
db qwen-b $q 1,8064 $(echo $qm | tr ',' '\n' | tac | paste -sd,) 100
case "$gpu" in
*H200*)
	db olmoe-h200 $o 1,2048 graph-full,graph-full-attpf64,graph-full-attpipe-pf128,graph-full 70
	db qwen-h200 $q 8064 graph-full,graph-full-sforkgum1,graph-full-attpipe,graph-full-nosfork,graph-full 70 ;;
esac
tar -C $W -czf $R/logs-c7.tgz . 2>/dev/null
echo "done at $SECONDS s" | tee -a $summary
