#!/usr/bin/env bash
# attention-h200.sh: the H200 checks and measurements of the split decode
# attention (attention_scores_step + attention_pv_step, kernels/step.cuh) in
# one device call on one GPU. Build here from a clean clone as for
# persistent-h200.sh (carry/cuda.test, carry/kernels.test,
# carry/horizon-bench-cuda, packed as carry/bins.tar.xz), then on the GPU
# machine, from the repository root:
#
#   bash scripts/attention-h200.sh
#
# 1. the whole CUDA suite: TestStepperMatchesOps compares every captured
#    step mode (graph-full, graph-wait, graph-segmented, persistent) bit for
#    bit with op by op, whose attention is still one block per head
#    (attention_head), on both tiny models, both schemes, every executor;
# 2. INT4 artifacts of the OLMoE-1B-7B (seed 924) and Qwen1.5-MoE-A2.7B
#    (seed 1) shapes in /dev/shm;
# 3. BenchmarkDecodeModes (graph-full, persistent, persistent traced:
#    256 tokens after a 44-token prompt) and BenchmarkDecodeDepth (128
#    tokens after prompts of DEPTHS, default 32,512,1900; graph-full and
#    persistent, tokens compared).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/attention-h200}
DEPTHS=${DEPTHS:-32,512,1900}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$OUT/profile"
summary="$OUT/summary.txt"
: >"$summary"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"
. scripts/h200-lib.sh
h200_unpack
(cd kernels && timeout 30 ../carry/kernels.test -test.v) >"$OUT/kernels-test.log" 2>&1
echo "kernels-test: rc=$?" | tee -a "$summary"
if [ "${SKIP_SUITE:-0}" != 1 ]; then
	h200_suite 260
fi
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" HORIZON_PROFILE_DIR="$prof" timeout 200 ../../carry/cuda.test -test.run '^$' \
	-test.bench 'BenchmarkDecodeModes/.*/^(graph-full|persistent|persistent-traced)$' -test.benchtime 1x -test.v -test.timeout 190s) >"$OUT/bench-modes.log" 2>&1
echo "BenchmarkDecodeModes: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-modes.log" | tee -a "$summary"
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" HORIZON_BENCH_DEPTHS="$DEPTHS" timeout 200 ../../carry/cuda.test -test.run '^$' \
	-test.bench 'BenchmarkDecodeDepth' -test.benchtime 1x -test.v -test.timeout 190s) >"$OUT/bench-depth.log" 2>&1
echo "BenchmarkDecodeDepth: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-depth.log" | tee -a "$summary"
for f in "$OUT"/profile/*.md; do
	[ -f "$f" ] && { echo "== $(basename "$f")"; cat "$f"; } | tee -a "$summary"
done
exit 0
