#!/usr/bin/env bash
# depth-h200.sh: decode at context depth on the GPU, FP32 against FP16 KV cache, in one device
# call. Build here with `make gpu-bins` (carry/bins.tar.xz), then on the GPU machine from the
# repository root:
#
#   bash scripts/depth-h200.sh
#
# 1. INT4 artifacts of both full shapes (ART_ROOT, default /dev/shm/persistent; kept on a warm
#    machine, so a call after prefill-h200.sh reuses them);
# 2. BenchmarkDecodeDepth (runtime/cuda/persistent_test.go) per shape at the depths in
#    OLMOE_DEPTHS / QWEN_DEPTHS, for each KV type in KVS (graph-full steps; fp32 also the
#    persistent kernel, which must give graph-full's tokens): 128 tokens after the depth's
#    prompt, prefilled as PREFILL says (token, batched; default auto: token at a time on CUDA) -> bench-<shape>.log; decode tok/s and
#    the prefill's prompt tok/s per KV type and depth in summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/depth}
KVS=${KVS:-fp32,fp16}
OLMOE_DEPTHS=${OLMOE_DEPTHS:-32,512,2048,3968}
QWEN_DEPTHS=${QWEN_DEPTHS:-32,2048,8064}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >>"$summary"
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
h200_artifacts "${ART_ROOT:-/dev/shm/persistent}" olmoe-1b-7b:924 qwen15-moe-a27b:1
for art in ${arts//:/ }; do
	case $(basename "$art") in
	olmoe*) depths=$OLMOE_DEPTHS ;;
	*) depths=$QWEN_DEPTHS ;;
	esac
	log="$OUT/bench-$(basename "$art").log"
	t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$art HORIZON_BENCH_DEPTHS=$depths HORIZON_BENCH_KV=$KVS \
		HORIZON_BENCH_PREFILL=${PREFILL:-} timeout "${BENCH_LIMIT:-240}" ../../carry/cuda.test \
		-test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x -test.v -test.timeout 0) >"$log" 2>&1
	echo "BenchmarkDecodeDepth $(basename "$art"): rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	grep -E "tok/s|FAIL|differ" "$log" | tee -a "$summary"
done
exit 0
