#!/usr/bin/env bash
# Session 33's second call: Nsight Compute on a 64-token OLMoE prefill's grouped int4 launches
# with each stall reason (scripts/ncu-prefill-h200.sh's digest): the gate|up launch and the down
# launch of the default, then the three launches of batched-tc-nogateup. The warm-up prefill's
# launches are skipped (2 or 3 a layer), then two layers' are profiled.
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz"].
#   bash results/prefill-s33/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
OUT=$R/ncu64 ART_ROOT=/dev/shm/persistent MODES=batched-tc PROMPT=64 SKIP=32 COUNT=4 NCU_LIMIT=150 \
	bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
OUT=$R/ncu64-nogu ART_ROOT=/dev/shm/persistent MODES=batched-tc-nogateup PROMPT=64 SKIP=48 COUNT=6 NCU_LIMIT=150 \
	bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
