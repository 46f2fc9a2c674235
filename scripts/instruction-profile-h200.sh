#!/usr/bin/env bash
# instruction-profile-h200.sh: what each step-plan instruction of a full-residency decode step costs
# on the GPU, against the HBM time of the bytes it reads (issue 14's baseline), for the OLMoE-1B-7B and
# Qwen1.5-MoE-A2.7B shapes. Build here (carry/horizon-bench-cuda, packed as carry/bins.tar.xz if
# needed), then on the GPU machine from the repository root:
#
#   OUT=$OUT/prof bash scripts/instruction-profile-h200.sh [olmoe-1b-7b:924 qwen15-moe-a27b:1]
#
# For each ARCH:SEED it synthesises and prepares an INT4 artifact in /dev/shm (unless present), then
# runs Nsight Compute over a 3-token graph-full generate (grouped-v1, full residency):
#   ncu-<arch>-nodes.csv   every kernel node timed alone: gpu__time_duration.sum, dram__bytes_read.sum,
#                          dram__bytes_write.sum (--cache-control none, --clock-control none)
#   ncu-<arch>-graphs.csv  --graph-profiling graph: each graph launch timed whole (kernels plus the
#                          gaps between them on the device)
# and prints, per instruction of the plan (runtime/plan), the kernels it launched in the last full
# step, their time, their DRAM bytes, the time those bytes take at HBM_TBS (default 4.26 TB/s, the
# measured H200 figure the issues use) and the achieved bandwidth. summary.txt holds the
# tables; everything is packed into $OUT/instruction-profile.tar.gz.
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
	art=/dev/shm/instruction-profile/$arch-$seed-int4
	if [ ! -f "$art/artifact.json" ]; then
		t0=$SECONDS
		ckpt=/dev/shm/instruction-profile/ckpt-$arch
		"$bin" synth --arch "$arch" --seed "$seed" --out "$ckpt" >"$OUT/synth-$arch.log" 2>&1 &&
			"$bin" prepare --checkpoint "$ckpt" --out "$art" >"$OUT/prepare-$arch.log" 2>&1
		echo "$arch artifact: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
		rm -rf "$ckpt"
	fi
	gen=(generate --device cuda --artifact "$art" --capacity 0 --executor grouped-v1 --prompt-ids 1 --tokens 3)
	"$bin" "${gen[@]}" --json >"$OUT/gen-$arch.json" 2>"$OUT/gen-$arch.err"
	t0=$SECONDS
	ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
		--csv "$bin" "${gen[@]}" >"$OUT/ncu-$arch-nodes.csv" 2>&1 || echo "ncu nodes failed ($arch)" | tee -a "$summary"
	echo "$arch ncu nodes: $((SECONDS - t0)) s" | tee -a "$summary"
	t0=$SECONDS
	ncu --clock-control none --cache-control none --graph-profiling graph --metrics gpu__time_duration.sum \
		--csv "$bin" "${gen[@]}" >"$OUT/ncu-$arch-graphs.csv" 2>&1 || echo "ncu graphs failed ($arch)" | tee -a "$summary"
	echo "$arch ncu graphs: $((SECONDS - t0)) s" | tee -a "$summary"
	python3 scripts/instruction-profile.py "$OUT/ncu-$arch-nodes.csv" "$OUT/ncu-$arch-graphs.csv" "$arch" "$HBM_TBS" | tee -a "$summary"
done
(cd "$OUT" && tar -czf /tmp/instruction-profile.tar.gz --exclude=instruction-profile.tar.gz . && find . -mindepth 1 ! -name summary.txt -delete && mv /tmp/instruction-profile.tar.gz .)
