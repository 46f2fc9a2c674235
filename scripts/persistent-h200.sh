#!/usr/bin/env bash
# persistent-h200.sh: the H200 checks and measurements of the persistent
# decode kernel (issue 14, step mode persistent), in one device call on one
# GPU. Build here from a clean clone (so every record names its revision):
#
#   carry/cuda.test, carry/kernels.test, carry/horizon-bench-cuda
#
# packed as carry/bins.tar.xz when the tree and the binaries exceed what the
# device tool carries (the script unpacks it); then on the GPU machine, from
# the repository root:
#
#   bash scripts/persistent-h200.sh
#
# 1. the persistent kernel's tests first (TestPersistent*: every build
#    against op by op, both tiny models, both schemes, every executor;
#    TestStepperLookahead), under a short timeout, then the whole CUDA
#    suite (the kernels' bodies were shared with it);
# 2. INT4 artifacts of the OLMoE-1B-7B (seed 924) and Qwen1.5-MoE-A2.7B
#    (seed 1) shapes in /dev/shm, then BenchmarkDecodeModes: single-request
#    greedy decode (256 tokens, grouped-v1, full residency) in graph-full
#    steps and in each persistent build, tokens compared, and one traced
#    run per build whose per-instruction table goes to $OUT/profile/.
# SKIP_SUITE=1 skips the whole suite; BENCH_ONLY=1 runs step 2 alone.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/persistent-h200}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$OUT/profile"
summary="$OUT/summary.txt"
: >"$summary"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
if [ "${BENCH_ONLY:-0}" != 1 ]; then
	if [ -x carry/kernels.test ]; then
		(cd kernels && timeout 30 ../carry/kernels.test -test.v) >"$OUT/kernels-test.log" 2>&1
		echo "kernels-test: rc=$?" | tee -a "$summary"
	fi
	t0=$SECONDS
	(cd runtime/cuda && timeout 150 ../../carry/cuda.test -test.v -test.run 'TestPersistent|TestStepperLookahead' -test.timeout 140s) >"$OUT/persistent-test.log" 2>&1
	echo "persistent tests: rc=$? ($((SECONDS - t0)) s), $(grep -c -- '--- PASS' "$OUT/persistent-test.log") PASS, $(grep -c -- '--- FAIL' "$OUT/persistent-test.log") FAIL" | tee -a "$summary"
	grep -E -A6 -- "--- FAIL|panic|Error" "$OUT/persistent-test.log" | head -30 | tee -a "$summary"
	if [ "${SKIP_SUITE:-0}" != 1 ]; then
		t0=$SECONDS
		(cd runtime/cuda && timeout 240 ../../carry/cuda.test -test.v -test.timeout 230s) >"$OUT/cuda-test.log" 2>&1
		echo "cuda-test: rc=$? ($((SECONDS - t0)) s), $(grep -c '^--- PASS' "$OUT/cuda-test.log") top-level PASS, $(grep -c -- '--- FAIL' "$OUT/cuda-test.log") FAIL" | tee -a "$summary"
		grep -E -A8 -- "--- FAIL|panic" "$OUT/cuda-test.log" | head -30 | tee -a "$summary"
	fi
fi
arts=""
for spec in olmoe-1b-7b:924 qwen15-moe-a27b:1; do
	arch=${spec%%:*} seed=${spec#*:}
	art=/dev/shm/persistent/$arch-$seed-int4
	if [ ! -f "$art/artifact.json" ]; then
		t0=$SECONDS
		ckpt=/dev/shm/persistent/ckpt-$arch
		carry/horizon-bench-cuda synth --arch "$arch" --seed "$seed" --out "$ckpt" >"$OUT/synth-$arch.log" 2>&1 &&
			carry/horizon-bench-cuda prepare --checkpoint "$ckpt" --out "$art" >"$OUT/prepare-$arch.log" 2>&1
		echo "$arch artifact: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
		rm -rf "$ckpt"
	fi
	arts="$arts${arts:+:}$art"
done
t0=$SECONDS
prof=$(cd "$OUT/profile" && pwd)
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" HORIZON_PROFILE_DIR="$prof" timeout 400 \
	../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeModes -test.benchtime 1x -test.v -test.timeout 390s) >"$OUT/bench.log" 2>&1
echo "BenchmarkDecodeModes: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "^Benchmark|FAIL|panic|Error" "$OUT/bench.log" | tee -a "$summary"
for f in "$OUT"/profile/*.md; do
	[ -f "$f" ] && { echo "== $(basename "$f")"; cat "$f"; } | tee -a "$summary"
done
exit 0
