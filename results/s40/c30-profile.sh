#!/usr/bin/env bash
# Where OLMoE's batched prefill at 30 of 64 experts spends its time, at three sizes of the shared
# spare pool (results/s40: ~2x slower than session 28's edition, with the same misses).
# BenchmarkPrefillModes' batched-tc mode with HORIZON_BENCH_CAPACITY=30 and HORIZON_BENCH_SPARES
# 0 (top-k, the default, with 9085006's reserve), 16 and 128 (session 28's 8 a layer), then at
# full residency for the reference; each logs engine.PrefillProfile (waits around every
# instruction: routed-experts:leases is the host's miss service). carry ["carry/bins.tar.xz",
# "carry/jit-cache.tar.xz"] after `make gpu-bins` (a build with HORIZON_BENCH_CAPACITY); about 3 minutes warm.
#   DEADLINE=300 bash results/s40/c30-profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s40-c30
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924
LENGTHS=${LENGTHS:-64,256,1024}
MODES=batched-tc
export HORIZON_BENCH_PREFILL_PROFILE=1
runs="0 16 128 full"
n=4
for sp in $runs; do
	l=$(((DEADLINE - SECONDS - 20) / n))
	n=$((n - 1))
	[ "$l" -gt 20 ] || { echo "spares $sp: skipped, no time" | tee -a "$summary"; continue; }
	if [ "$sp" = full ]; then
		h200_prefill_bench full ../../carry/cuda.test "$l"
	else
		HORIZON_BENCH_CAPACITY=30 HORIZON_BENCH_SPARES=$sp h200_prefill_bench "c30-s$sp" ../../carry/cuda.test "$l"
	fi
	grep -E "profile" "$R/bench-$([ "$sp" = full ] && echo full || echo c30-s$sp).log" | cut -c1-900 | tee -a "$summary"
done
bash scripts/jit-cache.sh save "$R" | tee -a "$summary"
echo "done at $SECONDS s" | tee -a "$summary"
