#!/usr/bin/env bash
# Why an edition's TTFT prefill is slower than BenchmarkPrefillModes (session 36, H100: ttft-v1's
# OLMoE prefill of the 57-token p01-astronomy took 7.7 ms, 7.4k tok/s, where the benchmark's
# 64-token prompt ran at 12.6k tok/s with the same a16r kernels). The contract's prompts on the
# synthetic checkpoints are byte-level text (ids 32..126); the benchmark's ids are spread over the
# vocabulary. ttft-v1's routing traces show the text concentrating on fewer experts, more tokens
# each (OLMoE layer 15: 24 experts, up to 53 of 57 tokens on one). This call times both prompts at
# the same lengths, then profiles the contract prompt's prefill by instruction
# (HORIZON_BENCH_PREFILL_PROFILE; a profiled prefill reads the routing back instead of routing on the
# device, engine.deviceRouting, so its total is not the default's: compare its shares). carry ["carry/bins.tar.xz"] (make gpu-bins: the binaries need
# benchPromptIDs, e74a15b or later). About 200 s with the artifacts made.
#   bash results/h100-s36/next-prefill-prompts.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
OUT=${OUT:-/tmp/out}
R=$OUT
summary=$R/summary.txt
: >"$summary"
h200_unpack
mkdir -p /tmp/arts
OUT=/tmp/arts h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
export HORIZON_BENCH_KV=fp16
LENGTHS=57,64,512 MODES=batched-tc,batched-tc-a16r h200_prefill_bench spread ../../carry/cuda.test 100
HORIZON_BENCH_PROMPT_IDS=$PWD/results/h100-s36/p01-astronomy-ids.txt LENGTHS=57,64,512 MODES=batched-tc,batched-tc-a16r \
	h200_prefill_bench text ../../carry/cuda.test 100
HORIZON_BENCH_PREFILL_PROFILE=1 HORIZON_BENCH_PROMPT_IDS=$PWD/results/h100-s36/p01-astronomy-ids.txt LENGTHS=57 \
	MODES=batched-tc-a16r h200_prefill_bench text-profile ../../carry/cuda.test 60
grep -E "profile" "$R/bench-text-profile.log" | cut -c1-3000 | tee -a "$summary"
