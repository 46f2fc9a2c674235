#!/usr/bin/env bash
# Session 39 on an H100 (no H200 came): the declared FP16 dense activations (dense_activations:
# fp16, engine.LoadOptions.DenseActivations) on a GPU for the first time.
#   - their GPU tests (TestMatMulA16: every path bit for bit against MatMul on the CPU-rounded
#     rows; TestDenseActivationsOnDevice: tokens and bits across capacities and step modes, the
#     CPU reference within 5e-3 + 5e-3|ref|) and the FP16 expert activations' beside them, while
#     the two full shapes' INT4 artifacts are made;
#   - the HF oracle with FP16 expert and dense activations on the tiny models (tolerance 2e-2);
#   - BenchmarkPrefillModes over an FP16 KV cache, batched-tc-a16r (what ttft-v1's and prefill-v1's
#     FP16 twins ran before) against batched-tc-a16rd (what they declare now) at 64, 256, 512 and
#     1,024 tokens, twice.
# carry ["carry/bins.tar.xz","carry/jit-cache.tar.xz"] (make gpu-bins first).
#   DEADLINE=560 bash results/s39/h100.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s39
TESTS='TestMatMulA16|TestDenseActivationsOnDevice|TestExpertActivationsOnDevice|TestMatMulParts'
h200_tests_beside_artifacts "$TESTS" olmoe-1b-7b:924 qwen15-moe-a27b:1
t0=$SECONDS
timeout 100 python3 scripts/oracle_hf.py --bin carry/horizon-bench-cuda --device cuda --expert-activations fp16 \
	--dense-activations fp16 --prefill batched --work /tmp/s39-oracle --arch olmoe-tiny --arch qwen2moe-tiny \
	--out "$R/oracle-a16d.json" >/tmp/s39-oracle.log 2>&1
echo "oracle a16 + dense: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
grep -v '^+ ' /tmp/s39-oracle.log | tail -30 | cut -c1-600 >>"$summary"
LENGTHS=${LENGTHS:-64,256,512,1024}
MODES=${MODES:-batched-tc-a16r,batched-tc-a16rd}
export HORIZON_BENCH_KV=fp16
for run in a b; do
	[ "$run" = a ] && l=$(((DEADLINE - SECONDS - 40) / 2))
	[ "$run" = b ] && l=$((DEADLINE - SECONDS - 40))
	[ "$l" -gt 30 ] && h200_prefill_bench "$run" ../../carry/cuda.test "$l"
done
bash scripts/jit-cache.sh save "$R" | tee -a "$summary"
echo "done at $SECONDS s" | tee -a "$summary"
