#!/usr/bin/env bash
# The full OLMoE-1B-7B shape's HF oracle with FP16 expert activations (issue 14, item 3: first-step
# logits on the full shape), not yet run: transformers on the checkpoint the INT4 experts compute
# with (scripts/dequantized_checkpoint.py, ~26 GB of FP32 under /tmp, removed after) against our
# INT4 path with --expert-activations fp16, and the FP16-expert path against the BF16 checkpoint.
# carry ["carry/bins.tar.xz"]; an H100 or H200 (about 28 GB of GPU memory for the FP32 model).
#   bash results/prefill-s35/call5.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
mkdir -p "$R"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
timeout "${LIMIT:-560}" python3 scripts/oracle_hf.py --bin carry/horizon-bench-cuda --device cuda --expert-activations fp16 \
	--prefill batched --work /tmp/s35-oracle-full --full olmoe-1b-7b --int4-full --out "$R/oracle-a16-full.json" >"$R/oracle.log" 2>&1
echo "oracle full: rc=$?" | tee "$R/summary.txt"
grep -v '^+ ' "$R/oracle.log" | tail -20 | cut -c1-600 | tee -a "$R/summary.txt"
