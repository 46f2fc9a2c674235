#!/usr/bin/env bash
# editions-h200.sh: an H200 session on a two-GPU machine, resumable across device calls:
# campaigns and the transformers peer baseline through scripts/device-campaign.sh, one
# instance per GPU, sharing the artifact cache in /dev/shm. Build here with `make carry`
# plus `go test -c -tags cuda -o carry/cuda.test ./runtime/cuda/`, then on the GPU machine:
#
#   bash scripts/editions-h200.sh test 520     # first call: GPU tests as a gate, then the steps
#   bash scripts/editions-h200.sh run 560      # later calls: continue where the last one stopped
#
# What each GPU runs is device-campaign.sh's step list, from the environment:
#   GPU0  default "residency39 baseline --baseline-arch qwen15-moe-a27b"
#   GPU1  default "ablation baseline --baseline-arch olmoe-1b-7b"
# (session 2's split: residency39 -> technical-preview-v3 on GPU 0, the ablation on GPU 1).
# Session 3 ran GPU0="ablation" GPU1="baseline" PROFILE=1: the ablation again with the
# overlap/prefetch configurations, both baselines in both modes, then the profile.
#
# PROFILE=1: once a GPU's steps are all done and at least 200 s are left, run
# scripts/profile-h200.sh on it (OLMoE artifact from the shared cache) once.
#
# Files come back in $OUT: each finished edition (<edition>.tar.gz) or unfinished run state
# (<edition>.state.tar.gz, for carry/state/ on a cold machine), and everything else (status,
# logs, baseline JSONs, GPU test log, profile) in one call.tar.gz: the device runner returns
# at most 8 files.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-run} budget=${2:-540}
OUT=${OUT:-out/editions-h200}
GPU0=${GPU0:-"residency39 baseline --baseline-arch qwen15-moe-a27b"}
GPU1=${GPU1:-"ablation baseline --baseline-arch olmoe-1b-7b"}
PROFILE=${PROFILE:-0}
mkdir -p "$OUT/gpu0" "$OUT/gpu1"
export CUDA_DEVICE_ORDER=PCI_BUS_ID
t0=$SECONDS
if [ "$what" = test ]; then
	CUDA_VISIBLE_DEVICES=0 timeout 200 carry/cuda.test -test.run 'TestStepperMatchesOps|TestStepperLookahead|TestStepperOverlap|TestPrefetchOnDevice|TestEngine|TestRows' \
		>"$OUT/gpu0/tests.log" 2>&1
	rc=$?
	echo "gpu tests: rc=$rc ($((SECONDS - t0)) s)"
	if [ $rc -ne 0 ]; then
		grep -E -- "--- FAIL|panic" -A12 "$OUT/gpu0/tests.log" | head -60
		tar -czf "$OUT/call.tar.gz" -C "$OUT" gpu0/tests.log
		exit 1
	fi
	budget=$((budget - (SECONDS - t0)))
fi
common=(--budget "$budget" --reserve 45 --artifact-cache /dev/shm/horizon-artifacts --baseline-work /dev/shm/horizon-baseline)
# gpu N STEPS...: device-campaign.sh on GPU N, then the profile when asked and time is left.
gpu() {
	local n=$1 rc
	shift
	CUDA_VISIBLE_DEVICES=$n bash scripts/device-campaign.sh "$@" "${common[@]}" --out "$OUT/gpu$n" >"$OUT/gpu$n/stdout.log" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && [ "$PROFILE" = 1 ] && [ ! -e /dev/shm/horizon-profile.done ] && [ $((budget - (SECONDS - t0))) -ge 200 ]; then
		touch /dev/shm/horizon-profile.done
		CUDA_VISIBLE_DEVICES=$n OUT="$OUT/gpu$n/profile" WORK=/dev/shm/decode-bench \
			timeout $((budget - (SECONDS - t0) - 15)) bash scripts/profile-h200.sh --find /dev/shm/horizon-artifacts \
			>"$OUT/gpu$n/profile.log" 2>&1 || echo "profile: exit $? (see profile.log)" >>"$OUT/gpu$n/profile.log"
	fi
	return $rc
}
# shellcheck disable=SC2086 # the step lists are word lists
gpu 0 $GPU0 &
a=$!
# shellcheck disable=SC2086
gpu 1 $GPU1 &
b=$!
wait $a
ra=$?
wait $b
rb=$?
rm -f "$OUT/gpu0/stdout.log" "$OUT/gpu1/stdout.log"
echo "gpu0 exit $ra, gpu1 exit $rb ($((SECONDS - t0)) s)"
cat "$OUT/gpu0/status.txt" "$OUT/gpu1/status.txt" 2>/dev/null | grep -v '^gpu:\|^ *$' | head -40
grep -h -A40 "results, " "$OUT"/gpu*/profile.log 2>/dev/null | head -60
# One archive for everything but the editions and run states.
mv "$OUT"/gpu*/*.tar.gz "$OUT"/ 2>/dev/null
tar -czf "$OUT/call.tar.gz" -C "$OUT" gpu0 gpu1 && rm -rf "$OUT/gpu0" "$OUT/gpu1"
ls -l "$OUT"
[ $ra -eq 0 ] && [ $rb -eq 0 ] && exit 0
for r in $ra $rb; do [ $r -eq 0 ] || [ $r -eq 75 ] || exit 1; done
exit 75
