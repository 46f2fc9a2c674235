#!/usr/bin/env bash
# tunings-h200.sh: the captured step's launch tunings of issue 14 (fused routed experts, router and
# route_step in one launch, the down kernel's loads ahead of its wait, now the default; graph-full-late
# is the wait first) checked and measured in one
# device call. Build here with `make gpu-bins`, then on the GPU machine from the repository root:
#
#   bash scripts/tunings-h200.sh
#
# 1. the CUDA tests named by SUITE (default: the steppers' bit-for-bit tests, TestStepperTunings
#    among them, and the kernels' resources) -> cuda-test.log; SUITE='^$' runs none (and leaves
#    a cuda-test.log already in OUT alone);
# 2. INT4 artifacts of both full shapes; BenchmarkDecodeModes for MODES (256 tokens, full residency,
#    tokens compared; BENCH_COUNT=n runs the modes n times in turn) -> bench-modes.log. summary.txt has the one-line results (KEEP_SUMMARY=1
#    appends to an existing one).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/tunings}
SUITE=${SUITE:-TestStepper|TestKernelResources|TestPersistentBuilds}
MODES=${MODES:-graph-full|graph-full-late|graph-full-route|graph-full-fused}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
[ "${KEEP_SUMMARY:-0}" = 1 ] || : >"$summary"
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
# SUITE='^$' runs no test and writes no cuda-test.log (a suite log already in $OUT stays).
if [ "$SUITE" != '^$' ]; then
	t0=$SECONDS
	(cd runtime/cuda && timeout 200 ../../carry/cuda.test -test.run "$SUITE" -test.v -test.timeout 190s) >"$OUT/cuda-test.log" 2>&1
	echo "cuda-test ($SUITE): rc=$? ($((SECONDS - t0)) s), $(grep -c '^--- PASS' "$OUT/cuda-test.log") top-level PASS, $(grep -c -- '--- FAIL' "$OUT/cuda-test.log") FAIL" | tee -a "$summary"
	grep -E -A8 -- "--- FAIL|panic" "$OUT/cuda-test.log" | head -40 | tee -a "$summary"
fi
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" timeout 240 ../../carry/cuda.test -test.run '^$' \
	-test.bench "BenchmarkDecodeModes/.*/^($MODES)\$" -test.benchtime 1x -test.count "${BENCH_COUNT:-1}" -test.v -test.timeout 230s) >"$OUT/bench-modes.log" 2>&1
echo "BenchmarkDecodeModes: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error|tokens agree" "$OUT/bench-modes.log" | tee -a "$summary"
rm -f "$OUT"/synth-*.log
exit 0
