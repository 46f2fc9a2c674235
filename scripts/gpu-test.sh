#!/usr/bin/env bash
# gpu-test.sh: run the CUDA tests and kernel benchmarks on the GPU machine.
# Build first on the build machine with `make gpu-test` (binaries in carry/),
# then from the repository root on the GPU machine:
#
#   bash scripts/gpu-test.sh            # tests, benchmarks, CLI smoke run
#   bash scripts/gpu-test.sh tests      # tests only
#   bash scripts/gpu-test.sh bench      # benchmarks only
#
# Logs go to $OUT (the device tool's output folder) or out/gpu-test/.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
what=${1:-all}
OUT=${OUT:-$root/out/gpu-test}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
status=0

step() { # name timeout_s dir command...
	local name=$1 limit=$2 dir=$3
	shift 3
	local t0=$SECONDS
	(cd "$dir" && timeout "$limit" "$@") >"$OUT/$name.log" 2>&1
	local rc=$?
	echo "$name: rc=$rc ($((SECONDS - t0)) s)" | tee -a "$summary"
	[ $rc -eq 0 ] || status=1
}

{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
} >"$OUT/gpu.txt"
cat "$OUT/gpu.txt"

for bin in cuda.test kernels.test; do
	if [ ! -x "carry/$bin" ]; then
		echo "carry/$bin missing: run \`make gpu-test\` on the build machine and carry carry/" | tee -a "$summary"
		exit 2
	fi
done

if [ "$what" = all ] || [ "$what" = tests ]; then
	# PTX freshness needs the .cu sources: run in kernels/.
	step kernels-test 20 kernels "$root/carry/kernels.test" -test.v
	# engine tests synthesise tiny models into $TMPDIR; testdata is relative.
	step cuda-test 280 runtime/cuda "$root/carry/cuda.test" -test.v -test.timeout 270s
	# device line (result path, hand-off mode) and the JIT's register counts
	grep -hE '^cuda tests on|registers,' "$OUT/cuda-test.log" | sed 's/^ *//' | tee -a "$summary"
fi

if [ "$what" = all ] || [ "$what" = bench ]; then
	# Kernel benchmarks: 20 timed batches each, median reported; Stream is
	# the same-run ceiling reference (a pure read of the same bytes, and the
	# launch floor).
	step cuda-bench 200 runtime/cuda "$root/carry/cuda.test" -test.run '^$' -test.bench 'MatVec|Experts|Stream' \
		-test.benchtime 20x -test.timeout 190s
	# Host-side costs: many iterations (RoundTripParts takes the round trip apart).
	step cuda-bench-host 60 runtime/cuda "$root/carry/cuda.test" -test.run '^$' -test.bench 'Issue|RoundTrip' \
		-test.benchtime 20000x -test.timeout 55s
	grep -hE '^Benchmark' "$OUT/cuda-bench.log" "$OUT/cuda-bench-host.log" | tee -a "$summary"
fi

if [ "$what" = all ] && [ -x carry/horizon-bench-cuda ]; then
	step cli-generate 40 "$root" carry/horizon-bench-cuda generate --device cuda --prompt "The quick brown fox" --tokens 64 --json
	step cli-generate-cpu 40 "$root" carry/horizon-bench-cuda generate --device cpu --prompt "The quick brown fox" --tokens 64 --json
fi

echo "--- failures (if any) ---" >>"$summary"
grep -hE -- '^(--- FAIL|FAIL|panic:)' "$OUT"/*.log >>"$summary" 2>/dev/null || true
cat "$summary"
exit $status
