#!/usr/bin/env bash
# The next H200 call after session 35 (make gpu-bins, make device-aside; carry ["carry/bins.tar.xz"];
# ask with needs_h200): the GPU tests of what changed after session 35's call 1 (call4.sh: the
# restated TestExpertActivationsOnDevice and the tensor-core prefill attention as the default over
# FP16 caches), then ttft-v1 and prefill-v1 re-made with their -kv16-a16 configurations
# (scripts/device-campaign.sh, resumable: call it again on the warm machine with
# `bash scripts/device-campaign.sh prefill depth --budget 575` until both are back, then depth-v1).
#   DEADLINE=560 bash results/prefill-s35/next-h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
DEADLINE=${DEADLINE:-560}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# The tests' summary (their failure lines) is the one file they add: device-campaign.sh may return
# up to 7 of the 8 files a call brings back.
OUT=/tmp/s35-tests LIMIT=110 bash results/prefill-s35/call4.sh
cp /tmp/s35-tests/summary.txt "$OUT/tests-summary.txt"
grep -q -- "--- FAIL" /tmp/s35-tests/tests.log && { echo "tests failed: no edition"; exit 1; }
exec bash scripts/device-campaign.sh ttft prefill --budget $((DEADLINE - SECONDS - 5))
