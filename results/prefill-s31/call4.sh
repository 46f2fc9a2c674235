#!/usr/bin/env bash
# Session 31's last device call, with ~70 s of device time left: only the GPU tests of tc_chunk's
# ldmatrix fragments (5e5ae6d; the ring, two-stage and split-K kernels give the same bits as the
# fragment-direct ones and as each other) on the test models, no bench.
# carry ["carry/bins.tar.xz"];  LIMIT=60 bash results/prefill-s31/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
R=${OUT:-/tmp/out}
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R/summary.txt"
(cd runtime/cuda && timeout "${LIMIT:-60}" ../../carry/cuda.test -test.v \
	-test.run 'TestTCPreSplitSameBits|TestMatmulTC|TestExpertMatMulGroupTC|TestBatchedPrefillTensorCores' \
	-test.timeout "$((${LIMIT:-60} - 3))s") >"$R/tests.log" 2>&1
echo "tests: rc=$? ($SECONDS s)" | tee -a "$R/summary.txt"
grep -E -- "^--- (PASS|FAIL)|^    --- FAIL|panic" "$R/tests.log" | head -20 | tee -a "$R/summary.txt"
