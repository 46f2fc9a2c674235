#!/usr/bin/env bash
# persistent-quick-h200.sh: a short check of the persistent decode kernel
# (issue 14) for a nearly spent device budget: OLMoE-1B-7B shape (seed 924,
# INT4) single-request decode in graph-full and persistent steps with
# tokens compared and one traced persistent run (BenchmarkDecodeModes,
# filtered), then TestPersistentBuilds on the tiny models. Build as for
# persistent-h200.sh (carry/cuda.test, carry/horizon-bench-cuda, packed as
# carry/bins.tar.xz).
#
#   bash scripts/persistent-quick-h200.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/persistent-quick}
mkdir -p "$OUT/profile"
summary="$OUT/summary.txt"
: >"$summary"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
art=/dev/shm/persistent/olmoe-1b-7b-924-int4
if [ ! -f "$art/artifact.json" ]; then
	t0=$SECONDS
	carry/horizon-bench-cuda synth --arch olmoe-1b-7b --seed 924 --out /dev/shm/persistent/ckpt >/dev/null 2>&1 &&
		carry/horizon-bench-cuda prepare --checkpoint /dev/shm/persistent/ckpt --out "$art" >"$OUT/prepare.log" 2>&1
	echo "artifact: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	rm -rf /dev/shm/persistent/ckpt
fi
t0=$SECONDS
prof=$(cd "$OUT/profile" && pwd)
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$art" HORIZON_PROFILE_DIR="$prof" timeout 120 ../../carry/cuda.test -test.run '^$' \
	-test.bench 'BenchmarkDecodeModes/olmoe/^(graph-full|persistent|persistent-traced)$' -test.benchtime 1x -test.v -test.timeout 110s) >"$OUT/bench.log" 2>&1
echo "BenchmarkDecodeModes: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark.*tok/s|FAIL|panic|Error" "$OUT/bench.log" | tee -a "$summary"
cat "$prof"/*.md 2>/dev/null | tee -a "$summary"
t0=$SECONDS
(cd runtime/cuda && timeout 90 ../../carry/cuda.test -test.v -test.run 'TestPersistentBuilds' -test.timeout 85s) >"$OUT/persistent-test.log" 2>&1
echo "TestPersistentBuilds: rc=$? ($((SECONDS - t0)) s), $(grep -c -- '    --- PASS' "$OUT/persistent-test.log") PASS, $(grep -c -- '--- FAIL' "$OUT/persistent-test.log") FAIL" | tee -a "$summary"
grep -E -A5 -- "--- FAIL|panic" "$OUT/persistent-test.log" | head -20 | tee -a "$summary"
exit 0
