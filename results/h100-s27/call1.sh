#!/usr/bin/env bash
# session 27, call 1. On an H200: the ttft-v1 and prefill-v1 editions re-made with the session 25/26
# prefill defaults (device-campaign.sh, resumable). On any other GPU: the whole CUDA suite beside the
# artifacts, then BenchmarkDecodeDepth on the Qwen shape at depths 1 and 8,064 separating PDL from the
# shared-expert branch (graph-full, -nopdl, -nosfork, -nosfork-nopdl, -attpipe), in both orders.
# Wall deadline DEADLINE s from the start.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c1; mkdir -p $W
DEADLINE=${DEADLINE:-570}
left() { echo $((DEADLINE - SECONDS)); }
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
case "$gpu" in
*H200*)
	t0=$SECONDS
	(bash scripts/device-campaign.sh ttft prefill --budget $(( $(left) - 10 )) --reserve 60) > $W/campaign.log 2>&1
	echo "ttft+prefill campaigns: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	tail -8 $W/campaign.log | tee -a $summary
	cat $R/status.txt 2>/dev/null | tee -a $summary
	tar -C $W -czf $R/logs-c1.tgz . 2>/dev/null
	exit 0 ;;
esac
export OUT=$W
h200_suite 300 &
sp=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
o=${arts%%:*}; q=${arts#*:}
wait $sp
db() { # label art depths modes limit
	local t0=$SECONDS lim=$(( $5 < $(left) - 5 ? $5 : $(left) - 5 ))
	[ $lim -gt 20 ] || { echo "$1: skipped (time)" | tee -a $summary; return; }
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$2 HORIZON_BENCH_DEPTHS=$3 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_MODES=$4 timeout $lim ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x -test.v) > $W/$1.log 2>&1
	echo "$1: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark.*tok/s|FAIL|panic|differ" $W/$1.log | tee -a $summary
}
db qwen-a $q 1,8064 graph-full,graph-full-nopdl,graph-full-nosfork,graph-full-nosfork-nopdl,graph-full-attpipe 130
db qwen-b $q 1,8064 graph-full-attpipe,graph-full-nosfork-nopdl,graph-full-nosfork,graph-full-nopdl,graph-full 130
tar -C $W -czf $R/logs-c1.tgz . 2>/dev/null
echo "done at $SECONDS s"
