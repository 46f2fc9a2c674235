#!/usr/bin/env bash
# The next call (session 37's call 5 ran an earlier form: its edition knobs sized the KV cache too
# small for ALTERNATE, and its first bench hit a 30 s timeout on a cold machine). What separates an edition's prefill_seconds from BenchmarkPrefillModes'
# (call 2's ttft-v1 against call 4's benchmark: 1.27-1.40x at 41-106 tokens). One OLMoE
# prompt of 57 tokens (p01-astronomy's ids), FP16 KV, the benchmark with its editionKnobs
# turned on one at a time (runtime/cuda/matmul_tc_test.go). carry ["carry/bins.tar.xz"].
#   bash results/h100-s37/next-prefill-bisect.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
O=${OUT:-/tmp/out}
R=$O
summary=$O/summary.txt
: >"$summary"
h200_unpack
mkdir -p /tmp/arts
OUT=/tmp/arts h200_artifacts /dev/shm/persistent olmoe-1b-7b:924
export HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PROMPT_IDS=$PWD/results/h100-s36/p01-astronomy-ids.txt LENGTHS=57
MODES=batched-tc-a16r h200_prefill_bench base ../../carry/cuda.test 90
HORIZON_BENCH_DECODE=128 MODES=batched-tc-a16r h200_prefill_bench decode ../../carry/cuda.test 30
HORIZON_BENCH_DECODE=128 HORIZON_BENCH_ALTERNATE=1 MODES=batched-tc-a16r h200_prefill_bench alt ../../carry/cuda.test 30
HORIZON_BENCH_DECODE=128 HORIZON_BENCH_ALTERNATE=1 HORIZON_BENCH_TRACE=1 MODES=batched-tc-a16r h200_prefill_bench trace ../../carry/cuda.test 30
HORIZON_BENCH_DECODE=128 HORIZON_BENCH_ALTERNATE=1 HORIZON_BENCH_TRACE=1 HORIZON_BENCH_EXPERT_ACT=fp16 MODES=batched-tc \
	h200_prefill_bench declared ../../carry/cuda.test 30
HORIZON_BENCH_DECODE=128 HORIZON_BENCH_ALTERNATE=1 HORIZON_BENCH_TRACE=1 HORIZON_BENCH_EXPERT_ACT=fp16 HORIZON_BENCH_VRAM=1 \
	MODES=batched-tc h200_prefill_bench vram ../../carry/cuda.test 30
echo "done at $SECONDS s" | tee -a "$summary"
