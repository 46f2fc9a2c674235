#!/usr/bin/env bash
# session 20, call 2 (fresh machine): the suite's tests call 1's timeout cut off (in the
# background, while the INT4 artifacts are prepared), then BenchmarkPrefillModes batched-tc
# against batched-tc-ring (tuning.tcRing, first measured here) with the per-instruction profile.
set -u
summary=$OUT/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $summary
(SUITE_RUN='TestStepperTunings|TestStepperLookahead|TestStepperOverlap|TestStepperPrefillTimer|TestPrefetchOnDevice' h200_suite 200) &
suite=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
wait $suite
xz -9 -T4 $OUT/cuda-test.log
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$arts HORIZON_BENCH_PROMPTS=16,64,512,2048 \
	HORIZON_BENCH_PREFILL_MODES=batched-tc,batched-tc-ring HORIZON_BENCH_PREFILL_PROFILE=1 \
	timeout $((585 - SECONDS)) ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) > $OUT/bench.log 2>&1
echo "BenchmarkPrefillModes: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E "prompt-tok/s|within" $OUT/bench.log | tee -a $summary
