#!/usr/bin/env bash
# kernel-tunings-h200.sh: issue 14's row-kernel launch choices measured in one device call.
# Build here with `make gpu-bins`, then on the GPU machine from the repository root:
#
#   bash scripts/kernel-tunings-h200.sh
#
# 1. TestStepperTunings (every tuning bit for bit against op by op) -> cuda-test.log;
# 2. BenchmarkMatVecF16 (the attention, lm_head and shared-expert shapes with each rows-per-task
#    variant) and BenchmarkExperts (grouped gate/up and down, staged or global activations)
#    -> bench-kernels.log;
# 3. INT4 artifacts of both full shapes (ART_ROOT, default /dev/shm/persistent); BenchmarkDecodeModes
#    for MODES, COUNT times each (256 tokens, full residency, tokens compared) -> bench-modes.log.
# summary.txt has the one-line results.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/kernel-tunings}
MODES=${MODES:-graph-full|graph-full-downg|graph-full-f16r1|graph-full-f16r4|graph-full-downg-f16r1}
COUNT=${COUNT:-2}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
t0=$SECONDS
(cd runtime/cuda && timeout 150 ../../carry/cuda.test -test.run 'TestStepperTunings' -test.v -test.timeout 140s) >"$OUT/cuda-test.log" 2>&1
echo "TestStepperTunings: rc=$? ($((SECONDS - t0)) s), $(grep -c -- '--- PASS' "$OUT/cuda-test.log") PASS, $(grep -c -- '--- FAIL' "$OUT/cuda-test.log") FAIL" | tee -a "$summary"
grep -E -A8 -- "--- FAIL|panic" "$OUT/cuda-test.log" | head -40 | tee -a "$summary"
t0=$SECONDS
(cd runtime/cuda && timeout 150 ../../carry/cuda.test -test.run '^$' \
	-test.bench 'BenchmarkMatVecF16|BenchmarkExperts/.*/(gateup|down|down-global|t-gateup|t-down|t-down-global|t-pair|t-pair-global)$' \
	-test.benchtime 20x -test.timeout 140s) >"$OUT/bench-kernels.log" 2>&1
echo "kernel benchmarks: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark" "$OUT/bench-kernels.log" | awk '{print $1, $(NF-1), $NF, $5, $6}' | tee -a "$summary"
h200_artifacts "${ART_ROOT:-/dev/shm/persistent}" olmoe-1b-7b:924 qwen15-moe-a27b:1
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" timeout 300 ../../carry/cuda.test -test.run '^$' \
	-test.bench "BenchmarkDecodeModes/.*/^($MODES)\$" -test.benchtime 1x -test.count "$COUNT" -test.v -test.timeout 290s) >"$OUT/bench-modes.log" 2>&1
echo "BenchmarkDecodeModes: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-modes.log" | tee -a "$summary"
rm -f "$OUT"/synth-*.log
exit 0
