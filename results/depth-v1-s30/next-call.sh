#!/usr/bin/env bash
# Written at the end of session 30 for the next device call (not yet run), whichever card comes.
# On an H200: depth-v1 re-made alone (call1.sh; commit it with `make unpack-edition` after removing
# the old edition). On an H100 (no edition is made there): the small-entry fragment-direct
# kernel's GPU tests (tuning.tcFD16, written in session 30) and the prefill at 16, 64 and 256
# tokens with it against the default, OLMoE and Qwen.
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz"].
#   DEADLINE=570 bash results/depth-v1-s30/next-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
	CAMPAIGN_BUDGET=$((${DEADLINE:-570} - 40)) exec bash results/depth-v1-s30/call1.sh
fi
R=${OUT:-/tmp/out}
D=${DEADLINE:-570}
SUITE_RUN='TestTCPreSplitSameBits|TestTCGroupedKernelChoice|TestDeviceRoutedPrefillOnDevice|TestKernelResources' SUITE_LIMIT=180 \
	LENGTHS="16 64 256" MODES=batched-tc,batched-tc-fd16,batched-tc-nofd BENCH_LIMIT=$((D - 240)) OUT=$R/fd16 bash scripts/prefill-h200.sh
echo "next-call done at $SECONDS s" | tee -a "$R/fd16/summary.txt"
