#!/usr/bin/env bash
# session 22, call 1 (carry: carry/bins.tar.xz carry/s22): three builds' prefill in one call, on the same
# machine and artifacts: new = carry/bins.tar.xz (session 21's last commit: conflict-free staging, one scale
# copy a block, padding tiles skipped, pair copies of int4 codes), mid = 05a8aff (all of that but the pair
# copies), old = 69b8f88 (session 20's default ring). First the whole CUDA suite on the new build.
set -u
summary=$OUT/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
for b in 05a8aff 69b8f88; do xz -dc carry/s22/cuda-$b.test.xz > carry/cuda-$b.test && chmod +x carry/cuda-$b.test; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $summary
h200_suite 280
xz -9 -T4 $OUT/cuda-test.log
h200_artifacts /dev/shm/persistent olmoe-1b-7b:1 qwen15-moe-a27b:1
bench() { # bench <binary> <tag> <prompts> <modes>
	local t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$arts HORIZON_BENCH_PROMPTS=$3 \
		HORIZON_BENCH_PREFILL_MODES=$4 HORIZON_BENCH_PREFILL_PROFILE=1 \
		timeout $((590 - SECONDS)) ../../carry/$1 -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) > $OUT/bench-$2.log 2>&1
	echo "bench $2 ($1, $3): rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
	grep -E "prompt-tok/s" $OUT/bench-$2.log | sed "s/^/$2 /" | tee -a $summary
}
bench cuda.test new1 16,64,512 batched-tc
bench cuda-05a8aff.test mid1 16,64,512 batched-tc
bench cuda-69b8f88.test old1 16,64,512 batched-tc
[ $SECONDS -lt 360 ] && bench cuda.test new2 16,64,512 batched-tc
[ $SECONDS -lt 420 ] && bench cuda-69b8f88.test old2 16,64,512 batched-tc
tar -czf $OUT/bench.tgz -C $OUT $(cd $OUT && ls bench-*.log) && rm -f $OUT/bench-*.log
