#!/usr/bin/env bash
# Session 31's third device call (issue 15): does the lean fragment-direct body now beat the ring
# at 256-1,024 prompt tokens (tuning.tcFDAlways, mode batched-tc-fdall, against the default, which
# runs the ring where the pairs average over 32 an expert), and where does a 512-token OLMoE
# prefill's time go (Nsight Compute, every kernel)?
# From the repository root on the GPU machine, after `make gpu-bins` here;
# carry ["carry/bins.tar.xz"].
#   DEADLINE=480 bash results/prefill-s31/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s31c3
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
bench() { # LABEL SECONDS
	local t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$arts HORIZON_BENCH_PROMPTS=${LENGTHS:-256,512,1024} \
		HORIZON_BENCH_PREFILL_MODES=${MODES:-batched-tc,batched-tc-fdall} \
		timeout "$2" ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) >"$R/bench-$1.log" 2>&1
	echo "bench $1: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	grep -E "prompt-tok/s|within" "$R/bench-$1.log" | tee -a "$summary"
}
bench c3a 110
bench c3b 110
left=$((DEADLINE - SECONDS - 10))
if [ "$left" -gt 60 ]; then
	t0=$SECONDS
	OUT=$R/ncu512 MODES=batched-tc ALL_KERNELS=1 PROMPT=512 timeout "$left" bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924 > "$W/ncu512.log" 2>&1
	echo "ncu 512: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	head -30 "$R/ncu512/summary.txt" 2>/dev/null | tee -a "$summary"
fi
echo "done at $SECONDS s" | tee -a "$summary"
