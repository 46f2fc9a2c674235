#!/usr/bin/env bash
# session 22, call 4 (carry: carry/bins.tar.xz = 5212f99, the attention ranges; carry/s22: cuda-sd.test.xz =
# e160811, the shared_down build; cuda-8701ca3.test.xz = the session's first build). The whole CUDA suite on
# 5212f99, then decode (BenchmarkDecodeModes graph-full, 256 tokens after a 44-token prompt) on the three
# builds in turn, then decode at depth 1/512/2048 (FP16 KV, batched prefill) on new and sd.
set -u
summary=$OUT/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
for b in sd 8701ca3; do xz -dc carry/s22/cuda-$b.test.xz > carry/cuda-$b.test && chmod +x carry/cuda-$b.test; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $summary
h200_suite 175
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
bench() { # bench <binary> <tag> <regex> [VAR=value ...]
	local t0=$SECONDS bin=$1 tag=$2 re=$3
	shift 3
	(cd runtime/cuda && env HORIZON_BENCH_ARTIFACTS=$arts "$@" timeout $((590 - SECONDS)) ../../carry/$bin -test.run '^$' \
		-test.bench "$re" -test.benchtime 1x -test.v) > $OUT/bench-$tag.log 2>&1
	echo "bench $tag ($bin): rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "tok/s|FAIL|differ" $OUT/bench-$tag.log | sed "s/^/$tag /" | tee -a $summary
}
for r in 1 2; do
	for b in cuda.test cuda-sd.test cuda-8701ca3.test; do
		[ $SECONDS -lt 470 ] && bench $b modes$r-${b%.test} 'BenchmarkDecodeModes/.*/^graph-full$'
	done
done
for b in cuda.test cuda-sd.test; do
	[ $SECONDS -lt 540 ] && bench $b depth-${b%.test} 'BenchmarkDecodeDepth' HORIZON_BENCH_DEPTHS=1,512,2048 HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched
done
tar -czf $OUT/bench.tgz -C $OUT $(cd $OUT && ls bench-*.log) && rm -f $OUT/bench-*.log
xz -9 -T4 $OUT/cuda-test.log
