#!/usr/bin/env bash
# session 26, last lease: the whole CUDA suite on the build (PDL the batched prefill's default, the
# prefill scope, the MatMulParts test fix) beside the artifacts; then, on an H200 only, the ttft-v1 edition with the new defaults; then one decode attention launch
# at depth 8,064 (Qwen shape, FP16 KV) under Nsight Compute's full set; then a 64-token prefill profile. Everything under a wall deadline (DEADLINE s from the start).
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/c3; mkdir -p $W
export OUT=$W
DEADLINE=${DEADLINE:-570}
left() { echo $((DEADLINE - SECONDS)); }
summary=$W/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
# 1. the whole suite beside the artifacts
h200_suite ${SUITE_LIMIT:-300} &
sp=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
q=${arts#*:}
wait $sp
grep -E -- "^--- (FAIL|SKIP)" $W/cuda-test.log | head -20 | tee -a $summary
# 2. the ttft edition, alone on the GPU (H200 only: the issue's target is stated on the H200)
case "$gpu" in
*H200*)
	if [ $(left) -gt 200 ]; then
		t0=$SECONDS
		(OUT=$R bash scripts/device-campaign.sh ttft --budget $(( $(left) - 15 )) --reserve 60) > $W/campaign.log 2>&1
		echo "ttft campaign: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
		tail -5 $W/campaign.log | tee -a $summary
	else
		echo "ttft campaign: skipped ($(left) s left)" | tee -a $summary
	fi ;;
*) echo "ttft campaign: skipped (not an H200: $gpu)" | tee -a $summary ;;
esac
# 3. one decode attention launch at depth 8,064, Nsight Compute's full set
D=8064
ids=$(seq 0 $((D - 1)) | awk '{printf "%s%d", (NR > 1 ? "," : ""), $1 % 1000 + 1}')
t0=$SECONDS
[ $(left) -gt 60 ] && timeout $(( $(left) < 150 ? $(left) - 20 : 130 )) ncu --set full --clock-control none -k regex:'^attention_step_kv16$' --launch-skip 30 --launch-count 1 \
	--csv --page details carry/horizon-bench-cuda generate --device cuda --artifact $q --capacity 0 --executor grouped-v1 --tokens 3 \
	--prompt-ids $ids --kv fp16 --prefill batched --max-context $((D + 8)) > $W/ncu-attention-d$D.csv 2> $W/ncu-attention.err
echo "ncu attention d$D: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E '"(Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|L2 Hit Rate|Registers Per Thread|Compute \(SM\) Throughput|Executed Ipc Active|Issue Slots Busy|Warp Cycles Per Issued Instruction|One or More Eligible|L1/TEX Hit Rate|Mem Busy|Max Bandwidth)"' $W/ncu-attention-d$D.csv | awk -F'","' '{print $(NF-2)" = "$NF" "$(NF-1)}' | tee -a $summary
# 4. where a 64-token OLMoE prefill's time goes (the read-back path, waits around every instruction)
o=${arts%%:*}
if [ $(left) -gt 40 ]; then
	t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$o HORIZON_BENCH_PROMPTS=64 HORIZON_BENCH_PREFILL_MODES=batched-tc,batched-tc-nopdl HORIZON_BENCH_PREFILL_PROFILE=1 \
		timeout $(( $(left) - 10 )) ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) > $W/prefill-profile.log 2>&1
	echo "prefill profile: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "prompt-tok/s|profile" $W/prefill-profile.log | tee -a $summary
fi
cp $summary $R/summary.txt
tar -C $W -czf $R/logs.tgz . 2>/dev/null
echo "done at $SECONDS s"
