#!/usr/bin/env bash
# attention-h200.sh: the H200 checks and measurements of the decode
# attention (attention_split, kernels/step.cuh: one launch, heads x
# ATT_SPLIT blocks over contiguous ranges of positions, the last block of a
# head merging the partials) in one device call on one GPU. Build here with
# `make gpu-bins` (carry/bins.tar.xz). For a before/after in the same call,
# also carry an older build's test binary as carry/base/cuda.test.xz (for
# example `xz -k carry/cuda.test` from an earlier `make gpu-bins`, moved
# there). Then on the GPU machine, from the repository root:
#
#   bash scripts/attention-h200.sh
#
# 1. kernels.test, then the whole CUDA suite unless SKIP_SUITE=1 (SUITE: only
#    the tests it matches):
#    TestStepperMatchesOps compares every captured step mode (graph-full,
#    graph-wait, graph-segmented, persistent) bit for bit with op by op on
#    both tiny models, both schemes, every executor; the conformance suite
#    compares Attention with the float64 reference;
# 2. INT4 artifacts of the OLMoE-1B-7B (seed 924) and Qwen1.5-MoE-A2.7B
#    (seed 1) shapes in /dev/shm;
# 3. with a base binary: its BenchmarkDecodeModes (graph-full) and its
#    BenchmarkDecodeDepth (graph-full, BASE_DEPTHS, default 32,512,1900)
#    -> bench-base.log;
# 4. this build's BenchmarkDecodeModes (MODES, default graph-full and
#    persistent: 256 tokens after a 44-token prompt) and BenchmarkDecodeDepth
#    (128 tokens after prompts of DEPTHS, default 32,512,1900,3968; graph-full
#    and persistent, tokens compared) -> bench-modes.log, bench-depth.log.
# summary.txt has the one-line results. BENCH=0 stops after the suite;
# DEPTH_BENCH narrows step 4's depth benchmark (for example
# 'BenchmarkDecodeDepth/.*/graph-full/').
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/attention-h200}
DEPTHS=${DEPTHS:-32,512,1900,3968}
BASE_DEPTHS=${BASE_DEPTHS:-32,512,1900}
MODES=${MODES:-graph-full|persistent}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"
. scripts/h200-lib.sh
h200_unpack
(cd kernels && timeout 30 ../carry/kernels.test -test.v) >"$OUT/kernels-test.log" 2>&1
echo "kernels-test: rc=$?" | tee -a "$summary"
if [ -n "${SUITE:-}" ]; then # a narrower suite: the tests whose names match SUITE
	t0=$SECONDS
	(cd runtime/cuda && timeout 260 ../../carry/cuda.test -test.run "$SUITE" -test.v -test.timeout 250s) >"$OUT/cuda-test.log" 2>&1
	echo "cuda-test ($SUITE): rc=$? ($((SECONDS - t0)) s), $(grep -c '^--- PASS' "$OUT/cuda-test.log") top-level PASS, $(grep -c -- '--- FAIL' "$OUT/cuda-test.log") FAIL" | tee -a "$summary"
	grep -E -A8 -- "--- FAIL|panic" "$OUT/cuda-test.log" | head -40 | tee -a "$summary"
elif [ "${SKIP_SUITE:-0}" != 1 ]; then
	h200_suite 280
fi
[ "${BENCH:-1}" = 0 ] && exit 0
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
bench() { # bench BINARY LOG LABEL LIMIT ARGS...
	local bin=$1 log=$2 label=$3 limit=$4 t0=$SECONDS
	shift 4
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" timeout "$limit" "$bin" -test.run '^$' -test.benchtime 1x -test.v \
		-test.timeout "$((limit - 10))s" "$@") >>"$log" 2>&1
	echo "$label: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
}
if [ -f carry/base/cuda.test.xz ]; then
	xz -dkf carry/base/cuda.test.xz && chmod +x carry/base/cuda.test # xz keeps the archive's mode, not the binary's
	bench ../../carry/base/cuda.test "$OUT/bench-base.log" "base BenchmarkDecodeModes" 150 \
		-test.bench 'BenchmarkDecodeModes/.*/^graph-full$'
	HORIZON_BENCH_DEPTHS="$BASE_DEPTHS" bench ../../carry/base/cuda.test "$OUT/bench-base.log" "base BenchmarkDecodeDepth" 200 \
		-test.bench 'BenchmarkDecodeDepth/.*/graph-full/'
	grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-base.log" | sed 's/^/base /' | tee -a "$summary"
fi
bench ../../carry/cuda.test "$OUT/bench-modes.log" "BenchmarkDecodeModes" 200 \
	-test.bench "BenchmarkDecodeModes/.*/^($MODES)\$"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-modes.log" | tee -a "$summary"
HORIZON_BENCH_DEPTHS="$DEPTHS" bench ../../carry/cuda.test "$OUT/bench-depth.log" "BenchmarkDecodeDepth" 300 \
	-test.bench "${DEPTH_BENCH:-BenchmarkDecodeDepth}"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-depth.log" | tee -a "$summary"
rm -f "$OUT"/synth-*.log "$OUT"/prepare-*.log
exit 0
