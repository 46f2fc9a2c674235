#!/usr/bin/env bash
# Issue 16 asks for llama.cpp's llama-bench -d numbers from the same device call as depth-v1. A
# fresh machine needs ~10 minutes for the peer alone (the CUDA build, 346 s on session 40's H200,
# and converting both shapes' GGUFs, 99 + 168 s), so a lease does that first
# (results/s40/call1.sh, or this script's second half on its own), and this call then runs on the
# warm machine, which keeps the build (/tmp/llamacpp-peer) and the GGUFs (/dev/shm):
#   1. the depth campaign (scripts/device-campaign.sh depth; resumable: call again while it says
#      75), with BUDGET - PEER_S seconds;
#   2. llama-bench on both shapes at the contract's depths (scripts/llamacpp/llamacpp-h200.sh:
#      pp 16..4,096 at depth 0, tg128 at each depth), with what is left, as llamacpp-peer.tar.gz.
#      Whatever the machine lacks (the build, a GGUF) it makes first, within the budget.
# carry as results/s40/call1.sh; needs_h200. On the warm machine:
#   BUDGET=575 PEER_S=150 bash results/s40/depth-and-peer.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
BUDGET=${BUDGET:-575} PEER_S=${PEER_S:-150}
t0=$SECONDS
bash scripts/device-campaign.sh depth --budget "$((BUDGET - PEER_S))"
rc=$?
echo "depth campaign: rc=$rc after $((SECONDS - t0)) s" | tee -a "$O/depth-and-peer.txt"
left=$((BUDGET - (SECONDS - t0) - 15))
if [ "$left" -lt 30 ]; then
	echo "peer: skipped, $left s left" | tee -a "$O/depth-and-peer.txt"
	exit "$rc"
fi
mkdir -p /tmp/peer-depth
OUT=/tmp/peer-depth LLAMACPP_BUDGET_S=$left bash scripts/llamacpp/llamacpp-h200.sh >/tmp/peer-depth.log 2>&1
echo "peer: rc=$? after $((SECONDS - t0)) s" | tee -a "$O/depth-and-peer.txt"
tar -czf "$O/llamacpp-peer.tar.gz" -C /tmp peer-depth
cat /tmp/peer-depth/summary.txt | tee -a "$O/depth-and-peer.txt"
exit "$rc"
