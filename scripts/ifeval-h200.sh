#!/usr/bin/env bash
# ifeval-h200.sh: the H200 part of issue 18, in device calls of at most 10
# minutes. Build here with `make gpu-bins` (carry/bins.tar.xz: the CUDA
# horizon-bench and horizon-verify); then on the GPU machine, from the
# repository root, repeat while it exits 75:
#
#   bash scripts/ifeval-h200.sh [BUDGET_S]      # default 540
#
# 1. scripts/chat_template_hf.py: runtime/tokenizer's chat-template goldens
#    against transformers' apply_chat_template (the GPU machine has
#    transformers), into $OUT/chat-template-hf.txt; first call only;
# 2. campaigns/ifeval541.yaml (IFEVAL-v1 on the OLMoE-1B-7B-shape synthetic
#    checkpoint, full residency) through scripts/device-campaign.sh, which
#    resumes from the run directory's journal (carry/state/ on a cold
#    machine) and brings the edition back verified as one archive.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${1:-540}
OUT=${OUT:-out/ifeval-h200}
mkdir -p "$OUT"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
if [ ! -f "$OUT/chat-template-hf.txt" ]; then
	timeout 120 python3 scripts/chat_template_hf.py >"$OUT/chat-template-hf.txt" 2>&1
	echo "chat_template_hf.py: exit $? ($(tail -n 1 "$OUT/chat-template-hf.txt"))"
fi
bash scripts/device-campaign.sh ifeval541 --budget "$((budget - SECONDS))" --reserve 90 \
	--artifact-cache /dev/shm/horizon-artifacts --out "$OUT"
