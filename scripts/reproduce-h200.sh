#!/usr/bin/env bash
# reproduce-h200.sh: one device call that reruns committed H200 editions'
# workers with `horizon-bench reproduce` and checks the records with
# horizon-verify --reproduction (issue 12). Build here with `make carry`;
# then on the GPU machine, from the repository root:
#
#   bash scripts/reproduce-h200.sh
#
# It reproduces, one after the other on one GPU (alone on the machine):
#   full residency:    editions/full-residency-v1  olmoe-0924-c64-grouped            (3 blocks)
#   partial residency: editions/residency-ablation olmoe-0924-c30-grouped-registered (3 blocks)
# Both share one prepared artifact (synthetic OLMoE-1B-7B seed 924, int4) in
# /dev/shm. PAIRS (edition:configuration, space-separated) replaces that list
# and BLOCKS (for example 1 or 1,3) limits the blocks rerun. Files back in $OUT: repro-<edition>-<config>/ (reproduction.json,
# original/ and rerun/ raw records) packed as repro-<edition>-<config>.tar.gz,
# reproduce-*.log and verify-*.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/reproduce-h200}
CACHE=${CACHE:-/dev/shm/horizon-artifacts}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"
rc=0
PAIRS=${PAIRS:-full-residency-v1:olmoe-0924-c64-grouped residency-ablation:olmoe-0924-c30-grouped-registered}
for pair in $PAIRS; do
	ed=${pair%%:*} cfg=${pair#*:}
	dir="$OUT/repro-$ed-$cfg"
	t0=$SECONDS
	carry/horizon-bench-cuda reproduce "editions/$ed" --configs "$cfg" ${BLOCKS:+--blocks "$BLOCKS"} --out "$dir" \
		--artifact-cache "$CACHE" --run-dir "/dev/shm/repro-run-$ed" >"$OUT/reproduce-$ed-$cfg.log" 2>&1
	r=$?
	echo "reproduce $ed $cfg: exit $r ($((SECONDS - t0)) s)"
	tail -n 12 "$OUT/reproduce-$ed-$cfg.log"
	[ $r -eq 0 ] || rc=1
	if [ -x carry/horizon-verify ]; then
		carry/horizon-verify "editions/$ed" --reproduction "$dir" >"$OUT/verify-$ed-$cfg.txt" 2>&1
		echo "horizon-verify --reproduction: exit $?"
		grep -E "reproduc|error|summary|passed|failed" "$OUT/verify-$ed-$cfg.txt" | head -20
	fi
	# the device tool returns files a few levels deep only: pack the directory
	tar -czf "$dir.tar.gz" -C "$OUT" "$(basename "$dir")" && rm -rf "$dir"
done
exit $rc
