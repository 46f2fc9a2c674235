#!/usr/bin/env bash
# The first call of the next H200 lease (session 36 had none). carry ["carry/bins.tar.xz",
# "carry/llamacpp-src.tar.xz", "carry/llamacpp-src.commit", "carry/llamacpp"]; needs_h200.
#   1. The GPU tests of what no H200 has run (results/h100-s36/call5.sh's list) while the
#      llama.cpp peer builds on the CPUs (236 s with -j 15 on the H100 machine, session 36).
#   2. Once the build is done (nothing of ours is timed beside it): the llama.cpp peer on both
#      shapes (scripts/llamacpp/llamacpp-h200.sh: pp 16..4096 at depth 0, tg128 at each contract
#      depth; ~190 s of GGUF preparation and ~40 s of llama-bench on the H100), packed into one
#      file, llamacpp-peer.tar.gz. The GGUFs stay in /dev/shm while the machine is warm.
# Then, on the warm machine, the editions (each call resumable; the peer's numbers are from the same
# lease, one call earlier):
#   bash scripts/device-campaign.sh ttft prefill --budget 575
#   bash scripts/device-campaign.sh prefill depth --budget 575      (until both are back)
# and here, once the editions are unpacked, the side-by-side tables for their results READMEs:
#   horizon-bench ceilings --peer <peer>/llama-bench.jsonl editions/prefill-v1 editions/depth-v1
#   DEADLINE=570 bash results/h100-s36/next-h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
DEADLINE=${DEADLINE:-570}
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
(
	t0=$SECONDS
	carry/llamacpp/build.sh carry/llamacpp-src.tar.xz /tmp/llamacpp-peer cuda 15 >/tmp/llamacpp-build.log 2>&1
	echo "build rc=$? after $((SECONDS - t0)) s" >>/tmp/llamacpp-build.log
) &
bp=$!
OUT=/tmp/next-tests LIMIT=200 bash results/h100-s36/call5.sh
cp /tmp/next-tests/summary.txt "$O/tests-summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader >>"$O/tests-summary.txt"
# the GPU's device-to-device copy rate (GPU-NOTES.md's method; ceilings --gpu/--hbm-tbps on another GPU)
(cd runtime/cuda && timeout 60 ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkHBMCopy -test.benchtime 5x) 2>&1 |
	grep -E "^Benchmark|FAIL|panic" | tee -a "$O/tests-summary.txt"
if grep -q -- "--- FAIL" /tmp/next-tests/tests.log; then
	echo "tests failed: no peer run, no edition" | tee -a "$O/tests-summary.txt"
	kill $bp 2>/dev/null
	exit 1
fi
wait $bp
grep -E '^build' /tmp/llamacpp-build.log | tee -a "$O/tests-summary.txt"
mkdir -p /tmp/peer
OUT=/tmp/peer LLAMACPP_BUDGET_S=$((DEADLINE - SECONDS - 10)) bash scripts/llamacpp/llamacpp-h200.sh
tar -czf "$O/llamacpp-peer.tar.gz" -C /tmp peer
cat /tmp/peer/summary.txt
echo "done at $SECONDS s" | tee -a "$O/tests-summary.txt"
