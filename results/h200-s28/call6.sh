#!/usr/bin/env bash
# session 28, call 6: is the Qwen step at depth power- or clock-bound? The shared-expert branch gains
# ~12% at depth 1 and nothing at 8,064 (call 5, results/h100-s27), as if both modes met one floor.
# nvidia-smi samples clocks, power and clock-event reasons every 50 ms while BenchmarkDecodeDepth decodes
# 1,024 tokens at depth 1 and at 7,000 (graph-full and -nosfork, both orders; OLMoE graph-full at 1 and
# 2,048), and power.py cuts the samples to each decode window.
# From the repository root on the GPU machine, after `make gpu-bins` here. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c6; mkdir -p $W
DEADLINE=${DEADLINE:-560}
left() { echo $((DEADLINE - SECONDS)); }
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,power.max_limit --format=csv,noheader | tee -a $summary
q='timestamp,clocks.sm,clocks.mem,power.draw.instant,power.limit,temperature.gpu,clocks_event_reasons.active'
nvidia-smi --query-gpu=$q --format=csv,noheader,nounits > /dev/null 2>&1 || q='timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active'
echo "sampling: $q" | tee -a $summary
nvidia-smi --query-gpu=$q --format=csv,noheader,nounits -lms 50 > $W/smi.csv 2>&1 &
smi=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
o=${arts%%:*}; q=${arts#*:}
db() { # label art depths modes limit
	local t0=$SECONDS lim=$(( $5 < $(left) - 5 ? $5 : $(left) - 5 ))
	[ $lim -gt 20 ] || { echo "$1: skipped (time)" | tee -a $summary; return; }
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$2 HORIZON_BENCH_DEPTHS=$3 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_TOKENS=1024 HORIZON_BENCH_MODES=$4 timeout $lim ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x -test.v) > $W/$1.log 2>&1
	echo "$1: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "^Benchmark.*tok/s|FAIL|panic|differ" $W/$1.log | sed -E 's/ +/ /g; s/\t/ /g' | tee -a $summary
}
db qwen-a $q 1,7000 graph-full,graph-full-nosfork 120
db qwen-b $q 1,7000 graph-full-nosfork,graph-full 120
db olmoe $o 1,2048 graph-full 60
kill $smi
python3 results/h200-s28/power.py $W/smi.csv $W/qwen-a.log $W/qwen-b.log $W/olmoe.log 2>&1 | tee -a $summary
tar -C $W -czf $R/logs-c6.tgz . 2>/dev/null
echo "done at $SECONDS s" | tee -a $summary
