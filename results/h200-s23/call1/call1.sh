#!/usr/bin/env bash
# session 23, call 1 (carry: carry/bins.tar.xz from session 22's last commit): the shared-expert branch
# (tuning.sharedFork, sharedForkAll; runtime/cuda/step_shared_fork.go), never run on a GPU before.
# 1. the step, engine and conformance tests (TestStepperTunings shared-fork*: the same bits as op by op);
# 2. Qwen decode, BenchmarkDecodeModes: graph-full against the four branch variants in one process, twice;
# 3. Qwen decode at depth 1/2048/8064 (FP16 KV, batched prefill) without and with the best-looking branch;
# 4. if time is left: prefill's ring2 and narrow again, now that the staging is conflict-free (session 21
#    measured them slower when the kernel was L1-bound), both shapes at 16/64/512.
set -u
summary=$OUT/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $summary
SUITE_RUN='TestStepper|TestKV16OnDevice|TestPersistent|TestKernelResources|TestExecutorsBitIdentical|TestDeterminism|TestEngine|TestConformanceTiny|TestTeacherForcing|TestBatchedPrefillOnDevice' h200_suite 170
h200_artifacts /dev/shm/persistent qwen15-moe-a27b:1 olmoe-1b-7b:1
both=$arts
arts=${both%%:*} # Qwen alone for the decode runs
bench() { # bench <tag> <regex> [VAR=value ...]
	local t0=$SECONDS tag=$1 re=$2
	shift 2
	(cd runtime/cuda && env HORIZON_BENCH_ARTIFACTS=$arts "$@" timeout $((590 - SECONDS)) ../../carry/cuda.test -test.run '^$' \
		-test.bench "$re" -test.benchtime 1x -test.v) > $OUT/bench-$tag.log 2>&1
	echo "bench $tag: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "tok/s|FAIL|differ" $OUT/bench-$tag.log | sed "s/^/$tag /" | tee -a $summary
}
for r in 1 2; do
	bench modes$r 'BenchmarkDecodeModes/.*/^(graph-full|graph-full-sfork1|graph-full-sfork2|graph-full-sforkall1|graph-full-sforkall2|graph-full-ropeqkv|graph-full-ropeqkv-sfork1)$'
done
depth() { # depth <tag> <shared fork>
	bench "$1" 'BenchmarkDecodeDepth' HORIZON_BENCH_DEPTHS=1,2048,8064 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_SHARED_FORK="$2"
}
depth depth-sf0-r1 0
depth depth-sf${SF:-1}-r1 ${SF:-1}
arts=$both
[ $SECONDS -lt 450 ] && bench prefill 'BenchmarkPrefillModes' HORIZON_BENCH_PROMPTS=16,64,512 \
	HORIZON_BENCH_PREFILL_MODES=batched-tc,batched-tc-ring2,batched-tc-narrow
arts=${both%%:*}
[ $SECONDS -lt 520 ] && depth depth-sf0-r2 0
[ $SECONDS -lt 540 ] && depth depth-sf${SF:-1}-r2 ${SF:-1}
tar -czf $OUT/bench.tgz -C $OUT $(cd $OUT && ls bench-*.log) && rm -f $OUT/bench-*.log
xz -9 -T4 $OUT/cuda-test.log
