#!/usr/bin/env bash
# Session 36's first device call (an H100: no H200 came). carry ["carry/bins.tar.xz",
# "carry/llamacpp-src.tar.xz", "carry/llamacpp-src.commit", "carry/llamacpp"] (docs/peers.md):
#   1. the llama.cpp peer's CUDA build (carry/llamacpp/build.sh, sm_90), on the CPUs in the
#      background while
#   2. the GPU tests of what changed after session 35's call 1 run (results/prefill-s35/call4.sh:
#      TestExpertActivationsOnDevice with its restated tolerance, the tensor-core prefill attention
#      as the default over FP16 caches);
#   3. then llama-bench on the OLMoE-1B-7B shape (scripts/llamacpp/llamacpp-h200.sh: pp 16..4096,
#      tg128 at depths 0, 512, 2048, 3968) with what is left of the call. The build and the GGUF
#      stay on the machine for a second call while it is warm.
#   DEADLINE=570 bash results/h100-s36/call1.sh
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
OUT=/tmp/s36-tests LIMIT=110 bash results/prefill-s35/call4.sh
cp /tmp/s36-tests/summary.txt "$O/tests-summary.txt"
echo "tests done at $SECONDS s; waiting for the llama.cpp build" | tee -a "$O/tests-summary.txt"
# the build gets what is left less ~150 s for the OLMoE GGUF and a first llama-bench run
while kill -0 $bp 2>/dev/null && [ $((DEADLINE - SECONDS)) -gt 150 ]; do sleep 5; done
if kill -0 $bp 2>/dev/null; then
	echo "build still running at $SECONDS s: left running for the next call on this machine" | tee -a "$O/tests-summary.txt"
	tail -3 /tmp/llamacpp-peer/build.log 2>/dev/null | cut -c1-300 | tee -a "$O/tests-summary.txt"
	exit 0
fi
grep -E '^build' /tmp/llamacpp-build.log | tee -a "$O/tests-summary.txt"
LLAMACPP_MODELS_LIST="olmoe-1b-7b:924:0,512,2048,3968" LLAMACPP_BUDGET_S=$((DEADLINE - SECONDS - 5)) \
	bash scripts/llamacpp/llamacpp-h200.sh
echo "done at $SECONDS s" | tee -a "$O/tests-summary.txt"
