#!/usr/bin/env bash
# Session 30: one device call, whichever card comes. On an H200, call1.sh (depth-v1 re-made alone,
# then the default flip's tests). On an H100 (no edition is made there), session 29's
# next-call.sh, lean (the tests and one order of streaming against the old loads), then Nsight
# Compute on a 64-token OLMoE prefill's grouped int4 kernels and every kernel's time (issue 15).
#   DEADLINE=570 bash results/depth-v1-s30/call-any.sh   (a smaller DEADLINE shortens every part)
set -uo pipefail
cd "$(dirname "$0")/../.."
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
	CAMPAIGN_BUDGET=$((${DEADLINE:-570} - 40)) exec bash results/depth-v1-s30/call1.sh
fi
R=${OUT:-/tmp/out}
D=${DEADLINE:-570}
DEADLINE=$((D > 400 ? 300 : D / 2)) bash results/depth-branch-s29/next-call.sh
mv "$R/summary.txt" "$R/summary-nc.txt"
[ $((D - SECONDS)) -gt 150 ] && ART_ROOT=/dev/shm/persistent MODES=batched-tc ALL_KERNELS=1 PROMPT=64 NCU_LIMIT=$(((D - SECONDS - 20) / 2)) \
	OUT=$R/p64 bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
echo "call-any done at $SECONDS s" | tee -a "$R/summary-nc.txt"
