#!/usr/bin/env bash
# Session 35's third device call (on the warm H100 of call 2): BenchmarkPrefillModes over an FP16 KV
# cache at 64, 512 and 1,024 tokens, the default against batched-tc-a16r (the row-shift FP16 expert
# builds, what the declared expert_activations fp16 runs), batched-tc-atc (the tensor-core prefill
# attention) and both, once. carry ["carry/bins.tar.xz"].
#   bash results/prefill-s35/call3.sh
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
OUT=${OUT:-/tmp/out}
R=$OUT W=/tmp/s35c
mkdir -p "$W"
summary=$R/summary.txt
: >"$summary"
h200_unpack
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
export HORIZON_BENCH_KV=fp16
LENGTHS=64,512,1024
MODES=batched-tc,batched-tc-a16r-atc,batched-tc-atc,batched-tc-a16r
h200_prefill_bench c ../../carry/cuda.test $((440 - SECONDS))
echo "done at $SECONDS s" >>"$summary"
