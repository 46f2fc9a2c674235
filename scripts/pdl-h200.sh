#!/usr/bin/env bash
# pdl-h200.sh: programmatic dependent launch in the captured steps (issue
# 14), checked and measured in one device call on one GPU. Build here with
# `make gpu-bins` (carry/bins.tar.xz), then on the GPU machine, from the
# repository root:
#
#   bash scripts/pdl-h200.sh
#
# 1. the whole CUDA suite: TestStepperMatchesOps compares every captured
#    step mode bit for bit with op by op and checks that the graph modes'
#    captures made programmatic dependent launches (and the others none);
# 2. INT4 artifacts of the OLMoE-1B-7B (seed 924) and Qwen1.5-MoE-A2.7B
#    (seed 1) shapes in /dev/shm;
# 3. BenchmarkDecodeModes graph-full (with programmatic dependent launch)
#    against graph-full-nopdl (the same graphs launched plainly, as before):
#    256 tokens after a 44-token prompt, tokens compared; and
#    BenchmarkDecodeDepth's graph-full at DEPTHS (default 32,512,1900).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/pdl-h200}
DEPTHS=${DEPTHS:-32,512,1900}
# BENCH_MODES: the BenchmarkDecodeModes variants, '|'-separated; MODES_S their time limit.
BENCH_MODES=${BENCH_MODES:-graph-full|graph-full-nopdl}
MODES_S=${MODES_S:-150}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"
. scripts/h200-lib.sh
h200_unpack
(cd kernels && timeout 30 ../carry/kernels.test -test.v) >"$OUT/kernels-test.log" 2>&1
echo "kernels-test: rc=$?" | tee -a "$summary"
if [ "${SKIP_SUITE:-0}" != 1 ]; then
	h200_suite 280
fi
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" timeout "$MODES_S" ../../carry/cuda.test -test.run '^$' \
	-test.bench "BenchmarkDecodeModes/.*/^($BENCH_MODES)\$" -test.benchtime 1x -test.v -test.timeout "$((MODES_S - 10))s") >"$OUT/bench-modes.log" 2>&1
echo "BenchmarkDecodeModes: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-modes.log" | tee -a "$summary"
if [ "$SECONDS" -gt "${DEPTH_BEFORE_S:-$((MODES_S + 180))}" ]; then
	echo "BenchmarkDecodeDepth: skipped ($SECONDS s used, DEPTH_BEFORE_S ${DEPTH_BEFORE_S:-$((MODES_S + 180))})" | tee -a "$summary"
	exit 0
fi
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" HORIZON_BENCH_DEPTHS="$DEPTHS" timeout 120 ../../carry/cuda.test -test.run '^$' \
	-test.bench 'BenchmarkDecodeDepth/.*/graph-full/' -test.benchtime 1x -test.v -test.timeout 110s) >"$OUT/bench-depth.log" 2>&1
echo "BenchmarkDecodeDepth: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-depth.log" | tee -a "$summary"
exit 0
