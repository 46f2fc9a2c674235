#!/usr/bin/env bash
# instruction-profile-h200.sh: what each step-plan instruction of a full-residency decode step costs
# on the GPU, against the HBM time of the bytes it reads (issue 14's baseline), for the OLMoE-1B-7B and
# Qwen1.5-MoE-A2.7B shapes. Build here (carry/horizon-bench-cuda, packed as carry/bins.tar.xz if
# needed), then on the GPU machine from the repository root:
#
#   OUT=$OUT/prof bash scripts/instruction-profile-h200.sh [olmoe-1b-7b:924 qwen15-moe-a27b:1]
#
# For each ARCH:SEED it synthesises and prepares an INT4 artifact under ART_ROOT (default
# /dev/shm/instruction-profile; h200_artifacts' layout, <root>/<arch>-<seed>-int4) unless present, then
# runs Nsight Compute over a 3-token graph-full generate (grouped-v1, full residency):
#   ncu-<arch>-nodes.csv   every kernel node timed alone: gpu__time_duration.sum, dram__bytes_read.sum,
#                          dram__bytes_write.sum (--cache-control none, --clock-control none)
#   ncu-<arch>-graphs.csv  --graph-profiling graph: each graph launch timed whole (kernels plus the
#                          gaps between them on the device)
# and prints, per instruction of the plan (runtime/plan), the kernels it launched in the last full
# step, their time, their DRAM bytes, the time those bytes take at HBM_TBS (default 4.26 TB/s, the
# measured H200 figure the issues use) and the achieved bandwidth. summary.txt holds the
# tables; everything is packed into $OUT/instruction-profile.tar.gz.
#
# DEPTH=d profiles the decode steps after a d-token prompt instead of a 1-token one, as
# PERF-DEPTH-v1 runs them (FP16 KV cache, batched prefill, the KV cache sized to the request):
# the attention instruction then reads d positions of K and V a layer. The profiler is limited to
# the decode step's kernels (NCU_KERNELS, a regex), so the prompt's prefill runs unprofiled, and
# the whole-graph pass is skipped; the files are named ncu-<arch>-d<d>-*.csv. For example:
#
#   DEPTH=8064 OUT=$OUT/prof bash scripts/instruction-profile-h200.sh qwen15-moe-a27b:1
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/instruction-profile}
HBM_TBS=${HBM_TBS:-4.26}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
bin=carry/horizon-bench-cuda
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
ncu --version | tail -1 | tee -a "$summary"
for spec in ${@:-olmoe-1b-7b:924 qwen15-moe-a27b:1}; do
	arch=${spec%%:*} seed=${spec#*:}
	art=${ART_ROOT:-/dev/shm/instruction-profile}/$arch-$seed-int4
	if [ ! -f "$art/artifact.json" ]; then
		t0=$SECONDS
		ckpt=/dev/shm/instruction-profile/ckpt-$arch
		"$bin" synth --arch "$arch" --seed "$seed" --out "$ckpt" >"$OUT/synth-$arch.log" 2>&1 &&
			"$bin" prepare --checkpoint "$ckpt" --out "$art" >"$OUT/prepare-$arch.log" 2>&1
		echo "$arch artifact: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
		rm -rf "$ckpt"
	fi
	gen=(generate --device cuda --artifact "$art" --capacity 0 --executor grouped-v1 --tokens 3)
	tag=$arch filter=()
	if [ -n "${DEPTH:-}" ]; then
		# d prompt ids cycling through 1..1000 (every model's vocabulary has them)
		gen+=(--prompt-ids "$(seq 0 $((DEPTH - 1)) | awk '{printf "%s%d", (NR > 1 ? "," : ""), $1 % 1000 + 1}')"
			--kv fp16 --prefill batched --max-context $((DEPTH + 8)))
		tag=$arch-d$DEPTH
		filter=(--kernel-name "regex:${NCU_KERNELS:-^(embed_step|matvec_f16|qk_norm|rope_kv_step|attention_step|attention_pf_step|attention_in_step|route_step|router_route|experts_|silu_mul|shared_down|add_gated_resid|add_f32|argmax_step)}")
	else
		gen+=(--prompt-ids 1)
	fi
	"$bin" "${gen[@]}" --json >"$OUT/gen-$tag.json" 2>"$OUT/gen-$tag.err"
	t0=$SECONDS
	ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
		"${filter[@]}" --csv "$bin" "${gen[@]}" >"$OUT/ncu-$tag-nodes.csv" 2>&1 || echo "ncu nodes failed ($tag)" | tee -a "$summary"
	echo "$tag ncu nodes: $((SECONDS - t0)) s" | tee -a "$summary"
	t0=$SECONDS
	if [ -n "${DEPTH:-}" ]; then
		# whole-graph timing would profile every prefill kernel too (the name filter does not
		# apply to graph launches); the decode benchmarks give the step's time instead
		: >"$OUT/ncu-$tag-graphs.csv"
	else
		ncu --clock-control none --cache-control none --graph-profiling graph --metrics gpu__time_duration.sum \
			--csv "$bin" "${gen[@]}" >"$OUT/ncu-$tag-graphs.csv" 2>&1 || echo "ncu graphs failed ($tag)" | tee -a "$summary"
		echo "$tag ncu graphs: $((SECONDS - t0)) s" | tee -a "$summary"
	fi
	python3 scripts/instruction-profile.py "$OUT/ncu-$tag-nodes.csv" "$OUT/ncu-$tag-graphs.csv" "$tag" "$HBM_TBS" | tee -a "$summary"
done
(cd "$OUT" && tar -czf /tmp/instruction-profile.tar.gz --exclude=instruction-profile.tar.gz . && find . -mindepth 1 ! -name summary.txt -delete && mv /tmp/instruction-profile.tar.gz .)
