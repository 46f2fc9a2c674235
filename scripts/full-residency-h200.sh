#!/usr/bin/env bash
# full-residency-h200.sh: one device call on a two-GPU machine that produces
# editions/full-residency-v1 (campaigns/full-residency.yaml) and the profile
# of the same build. Build here with `make carry` plus
# `go test -c -tags cuda -o carry/cuda.test ./runtime/cuda/`, then on the GPU
# machine from the repository root:
#
#   bash scripts/full-residency-h200.sh 540
#
#   GPU 0: the CUDA tests as a gate (a failure stops everything), then the
#          campaign through scripts/device-campaign.sh (synthesises and
#          prepares both checkpoints into /dev/shm, verifies, packs).
#   GPU 1: at the same time, its own OLMoE-1B-7B seed 924 artifact
#          (scripts/decode-bench.sh), then scripts/profile-h200.sh on it
#          (Nsight Compute of a graph-full step, single-request comparisons
#          from $BENCH). The default $BENCH includes two c30 runs with the
#          registered transport (DMA from host memory) that can overlap the
#          campaign's first workers; the campaign's configurations are full
#          residency (graph-full: the host only polls a flag), the kind a
#          neighbour disturbs least.
#
# Files back in $OUT: full-residency-v1.tar.gz (or its .state.tar.gz) and
# call.tar.gz (tests log, campaign status and log, profile directory).
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${1:-540}
OUT=${OUT:-out/full-residency-h200}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$OUT/gpu0" "$OUT/gpu1/profile"
t0=$SECONDS
BENCH=${BENCH:-"64:grouped-v1:auto 30:grouped-v1:graph-segmented:registered 30:grouped-v1:graph-segmented:registered:hit-compute"}
(
	export CUDA_VISIBLE_DEVICES=1 WORK=/dev/shm/decode-bench OUT="$OUT/gpu1/profile"
	bash scripts/decode-bench.sh olmoe-1b-7b 924 "64:grouped-v1:auto" &&
		BENCH=$BENCH bash scripts/profile-h200.sh "$WORK/olmoe-1b-7b-924-int4"
) >"$OUT/gpu1/profile.log" 2>&1 &
prof=$!
CUDA_VISIBLE_DEVICES=0 timeout 200 carry/cuda.test -test.run 'TestStepperMatchesOps|TestStepperLookahead|TestStepperOverlap|TestPrefetchOnDevice|TestEngine|TestRows' \
	>"$OUT/gpu0/tests.log" 2>&1
rc=$?
echo "gpu tests: rc=$rc ($((SECONDS - t0)) s)"
if [ $rc -ne 0 ]; then
	grep -E -- "--- FAIL|panic" -A12 "$OUT/gpu0/tests.log" | head -80
	pkill -P $prof 2>/dev/null
	kill $prof 2>/dev/null
	wait
	tar -czf "$OUT/call.tar.gz" -C "$OUT" gpu0 gpu1 && rm -rf "$OUT/gpu0" "$OUT/gpu1"
	exit 1
fi
CUDA_VISIBLE_DEVICES=0 bash scripts/device-campaign.sh full-residency --budget $((budget - (SECONDS - t0))) --reserve 45 \
	--artifact-cache /dev/shm/horizon-artifacts --out "$OUT/gpu0" >"$OUT/gpu0/stdout.log" 2>&1
ra=$?
wait $prof
echo "campaign exit $ra, profile exit $? ($((SECONDS - t0)) s)"
grep -v '^gpu:\|^ *$' "$OUT/gpu0/status.txt" | head
grep -h -A16 "results, " "$OUT/gpu1/profile.log" | head -40
cat "$OUT"/gpu1/profile/summary-*.txt 2>/dev/null
rm -f "$OUT/gpu0/stdout.log"
mv "$OUT"/gpu0/*.tar.gz "$OUT"/ 2>/dev/null
tar -czf "$OUT/call.tar.gz" -C "$OUT" gpu0 gpu1 && rm -rf "$OUT/gpu0" "$OUT/gpu1"
ls -l "$OUT"
exit $ra
