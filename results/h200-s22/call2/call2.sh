#!/usr/bin/env bash
# session 22, call 2 (carry: carry/bins.tar.xz = 1 launch for the shared expert's SiLU·up, down and gated
# residual; carry/s22: cuda-8701ca3.test.xz = the build before it). The suite's step and engine tests on
# the new build, then Qwen decode: graph-full (fused) against graph-full-shared3 (three launches) in one
# process, twice; then decode at depth 1/2048/8064 (FP16 KV, batched prefill) on the new and old builds.
set -u
summary=$OUT/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
xz -dc carry/s22/cuda-8701ca3.test.xz > carry/cuda-old.test && chmod +x carry/cuda-old.test
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $summary
SUITE_RUN='TestStepper|TestKV16OnDevice|TestPersistent|TestKernelResources|TestExecutorsBitIdentical|TestDeterminism|TestEngine|TestConformanceTiny|TestTeacherForcing|TestBatchedPrefillOnDevice' h200_suite 160
h200_artifacts /dev/shm/persistent qwen15-moe-a27b:1
bench() { # bench <binary> <tag> <regex> [VAR=value ...]
	local t0=$SECONDS bin=$1 tag=$2 re=$3
	shift 3
	(cd runtime/cuda && env HORIZON_BENCH_ARTIFACTS=$arts "$@" timeout $((590 - SECONDS)) ../../carry/$bin -test.run '^$' \
		-test.bench "$re" -test.benchtime 1x -test.v) > $OUT/bench-$tag.log 2>&1
	echo "bench $tag ($bin): rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "tok/s|FAIL|differ" $OUT/bench-$tag.log | sed "s/^/$tag /" | tee -a $summary
}
for r in 1 2; do
	bench cuda.test modes$r 'BenchmarkDecodeModes/.*/^(graph-full|graph-full-shared3)$'
done
for r in 1 2; do
	[ $SECONDS -lt 480 ] && bench cuda.test depth-new$r 'BenchmarkDecodeDepth' HORIZON_BENCH_DEPTHS=1,2048,8064 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched
	[ $SECONDS -lt 520 ] && bench cuda-old.test depth-old$r 'BenchmarkDecodeDepth' HORIZON_BENCH_DEPTHS=1,2048,8064 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched
done
tar -czf $OUT/bench.tgz -C $OUT $(cd $OUT && ls bench-*.log) && rm -f $OUT/bench-*.log
xz -9 -T4 $OUT/cuda-test.log
