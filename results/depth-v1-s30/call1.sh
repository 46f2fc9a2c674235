#!/usr/bin/env bash
# Session 30, call 1: re-make editions/depth-v1 alone on the GPU (the streaming K/V attention
# default of 473025f and the shared spare pool of 341e6bf are in no edition yet), then, with
# what is left, the GPU tests of the default flip and the streaming against the old loads on
# the campaign's own artifacts.
# From the repository root on the GPU machine, after `make gpu-bins` here; carry ["carry/bins.tar.xz"].
#   DEADLINE=570 bash results/depth-v1-s30/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/c1
t0=$SECONDS
bash scripts/device-campaign.sh depth --budget "${CAMPAIGN_BUDGET:-440}" --reserve 60 --out "$R"
echo "depth campaign: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
# The campaign's artifacts (runs/artifact-cache), one per architecture.
# (artifact.json's identity.arch is the checkpoint's model_type).
art_of() { grep -lE "\"arch\": ?\"$1\"" $(find runs/artifact-cache -maxdepth 4 -name artifact.json) 2>/dev/null | head -1 | xargs -r dirname | sed "s#^#$PWD/#"; }
o=$(art_of olmoe) q=$(art_of qwen2_moe)
echo "artifacts: olmoe=$o qwen=$q" | tee -a "$summary"
if [ $((DEADLINE - SECONDS)) -gt 100 ]; then
	lim=$((DEADLINE - SECONDS - 60)); [ "$lim" -le 140 ] || lim=140
	(cd runtime/cuda && timeout "$lim" ../../carry/cuda.test -test.v -test.run 'TestStepperTunings|TestKernelResources|TestAttTrace|TestExecutorsBitIdentical' -test.timeout "$((lim - 5))s") > "$W/tests.log" 2>&1
	echo "tests: rc=$? (limit $lim s)" | tee -a "$summary"
	grep -E -- "^--- (PASS|FAIL)|^    --- FAIL" "$W/tests.log" | head -20 | tee -a "$summary"
	grep -E -A6 -- "--- FAIL|panic" "$W/tests.log" | head -30 | tee -a "$summary"
fi
[ -n "$q" ] && h200_depth qwen $q 1,8064 graph-full,graph-full-noattcs,graph-full-atr 60
[ -n "$o" ] && h200_depth olmoe $o 1,2048 graph-full,graph-full-noattcs,graph-full-atr 40
tar -C $W -czf $R/logs-c1.tgz . 2>/dev/null
echo "done at $SECONDS s" | tee -a "$summary"
