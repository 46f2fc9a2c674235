#!/usr/bin/env bash
# ncu-prefill-h200.sh: Nsight Compute on batched prefill's grouped int4 expert matmuls (the
# tensor-core kernels matmul_tc_grouped_*), one batched mode at a time: what holds a chunk
# iteration at ~1.4 µs (kernels/NOTES.md, session 20). Build here with `make gpu-bins`
# (carry/bins.tar.xz), then on the GPU machine from the repository root:
#
#   OUT=$OUT/ncu bash scripts/ncu-prefill-h200.sh                    # batched-tc and batched-tc-ring2
#   MODES="batched-tc-noring" PROMPT=512 OUT=... bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
#
# For each mode of MODES (BenchmarkPrefillModes' names, separated by spaces or commas: each is
# profiled in its own run, so two modes' kernels never share a table) it runs the benchmark at one PROMPT length
# (default 64) under ncu with the kernel filter regex:matmul_tc_grouped, skipping the warm-up
# prefill's launches (SKIP, default 3 x the layers: gate, up and down of each) and profiling the next COUNT
# (default 6: two layers). Sections: speed of light, memory workload, warp state, occupancy,
# launch, scheduler, and source counters (stalls by PTX line), and each stall reason's warps a
# issued instruction (smsp__average_warps_issue_stalled_*_per_issue_active, in the digest).
# Out: summary.txt (each step's result, the digests' headline lines, the per-kernel tables' tops)
# and ncu-prefill.tgz (digest-<mode>.txt: duration, DRAM throughput, issue, stalls per kernel;
# details-<mode>.txt, ncu's details page; kernels-<mode>.txt; the logs). The .ncu-rep reports stay
# on the GPU machine (REPORTS=1 packs them too): the build machine has no ncu to read them. Two
# files, so several runs fit one device call's 8 (OUT=$OUT/p512 for a second one).
#
# ALL_KERNELS=1 adds, per mode, a light pass over every kernel of the benchmark (duration and DRAM
# bytes only; the warm-up and the measured generate, each a prefill and 8 decode steps) and
# kernels-<mode>.txt: time per kernel name, summed and halved (one generate), largest first, with
# launches and GB/s: where a batched prefill's time goes, kernel by kernel.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/ncu-prefill}
PROMPT=${PROMPT:-64} COUNT=${COUNT:-6}
MODES=${MODES:-batched-tc batched-tc-ring2}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # absolute: the profiled runs work from runtime/cuda
summary="$OUT/summary.txt"
: >"$summary"
. scripts/h200-lib.sh
h200_unpack
spec=${1:-olmoe-1b-7b:924}
arch=${spec%%:*}
case $arch in olmoe*) layers=16 ;; *) layers=24 ;; esac
SKIP=${SKIP:-$((3 * layers))}
h200_artifacts "${ART_ROOT:-/dev/shm/persistent}" "$spec"
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy
	--section LaunchStats --section SchedulerStats --section SourceCounters
	--metrics 'regex:smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio')
for mode in ${MODES//,/ }; do  # commas or spaces: one profiled run a mode
	t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" HORIZON_BENCH_PROMPTS="$PROMPT" HORIZON_BENCH_PREFILL_MODES="$mode" \
		timeout "${NCU_LIMIT:-240}" ncu --clock-control none --cache-control none "${sections[@]}" --import-source yes \
		-k 'regex:matmul_tc_grouped' --launch-skip "$SKIP" --launch-count "$COUNT" -o "$OUT/$mode-$arch" \
		../../carry/cuda.test -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x) >"$OUT/ncu-$mode.log" 2>&1
	echo "ncu $mode ($arch, $PROMPT tokens): rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	rep="$OUT/$mode-$arch.ncu-rep"
	[ -f "$rep" ] || continue
	ncu --import "$rep" --page details >"$OUT/details-$mode.txt" 2>&1
	grep -E '^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Grid Size|Dynamic Shared|Stall|stalled|Warp Cycles Per Issued|Eligible Warps' \
		"$OUT/details-$mode.txt" | head -800 >"$OUT/digest-$mode.txt"
	grep -E '^  [a-z_]+.*\(|Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|Achieved Occupancy' "$OUT/digest-$mode.txt" | head -40 | tee -a "$summary"
	[ "${ALL_KERNELS:-0}" = 1 ] || continue
	t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS="$arts" HORIZON_BENCH_PROMPTS="$PROMPT" HORIZON_BENCH_PREFILL_MODES="$mode" \
		timeout "${NCU_LIMIT:-240}" ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --page raw --print-units base \
		../../carry/cuda.test -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x) >"$OUT/all-$mode.csv" 2>"$OUT/all-$mode.err"
	echo "ncu every kernel, $mode: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	python3 - "$OUT/all-$mode.csv" >"$OUT/kernels-$mode.txt" <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
t, b, n = collections.Counter(), collections.Counter(), collections.Counter()
for r in csv.DictReader(rows):
    try:
        d = float(r["gpu__time_duration.sum"].replace(",", ""))
        by = float(r["dram__bytes_read.sum"].replace(",", ""))
    except (KeyError, ValueError):
        continue  # the units row
    k = r["Kernel Name"].split("(")[0]
    t[k] += d; b[k] += by; n[k] += 1
total = sum(t.values())
print(f"{'kernel':48s} {'us/generate':>12s} {'share':>6s} {'launches':>8s} {'GB/s':>7s}")
for k, d in t.most_common():
    print(f"{k[:48]:48s} {d/2/1e3:12.1f} {d/total:6.1%} {n[k]//2:8d} {b[k]/d if d else 0:7.0f}")
print(f"total {total/2/1e3:.1f} us a generate (--print-units base: ns and bytes)")
PY
	head -25 "$OUT/kernels-$mode.txt" | tee -a "$summary"
done
# The device tool returns at most 8 files: the summary stays loose, the rest goes into one archive
# (the reports only with REPORTS=1; they are moved to /tmp/ncu-reports otherwise).
ex=(--exclude=summary.txt)
if [ "${REPORTS:-0}" != 1 ]; then
	mkdir -p /tmp/ncu-reports && find "$OUT" -maxdepth 1 -name '*.ncu-rep' -exec mv {} /tmp/ncu-reports/ \;
fi
(cd "$OUT" && tar -czf /tmp/ncu-prefill.tgz "${ex[@]}" . && find . -maxdepth 1 -type f ! -name summary.txt -delete &&
	mv /tmp/ncu-prefill.tgz .)
exit 0
