#!/usr/bin/env bash
# Session 29, call 2: where Qwen's shared-expert branch loses its gain at depth 8,064.
# Call 1 (same session, next-call.sh of h200-s28) traced every attention block: the attention launches
# take the same time with and without the branch (att-span 727 against 728 µs a step), so the branch's
# loss is in the rest of the layer. This call asks whether the deep reads cost the rest of the layer
# through L2 (streaming, evict-first K/V loads: tuning.attStream, the same bits) or through the pages
# they touch (every layer's attention reads layer 0's cache: tuning.attAliasKV, a diagnostic), and how
# the loss grows with the bytes read (attWindow 4,096 at depth 8,064); att-between-us is the
# time between consecutive layers' attention launches.
# It ran with build 46bb539, where -attcs was tuning.attStream; from 473025f on the streaming loads
# are the default (graph-full) and the old loads are the -noattcs modes, so rerun next-call.sh instead.
# LEAN=1 (a short lease): Qwen only, the first six modes, one order, no OLMoE.
# From the repository root on the GPU machine, after `make gpu-bins` here. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/c2
qm=graph-full,graph-full-nosfork,graph-full-attcs,graph-full-nosfork-attcs,graph-full-alias,graph-full-nosfork-alias
if [ "${LEAN:-0}" = 1 ]; then
	h200_tests_beside_artifacts 'TestStepperTunings' qwen15-moe-a27b:1
	o= q=$arts
else
	h200_tests_beside_artifacts 'TestStepperTunings|TestKernelResources|TestAttTrace|TestExecutorsBitIdentical|TestDeterminism' olmoe-1b-7b:924 qwen15-moe-a27b:1
	o=${arts%%:*} q=${arts#*:}
	qm=$qm,graph-full-attw4096,graph-full-nosfork-attw4096,graph-full-atr,graph-full-nosfork-atr
fi
h200_depth qwen-a $q 1,8064 $qm 180
# The shared spare pool (341e6bf): the process's device memory at partial and full residency, Qwen,
# FP16 KV sized to 8,192 positions as in depth-v1 (nvidia-smi's per-process reading every 100 ms).
h200_vram $q 30 60
[ -z "$o" ] || h200_depth olmoe $o 1,2048 graph-full,graph-full-attcs,graph-full-atr 50
[ "${LEAN:-0}" = 1 ] || h200_depth qwen-b $q 1,8064 $(echo $qm | tr ',' '\n' | tac | paste -sd,) 180
tar -C $W -czf $R/logs-c2.tgz . 2>/dev/null
echo "done at $SECONDS s" | tee -a $summary
