#!/usr/bin/env bash
# Session 32's next device call: on an H200, editions/depth-v1 re-made alone
# (results/depth-v1-s30/call1.sh; commit it with `make unpack-edition` after removing the old
# edition); on an H100, results/prefill-s32/call.sh (the burst split-K twin's tests and speed).
# carry ["carry/bins.tar.xz"].
#   DEADLINE=570 bash results/prefill-s32/next-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
	CAMPAIGN_BUDGET=$((${DEADLINE:-570} - 40)) exec bash results/depth-v1-s30/call1.sh
fi
DEADLINE=${DEADLINE:-570} exec bash results/prefill-s32/call.sh
