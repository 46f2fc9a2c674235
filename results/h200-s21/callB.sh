#!/usr/bin/env bash
# session 21, call B (the new bins: carry carry/bins.tar.xz carry/s21): the whole CUDA suite (the
# first with auto prefill batched on CUDA and the int4 ring the default; tcRing2's same-bits
# cases), then BenchmarkPrefillModes default (ring) / ring2 / noring with the profile, on the
# seed-1 INT4 artifacts call A's campaign left in /dev/shm (prepared again if absent).
set -u
summary=$OUT/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
# The test binary's ~45 s start (session 20): the driver JIT of ~14 MB of PTX? Twice: the second
# start shows whether the driver's compute cache keeps it.
for i in 1 2; do t0=$(date +%s%N); (cd runtime/cuda && ../../carry/cuda.test -test.run '^$' >/dev/null 2>&1); echo "cuda.test start $i: $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a $summary; done
du -sh ~/.nv/ComputeCache 2>&1 | tee -a $summary
h200_suite 270
xz -9 -T4 $OUT/cuda-test.log
A=/dev/shm/horizon-artifacts/artifacts
arts=$A/synthetic-olmoe-1b-7b-seed1-int4:$A/synthetic-qwen15-moe-a27b-seed1-int4
[ -f $A/synthetic-olmoe-1b-7b-seed1-int4/artifact.json ] || { h200_artifacts /dev/shm/persistent olmoe-1b-7b:1 qwen15-moe-a27b:1; }
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$arts HORIZON_BENCH_PROMPTS=16,64 \
	HORIZON_BENCH_PREFILL_MODES=batched-tc,batched-tc-ring2,batched-tc-narrow,batched-tc-ring2-narrow,batched-tc-noring HORIZON_BENCH_PREFILL_PROFILE=1 \
	timeout $((585 - SECONDS)) ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) > $OUT/bench.log 2>&1
echo "BenchmarkPrefillModes: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
grep -E "prompt-tok/s|within" $OUT/bench.log | tee -a $summary
