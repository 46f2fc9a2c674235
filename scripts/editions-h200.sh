#!/usr/bin/env bash
# editions-h200.sh: the H200 session that produced editions/technical-preview-v3,
# editions/residency-ablation and the peer baseline, on a two-GPU machine, resumably
# across device calls. Build here with `make carry` plus
# `go test -c -tags cuda -o carry/cuda.test ./runtime/cuda/`, then on the GPU machine:
#
#   bash scripts/editions-h200.sh test 520     # first call: GPU tests as a gate, then the campaigns
#   bash scripts/editions-h200.sh run 560      # later calls: continue where the last one stopped
#
# GPU 0 runs residency39 (-> technical-preview-v3), then the Qwen1.5-MoE baseline; GPU 1
# runs the ablation, then the OLMoE baseline. Both share the artifact cache in /dev/shm.
# Files come back under $OUT/gpu0 and $OUT/gpu1 (scripts/device-campaign.sh says which).
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-run} budget=${2:-540}
OUT=${OUT:-out/editions-h200}
mkdir -p "$OUT/gpu0" "$OUT/gpu1"
export CUDA_DEVICE_ORDER=PCI_BUS_ID
t0=$SECONDS
if [ "$what" = test ]; then
	CUDA_VISIBLE_DEVICES=0 timeout 150 carry/cuda.test -test.run 'TestStepperMatchesOps|TestStepperLookahead|TestEngine' \
		>"$OUT/gpu0/tests.log" 2>&1
	rc=$?
	echo "gpu tests: rc=$rc ($((SECONDS - t0)) s)"
	if [ $rc -ne 0 ]; then
		grep -E -- "--- FAIL|panic" -A12 "$OUT/gpu0/tests.log" | head -60
		exit 1
	fi
	budget=$((budget - (SECONDS - t0)))
fi
common=(--budget "$budget" --reserve 45 --artifact-cache /dev/shm/horizon-artifacts --baseline-work /dev/shm/horizon-baseline)
CUDA_VISIBLE_DEVICES=0 bash scripts/device-campaign.sh residency39 baseline --baseline-arch qwen15-moe-a27b \
	"${common[@]}" --out "$OUT/gpu0" >"$OUT/gpu0/stdout.log" 2>&1 &
a=$!
CUDA_VISIBLE_DEVICES=1 bash scripts/device-campaign.sh ablation baseline --baseline-arch olmoe-1b-7b \
	"${common[@]}" --out "$OUT/gpu1" >"$OUT/gpu1/stdout.log" 2>&1 &
b=$!
wait $a
ra=$?
wait $b
rb=$?
rm -f "$OUT/gpu0/stdout.log" "$OUT/gpu1/stdout.log"
echo "gpu0 exit $ra, gpu1 exit $rb ($((SECONDS - t0)) s)"
cat "$OUT/gpu0/status.txt" "$OUT/gpu1/status.txt" 2>/dev/null | grep -v '^gpu:\|^ *$' | head -40
[ $ra -eq 0 ] && [ $rb -eq 0 ] && exit 0
for r in $ra $rb; do [ $r -eq 0 ] || [ $r -eq 75 ] || exit 1; done
exit 75
