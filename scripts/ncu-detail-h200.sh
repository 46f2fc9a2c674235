#!/usr/bin/env bash
# ncu-detail-h200.sh: Nsight Compute's detailed sections (speed of light, memory workload, warp
# state, occupancy, launch, scheduler) for the kernels of one full-residency graph-full decode
# step (OLMoE-1B-7B shape by default): what holds each kernel below the HBM rate. Build here with
# `make gpu-bins` (carry/bins.tar.xz), then on the GPU machine from the repository root:
#
#   OUT=$OUT/ncu bash scripts/ncu-detail-h200.sh [ARCH:SEED]
#
# It prepares the INT4 artifact in /dev/shm (unless present), runs a 3-token generate (one-token
# prompt) under ncu, skipping the first SKIP kernel launches (default 300: the prefill and the
# first decode step) and profiling the next COUNT (default 20: two layers and a little more), then
# the head and select of the same step (HEAD_SKIP/HEAD_COUNT on the lm_head and argmax kernels).
# details-<arch>.txt is ncu's details page; raw-<arch>.csv selected raw metrics per kernel; both are
# packed into ncu-detail.tgz beside summary.txt, digest-<arch>.txt and the .ncu-rep reports.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/ncu-detail}
SKIP=${SKIP:-300} COUNT=${COUNT:-20}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
. scripts/h200-lib.sh
h200_unpack
bin=carry/horizon-bench-cuda
spec=${1:-olmoe-1b-7b:924}
arch=${spec%%:*}
h200_artifacts "${ART_ROOT:-/dev/shm/ncu}" "$spec"
gen=(generate --device cuda --artifact "$arts" --capacity 0 --executor grouped-v1 --prompt-ids 1 --tokens 3)
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy
	--section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis)
t0=$SECONDS
ncu --clock-control none --cache-control none "${sections[@]}" --launch-skip "$SKIP" --launch-count "$COUNT" \
	-o "$OUT/step-$arch" "$bin" "${gen[@]}" >"$OUT/ncu-$arch.log" 2>&1
echo "ncu step: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
t0=$SECONDS
ncu --clock-control none --cache-control none "${sections[@]}" -k 'regex:argmax_step|matvec_f16_r4' --launch-skip 1 --launch-count 2 \
	-o "$OUT/head-$arch" "$bin" "${gen[@]}" >"$OUT/ncu-head-$arch.log" 2>&1
echo "ncu head: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
for r in step head; do
	[ -f "$OUT/$r-$arch.ncu-rep" ] || continue
	ncu --import "$OUT/$r-$arch.ncu-rep" --page details >"$OUT/details-$r-$arch.txt" 2>&1
	ncu --import "$OUT/$r-$arch.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size >"$OUT/raw-$r-$arch.csv" 2>&1
done
grep -E '^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Grid Size|Stall|Warp Cycles Per Issued' "$OUT"/details-step-$arch.txt | head -400 >"$OUT/digest-$arch.txt"
# The device tool returns only a few files: everything but the reports, the summary and the digest
# goes into one archive.
(cd "$OUT" && tar -czf /tmp/ncu-detail.tgz --exclude='*.ncu-rep' --exclude=summary.txt --exclude="digest-$arch.txt" . &&
	find . -maxdepth 1 -type f ! -name '*.ncu-rep' ! -name summary.txt ! -name "digest-$arch.txt" -delete && mv /tmp/ncu-detail.tgz .)
exit 0
