#!/usr/bin/env bash
# The next device call (written in session 32, not yet run at e659b13's defaults): on an H200,
# editions/depth-v1 re-made alone (results/depth-v1-s30/call1.sh; commit it with
# `make unpack-edition` after removing the old edition); on an H100, results/prefill-s32/call5.sh
# (e659b13's defaults under the GPU tests, and against batched-tc-noburst at 16, 64 and 512).
# carry ["carry/bins.tar.xz"].
#   DEADLINE=570 bash results/prefill-s32/next-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
	CAMPAIGN_BUDGET=$((${DEADLINE:-570} - 40)) exec bash results/depth-v1-s30/call1.sh
fi
DEADLINE=${DEADLINE:-570} exec bash results/prefill-s32/call5.sh
