#!/usr/bin/env bash
# Session 34's second device call: Nsight Compute on a 512-token OLMoE prefill, the default against
# the row-shift FP16 build (batched-tc-a16r): the grouped kernels' details (two layers: gate|up and
# down, after the warm-up's 2 x 16 launches) and every kernel's time (ALL_KERNELS=1).
# carry ["carry/bins.tar.xz"].
#   bash results/prefill-s34/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
MODES="${MODES:-batched-tc batched-tc-a16r}" PROMPT=${PROMPT:-512} COUNT=4 SKIP=32 ALL_KERNELS=1 NCU_LIMIT=200 \
	OUT=$R/p512 bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
