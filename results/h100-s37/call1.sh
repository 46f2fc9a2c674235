#!/usr/bin/env bash
# Session 37, call 1 (an H100; no H200 came), binaries of 7770d10 (the request's last step
# launches no step ahead):
#   1. ttft-v1 again (scripts/device-campaign.sh ttft), to compare with session 36's H100 ttft-v1
#      (results/h100-s36/call6, binaries of 81d9591): the lookahead step left after each
#      request's last token ran into the next request's prefill;
#   2. the GPU's device-to-device copy rate (BenchmarkHBMCopy);
#   3. BenchmarkPrefillModes (a16r, FP16 KV) on the contract's first prompt (p01-astronomy's ids,
#      repeated to length) against the benchmark's spread ids at 57 and 64 tokens (OLMoE);
#   4. while DEADLINE (s) leaves 130 s: the per-instruction profile of an OLMoE decode step
#      (scripts/instruction-profile-h200.sh, HBM time at 3.08 TB/s).
# carry ["carry/bins.tar.xz"].
#   bash results/h100-s37/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
bash scripts/device-campaign.sh ttft --budget "${TTFT_BUDGET:-330}"
echo "ttft done at $SECONDS s" | tee -a "$O/status.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$O/copy.txt"
(cd runtime/cuda && timeout 60 ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkHBMCopy -test.benchtime 5x) 2>&1 |
	grep -E "^Benchmark|FAIL|panic" | tee -a "$O/copy.txt"
. scripts/h200-lib.sh
R=$O
summary=$O/copy.txt
mkdir -p /tmp/arts
OUT=/tmp/arts h200_artifacts /dev/shm/persistent olmoe-1b-7b:924
export HORIZON_BENCH_KV=fp16
LENGTHS=57,64 MODES=batched-tc-a16r h200_prefill_bench spread ../../carry/cuda.test 90
HORIZON_BENCH_PROMPT_IDS=$PWD/results/h100-s36/p01-astronomy-ids.txt LENGTHS=57,64 MODES=batched-tc-a16r \
	h200_prefill_bench text ../../carry/cuda.test 90
echo "benches done at $SECONDS s" | tee -a "$O/copy.txt"
if [ $((${DEADLINE:-550} - SECONDS)) -ge 130 ]; then
	ART_ROOT=/dev/shm/persistent HBM_TBS=3.08 OUT=/tmp/prof-olmoe bash scripts/instruction-profile-h200.sh olmoe-1b-7b:924 >/dev/null 2>&1
	cp /tmp/prof-olmoe/instruction-profile.tar.gz "$O/prof-olmoe.tar.gz"
	cat /tmp/prof-olmoe/summary.txt >>"$O/copy.txt"
fi
echo "done at $SECONDS s" | tee -a "$O/copy.txt"
