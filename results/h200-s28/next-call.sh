#!/usr/bin/env bash
# Written at the end of session 28 for the next device call (not yet run): the attention trace.
# Call 7 found that Qwen's shared-expert branch loses its depth-8,064 gain only through the attention's
# KV reads (with attWindow 64 the branch keeps its whole gain at 8,064): the attention costs ~200 µs
# more a step with the branch than in line, while it is not concurrent with the branch.
# tuning.attTrace (attention_trace_step) records every attention block's residency, start, end and SM
# with no node in the graph, so this call shows whether the attention kernel itself runs longer with the
# branch (a slower block, a second wave: att-late, att-max-sm) or starts later.
# 1. TestAttTrace, TestStepperTunings (its att-trace, att-carveout, att-b3 cases) and TestKernelResources
#    beside the artifacts;
# 2. BenchmarkDecodeDepth, Qwen at depths 1 and 8,064, with and without the branch, with and without
#    PDL, traced, plus graph-full and -nosfork untraced (does the trace change the rate?), and the
#    attention's shared-memory carveout at 100% (tuning.attCarveout) and its three-blocks-an-SM build
#    (tuning.attB3), the candidates should late blocks show a second wave, and an event node before
#    or after each attention (tuning.attFence: the timeline's nodes removed the penalty); and a control,
#    the branch's fork and join with an empty kernel on it and the shared expert in line
#    (tuning.sharedForkEmpty: is it the graph's shape or the branch's work?), two orders;
# 3. OLMoE at 1 and 2,048: graph-full traced, untraced and b3.
# From the repository root on the GPU machine, after `make gpu-bins` here. Wall deadline DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/out}
W=/tmp/cn; mkdir -p $W
DEADLINE=${DEADLINE:-560}
summary=$R/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $summary
( t0=$SECONDS; cd runtime/cuda && timeout 150 ../../carry/cuda.test -test.v -test.run 'TestAttTrace|TestStepperTunings|TestKernelResources' -test.timeout 145s > $W/tests.log 2>&1; echo "tests: rc=$? ($((SECONDS - t0)) s)" >> $W/tests-rc.txt ) &
sp=$!
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
o=${arts%%:*}; q=${arts#*:}
wait $sp
cat $W/tests-rc.txt | tee -a $summary
grep -E -- "^--- (PASS|FAIL)|^    --- FAIL" $W/tests.log | head -20 | tee -a $summary
grep -E -A6 -- "--- FAIL|panic" $W/tests.log | head -30 | tee -a $summary
qm=graph-full-atr,graph-full-nosfork-atr,graph-full-nopdl-atr,graph-full-nosfork-nopdl-atr,graph-full,graph-full-nosfork,graph-full-sfempty,graph-full-sfempty-atr,graph-full-co100,graph-full-b3,graph-full-fence1,graph-full-fence2
h200_depth qwen-a $q 1,8064 $qm 220
h200_depth qwen-b $q 1,8064 $(echo $qm | tr ',' '\n' | tac | paste -sd,) 220
h200_depth olmoe $o 1,2048 graph-full-atr,graph-full,graph-full-b3,graph-full-attpipe-pf128 70
tar -C $W -czf $R/logs-cn.tgz . 2>/dev/null
echo "done at $SECONDS s" | tee -a $summary
