#!/usr/bin/env bash
# Session 39's first call of a lease: results/s38/next-h200.sh with session 39's GPU tests added
# (TestMatMulA16 and TestDenseActivationsOnDevice: the declared FP16 dense activations, which
# ttft.yaml's and prefill.yaml's FP16 twins now declare) and 40 s more for the tests (the carried
# JIT cache lacks the rebuilt matmul_tc module). carry ["carry/bins.tar.xz",
# "carry/jit-cache.tar.xz", "carry/llamacpp-src.tar.xz", "carry/llamacpp-src.commit",
# "carry/llamacpp"] after `make gpu-bins` and `make device-aside`; needs_h200 for the editions
# (on an H100 the tests and the peer still tell).
#   DEADLINE=570 bash results/s39/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
DEADLINE=${DEADLINE:-570}
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
bash scripts/jit-cache.sh restore | tee "$O/tests-summary.txt"
(
	t0=$SECONDS
	carry/llamacpp/build.sh carry/llamacpp-src.tar.xz /tmp/llamacpp-peer cuda 15 >/tmp/llamacpp-build.log 2>&1
	echo "build rc=$? after $((SECONDS - t0)) s" >>/tmp/llamacpp-build.log
) &
bp=$!
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a "$O/tests-summary.txt"
(cd runtime/cuda && timeout 260 ../../carry/cuda.test -test.v -test.timeout 255s \
	-test.run 'TestFreshBackendRunsTheDefaultTuning|TestDeviceRoutedPrefillOnDevice|TestBatchedPrefillTensorCores|TestStepperMatchesOps|TestExpertActivationsOnDevice|TestAttentionTiled|TestKV16OnDevice|TestExecutorsBitIdentical|TestStepperTunings|TestMatMulA16|TestDenseActivationsOnDevice') >/tmp/tests.log 2>&1
echo "tests: rc=$? at $SECONDS s" | tee -a "$O/tests-summary.txt"
grep -E -- "^--- |^    --- FAIL|_test.go:[0-9]+:" /tmp/tests.log | grep -v "^    --- PASS" | head -40 | tee -a "$O/tests-summary.txt"
(cd runtime/cuda && timeout 60 ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkHBMCopy -test.benchtime 5x) 2>&1 |
	grep -E "^Benchmark|FAIL|panic" | tee -a "$O/tests-summary.txt"
if grep -q -- "--- FAIL" /tmp/tests.log; then
	echo "tests failed: no peer run, no edition" | tee -a "$O/tests-summary.txt"
	kill $bp 2>/dev/null
	bash scripts/jit-cache.sh save "$O"
	exit 1
fi
# the campaigns' artifacts (~2 min on a fresh machine) while the build goes on: nothing is timed
# until the peer's llama-bench, which waits for both
pb=$((DEADLINE - SECONDS - 200))
[ "$pb" -ge 60 ] || pb=60
bash scripts/device-campaign.sh ttft prefill depth --prepare-only --out /tmp/prepare-out --budget "$pb" >/tmp/prepare.log 2>&1 &
pp=$!
wait $bp
grep -E '^build' /tmp/llamacpp-build.log | tee -a "$O/tests-summary.txt"
wait $pp
echo "artifacts: rc=$? at $SECONDS s" | tee -a "$O/tests-summary.txt"
grep -E "prepared|failed|pending" /tmp/prepare-out/status.txt | tee -a "$O/tests-summary.txt"
mkdir -p /tmp/peer
OUT=/tmp/peer LLAMACPP_BUDGET_S=$((DEADLINE - SECONDS - 30)) bash scripts/llamacpp/llamacpp-h200.sh
tar -czf "$O/llamacpp-peer.tar.gz" -C /tmp peer
cat /tmp/peer/summary.txt
bash scripts/jit-cache.sh save "$O" | tee -a "$O/tests-summary.txt"
echo "done at $SECONDS s" | tee -a "$O/tests-summary.txt"
