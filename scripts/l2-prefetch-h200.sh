#!/usr/bin/env bash
# l2-prefetch-h200.sh: the captured steps' L2 prefetch branch (issue 14,
# runtime/cuda/step_prefetch.go), checked and measured in one device call on
# one GPU. Build here with `make gpu-bins` (carry/bins.tar.xz), then on the
# GPU machine, from the repository root:
#
#   bash scripts/l2-prefetch-h200.sh
#
# 1. the whole CUDA suite: TestStepperMatchesOps compares every captured
#    step mode bit for bit with op by op and checks that the graph modes'
#    captures have prefetch launches (and op by op and persistent none);
# 2. INT4 artifacts of the OLMoE-1B-7B (seed 924) and Qwen1.5-MoE-A2.7B
#    (seed 1) shapes in /dev/shm;
# 3. BenchmarkDecodeModes: graph-full (prefetch, 24 MiB a fork, evict_last)
#    against graph-full-nol2 (no branch), graph-full-l2normal (normal
#    eviction priority), graph-full-l2-12m and -40m (other budgets) and
#    graph-full-nopdl: 256 tokens after a 44-token prompt, tokens compared;
#    and BenchmarkDecodeDepth's graph-full at DEPTHS (default 32,512,1900).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/l2-prefetch-h200}
DEPTHS=${DEPTHS:-32,512,1900}
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
	h200_suite 200
fi
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" timeout 210 ../../carry/cuda.test -test.run '^$' \
	-test.bench 'BenchmarkDecodeModes/.*/^(graph-full|graph-full-nol2|graph-full-l2normal|graph-full-l2-12m|graph-full-l2-40m|graph-full-nopdl)$' -test.benchtime 1x -test.v -test.timeout 200s) >"$OUT/bench-modes.log" 2>&1
echo "BenchmarkDecodeModes: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-modes.log" | tee -a "$summary"
if [ "$SECONDS" -gt "${DEPTH_BEFORE_S:-420}" ]; then
	echo "BenchmarkDecodeDepth: skipped ($SECONDS s used, DEPTH_BEFORE_S ${DEPTH_BEFORE_S:-420})" | tee -a "$summary"
	exit 0
fi
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" HORIZON_BENCH_DEPTHS="$DEPTHS" timeout 120 ../../carry/cuda.test -test.run '^$' \
	-test.bench 'BenchmarkDecodeDepth/.*/graph-full/' -test.benchtime 1x -test.v -test.timeout 110s) >"$OUT/bench-depth.log" 2>&1
echo "BenchmarkDecodeDepth: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench-depth.log" | tee -a "$summary"
exit 0
