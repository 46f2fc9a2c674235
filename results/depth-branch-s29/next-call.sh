#!/usr/bin/env bash
# Written at the end of session 29 for the next device call (not yet run): the streaming attention
# (attention_cs_step, the default since 473025f) against the old loads (-noattcs) on both shapes, two
# orders, with the attention trace's time between layers (att-between-us), and the device memory of
# Qwen c30/c60 with the shared spare pool. On an H200 this says whether depth-v1 should be re-made
# (`bash scripts/device-campaign.sh depth --budget 575`, alone on the machine) for issue 16's Qwen
# target (434.7 tok/s at 8,064).
# From the repository root on the GPU machine, after `make gpu-bins` here. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/nc
h200_tests_beside_artifacts 'TestStepperTunings|TestKernelResources|TestAttTrace|TestExecutorsBitIdentical' olmoe-1b-7b:924 qwen15-moe-a27b:1
o=${arts%%:*} q=${arts#*:}
qm=graph-full,graph-full-noattcs,graph-full-nosfork,graph-full-nosfork-noattcs,graph-full-atr,graph-full-nosfork-atr
h200_depth qwen-a $q 1,2048,8064 $qm 150
h200_depth olmoe-a $o 1,2048,3968 graph-full,graph-full-noattcs,graph-full-atr 60
h200_depth qwen-b $q 1,2048,8064 $(echo $qm | tr ',' '\n' | tac | paste -sd,) 150
h200_depth olmoe-b $o 1,2048,3968 graph-full-atr,graph-full-noattcs,graph-full 60
h200_vram $q 30 60
tar -C $W -czf $R/logs-nc.tgz . 2>/dev/null
echo "done at $SECONDS s" | tee -a $summary
