#!/usr/bin/env bash
# prefill-h200.sh: batched prefill on the GPU in one device call. Build here with `make gpu-bins`
# (carry/bins.tar.xz), then on the GPU machine from the repository root:
#
#   bash scripts/prefill-h200.sh
#
# 1. the whole CUDA suite (the conformance suite's Batched and row-op sections, the FP16 KV
#    checks, TestBatchedPrefillOnDevice, TestMatmulTC, TestExpertMatMulGroupTC, TestBatchedPrefillTensorCores)
#    -> cuda-test.log (SKIP_SUITE=1 skips it, SUITE_RUN=pattern runs part of it), on the GPU while
# 2. the CPUs make INT4 artifacts of both full shapes (ART_ROOT, default /dev/shm/persistent; ARCHS="olmoe-1b-7b:924" for one);
# 3. BenchmarkPrefillModes at full residency with a prompt of each length in LENGTHS: token at
#    a time (graph-full steps), batched on the row kernels (tuning.noMatmulTC), batched on the
#    tensor cores (the default) -> bench.log (MODES=batched-tc,token keeps some of them: every mode
#    BenchmarkPrefillModes' comment lists, e.g. batched-tc-readback-nofd (session 24's default),
#    batched-tc-nopdl, batched-tc-noburst, batched-tc-nogateup, batched-tc-sep, batched-tc-goal132; PROFILE=1 adds each batched mode's per-instruction profile), prompt tok/s per mode and length in summary.txt, with each
#    batched mode's largest first-step logit difference from token at a time;
# 4. with GENERATE=1 also `horizon-bench generate --json` token and batched (the tensor cores; GEN_MODES=batched for one),
#    8 output tokens -> generate-<arch>-<n>-<mode>.json.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/prefill}
LENGTHS=${LENGTHS:-32 512 2048}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
suite_pid=""
if [ "${SKIP_SUITE:-0}" != 1 ]; then
	h200_suite "${SUITE_LIMIT:-280}" &
	suite_pid=$!
fi
h200_artifacts "${ART_ROOT:-/dev/shm/persistent}" ${ARCHS:-olmoe-1b-7b:924 qwen15-moe-a27b:1}
[ -z "$suite_pid" ] || wait "$suite_pid"
t0=$SECONDS
(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$arts HORIZON_BENCH_PROMPTS=$(echo $LENGTHS | tr ' ' ,) \
	HORIZON_BENCH_PREFILL_MODES=${MODES:-token,batched,batched-tc} HORIZON_BENCH_PREFILL_PROFILE=${PROFILE:-} \
	timeout "${BENCH_LIMIT:-300}" ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) >"$OUT/bench.log" 2>&1
echo "BenchmarkPrefillModes: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -E "prompt-tok/s|within|profile" "$OUT/bench.log" | tee -a "$summary"
[ "${GENERATE:-0}" = 1 ] || exit 0
for art in ${arts//:/ }; do
	a=$(basename "$art")
	for n in $LENGTHS; do
		ids=$(python3 -c "print(','.join(str(100 + (i * 7919) % 30000) for i in range($n)))")
		for mode in ${GEN_MODES:-token batched}; do
			f="$OUT/generate-$a-$n-$mode.json"
			t0=$SECONDS
			timeout 300 carry/horizon-bench-cuda generate --device cuda --artifact "$art" --executor grouped-v1 \
				--prompt-ids "$ids" --tokens 8 --prefill "$mode" --json >"$f" 2>"$OUT/generate-$a-$n-$mode.err"
			rc=$?
			python3 - "$f" "$n" "$mode" "$rc" "$((SECONDS - t0))" <<'PY' | tee -a "$summary"
import json, sys
f, n, mode, rc, wall = sys.argv[1:]
try:
    d = json.load(open(f))
except Exception as e:
    print(f"{f}: rc={rc} unreadable ({e})"); sys.exit()
p = d.get("prefill_seconds")
rate = (int(n) / p) if isinstance(p, (int, float)) and p > 0 else "UNKNOWN"
print(f"{f.split('/')[-1]}: rc={rc} wall={wall}s prefill={p} s prompt_tok_s={rate} ttft={d.get('ttft_seconds')} decode_tok_s={d.get('decode_tok_s')} ids={d.get('token_ids')}")
PY
		done
	done
done
exit 0
