#!/usr/bin/env bash
# Session 41's second call of a lease (issue 16: llama.cpp's -d numbers from the same device call as
# depth-v1), on the machine results/s41/call1.sh left warm (the peer's build in /tmp/llamacpp-peer,
# both GGUFs in /dev/shm, the depth campaign's artifacts prepared, the driver's JIT cache filled):
#   1. the Qwen GGUF, only if the machine lacks it (scripts/llamacpp/llamacpp-h200.sh on Qwen alone,
#      with one tg128 at depth 0): nothing of ours runs meanwhile;
#   2. the depth campaign (scripts/device-campaign.sh depth) with what is left but PEER_S;
#   3. llama-bench on both shapes at the contract's depths, as llamacpp-peer.tar.gz.
# carry ["carry/bins.tar.xz", "carry/llamacpp-src.tar.xz", "carry/llamacpp-src.commit", "carry/llamacpp"];
# needs_h200. Resumable: call again while the campaign says 75.
#   BUDGET=575 PEER_S=90 bash results/s41/depth-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
BUDGET=${BUDGET:-575} PEER_S=${PEER_S:-90}
t0=$SECONDS
[ -x carry/horizon-bench-cuda ] || tar -xJf carry/bins.tar.xz -C carry
if ! ls /dev/shm/llamacpp-peer/qwen15-moe-a27b-1-q4e.gguf >/dev/null 2>&1; then
	mkdir -p /tmp/peer-qwen
	OUT=/tmp/peer-qwen LLAMACPP_MODELS_LIST=qwen15-moe-a27b:1:0 LLAMACPP_BUDGET_S=260 \
		bash scripts/llamacpp/llamacpp-h200.sh >/tmp/peer-qwen.log 2>&1
	echo "qwen gguf: rc=$? after $((SECONDS - t0)) s" | tee -a "$O/depth-call.txt"
	tar -czf "$O/llamacpp-peer-qwen-prep.tar.gz" -C /tmp peer-qwen
fi
cb=$((BUDGET - (SECONDS - t0) - PEER_S))
reserve=$((cb / 3))
[ "$reserve" -le 150 ] || reserve=150
bash scripts/device-campaign.sh depth --budget "$cb" --reserve "$reserve"
rc=$?
echo "depth campaign: rc=$rc after $((SECONDS - t0)) s (budget $cb, reserve $reserve)" | tee -a "$O/depth-call.txt"
left=$((BUDGET - (SECONDS - t0) - 10))
if [ "$left" -lt 30 ]; then
	echo "peer: skipped, $left s left" | tee -a "$O/depth-call.txt"
	exit "$rc"
fi
mkdir -p /tmp/peer-depth
OUT=/tmp/peer-depth LLAMACPP_BUDGET_S=$left bash scripts/llamacpp/llamacpp-h200.sh >/tmp/peer-depth.log 2>&1
echo "peer: rc=$? after $((SECONDS - t0)) s" | tee -a "$O/depth-call.txt"
tar -czf "$O/llamacpp-peer.tar.gz" -C /tmp peer-depth
cat /tmp/peer-depth/summary.txt | tee -a "$O/depth-call.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$O/depth-call.txt"
exit "$rc"
