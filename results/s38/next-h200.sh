#!/usr/bin/env bash
# The first call of the next H200 lease (sessions 36-38 got none). carry ["carry/bins.tar.xz",
# "carry/jit-cache.tar.xz", "carry/llamacpp-src.tar.xz", "carry/llamacpp-src.commit",
# "carry/llamacpp"] (65.5 MB with the tree after `make device-aside`, under 64 MiB); needs_h200.
# Rebuild the binaries first (`make gpu-bins` at 2ef14e5 or later): session 38's carry/bins.tar.xz
# (6cfd9ef) has no `run --prepare-only`, so step 4's preparation would fail there (the campaign
# calls would then prepare the artifacts themselves). No kernel changed since 6cfd9ef, so the
# carried JIT cache still matches.
#   1. the driver's JIT cache from session 38 (scripts/jit-cache.sh; ~110 s of PTX compile spared
#      when the driver matches, 580.159.04 on the H100s);
#   2. the GPU tests of what no H200 has run (sessions 35-37's code: results/s38/call1.sh's list and
#      results/h100-s36/call5.sh's) while the llama.cpp peer builds on the CPUs (236 s, -j 15);
#   3. the llama.cpp peer on both shapes (scripts/llamacpp/llamacpp-h200.sh: pp 16..4096 at depth 0,
#      tg128 at each contract depth), packed as llamacpp-peer.tar.gz; the GGUFs stay in /dev/shm;
#   4. the JIT cache back when it grew (jit-cache.tar.xz: put it in carry/);
#   meanwhile (after the tests, beside the build) the ttft, prefill and depth campaigns' artifacts
#   (device-campaign.sh --prepare-only), so that the campaigns' calls start measuring at once.
# Then, on the warm machine (each resumable; the peer is one call earlier in the same lease):
#   bash scripts/device-campaign.sh ttft prefill --budget 575
#   bash scripts/device-campaign.sh prefill depth --budget 575      (until both are back)
# and here: make unpack-edition ARCHIVE=... for each, then
#   horizon-bench ceilings --peer <peer>/llama-bench.jsonl editions/prefill-v1 editions/depth-v1
#   DEADLINE=570 bash results/s38/next-h200.sh
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
# TESTS (the -test.run alternation, default the list below), TESTS_EXTRA (added to it) and
# TEST_LIMIT (s) let a later session's wrapper choose its tests (results/s39/call1.sh,
# results/s40/call1.sh).
TEST_LIMIT=${TEST_LIMIT:-220}
(cd runtime/cuda && timeout "$TEST_LIMIT" ../../carry/cuda.test -test.v -test.timeout "$((TEST_LIMIT - 5))s" \
	-test.run "${TESTS:-TestFreshBackendRunsTheDefaultTuning|TestDeviceRoutedPrefillOnDevice|TestBatchedPrefillTensorCores|TestStepperMatchesOps|TestExpertActivationsOnDevice|TestAttentionTiled|TestKV16OnDevice|TestExecutorsBitIdentical|TestStepperTunings}${TESTS_EXTRA:+|$TESTS_EXTRA}") >/tmp/tests.log 2>&1
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
