#!/usr/bin/env bash
# Session 41's first call on a fresh H200 (session 40's carry did not survive: no JIT cache, the
# llama.cpp source re-packed from the same commit). Nothing here is timed; it readies the machine
# for results/s41/depth-call.sh, which runs the depth campaign and llama-bench in one call:
#   - the llama.cpp peer's build, with both shapes' synth + F16 conversion beside it and then the
#     Q4_0 quantization, no llama-bench (scripts/llamacpp/llamacpp-h200.sh, LLAMACPP_PREPARE_ONLY=1);
#   - meanwhile the depth campaign's artifacts (device-campaign.sh --prepare-only) and one GPU test
#     that loads every module, so the driver compiles our PTX once (~110 s) outside any timing;
#   - the driver's JIT cache back as jit-cache.tar.xz (put it in carry/ for a later lease).
# carry ["carry/bins.tar.xz", "carry/llamacpp-src.tar.xz", "carry/llamacpp-src.commit", "carry/llamacpp"]
# after `make gpu-bins` and `make device-aside`; needs_h200.
#   DEADLINE=570 bash results/s41/call1.sh
# TESTS (a -test.run pattern) replaces the GPU tests run beside the peer's build.
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
DEADLINE=${DEADLINE:-570}
tar -xJf carry/bins.tar.xz -C carry
bash scripts/jit-cache.sh restore | tee "$O/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a "$O/summary.txt"
TESTS=${TESTS:-TestFreshBackendRunsTheDefaultTuning|TestMatMulA16}
(cd runtime/cuda && timeout 240 ../../carry/cuda.test -test.v -test.timeout 235s \
	-test.run "$TESTS" >/tmp/tests.log 2>&1
echo "tests: rc=$? at $SECONDS s" >>/tmp/tests.log) &
tp=$!
bash scripts/device-campaign.sh depth --prepare-only --out /tmp/prepare-out --budget 300 >/tmp/prepare.log 2>&1 &
pp=$!
mkdir -p /tmp/peer-prep
OUT=/tmp/peer-prep LLAMACPP_PREPARE_ONLY=1 LLAMACPP_BUDGET_S=$((DEADLINE - 40)) bash scripts/llamacpp/llamacpp-h200.sh
echo "peer prepare: rc=$? at $SECONDS s" | tee -a "$O/summary.txt"
tar -czf "$O/llamacpp-prep.tar.gz" -C /tmp peer-prep
wait $tp
grep -E -- "^--- |^    --- FAIL|_test.go:[0-9]+:|tests: rc" /tmp/tests.log | grep -v "^    --- PASS" | head -30 | tee -a "$O/summary.txt"
wait $pp
echo "artifacts: rc=$? at $SECONDS s" | tee -a "$O/summary.txt"
grep -E "prepared|failed|pending" /tmp/prepare-out/status.txt | tee -a "$O/summary.txt"
(cd runtime/cuda && timeout 40 ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkHBMCopy -test.benchtime 5x) 2>&1 |
	grep -E "^Benchmark|FAIL|panic" | tee -a "$O/summary.txt"
bash scripts/jit-cache.sh save "$O" | tee -a "$O/summary.txt"
df -h /dev/shm | tail -1 | tee -a "$O/summary.txt"
echo "done at $SECONDS s" | tee -a "$O/summary.txt"
