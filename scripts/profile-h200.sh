#!/usr/bin/env bash
# profile-h200.sh: what one full-residency OLMoE-1B-7B decode step costs on the GPU, and the
# single-request step-mode comparison, on the GPU machine (not an edition).
# Build here first (`make carry`), then on the GPU machine from the repository root:
#
#   bash scripts/profile-h200.sh ARTIFACT_DIR        # a prepared olmoe-1b-7b int4 artifact
#   bash scripts/profile-h200.sh --find CACHE_DIR    # the olmoe-1b-7b artifact in a campaign's artifact cache
#
# Writes to $OUT (default out/profile):
#   ncu-graph-full-nodes.csv  Nsight Compute, every kernel node of a 3-token graph-full generate
#                             timed alone (gpu__time_duration.sum; --cache-control none, clocks
#                             left alone): what each kernel costs by itself
#   ncu-graph-full-graphs.csv the same run with --graph-profiling graph: each graph launch timed
#                             whole (kernels plus the gaps between them on the device, no host)
#   summary-*.txt, gen-*.json decode-bench.sh's single-request comparison at c64 and c30 (registered):
#                             graph-segmented with and without overlap, graph-wait, ops with and
#                             without prefetch ($BENCH overrides the list)
# The CSVs start with the generate output; `horizon-bench ceilings` is not involved.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-carry/horizon-bench-cuda}
OUT=${OUT:-out/profile}
mkdir -p "$OUT"
if [ "${1:-}" = --find ]; then
	art=$(python3 - "$2" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "**", "artifact.json"), recursive=True)):
    a = json.load(open(f))
    syn = a["identity"]["source"].get("synthetic") or {}
    if syn.get("arch") == "olmoe-1b-7b" and syn.get("seed") == 924 and "int4" in a["dtypes"]["routed_scheme"]:
        print(os.path.dirname(f))
        break
else:
    print("profile-h200: artifacts found:", file=sys.stderr)
    for f in glob.glob(os.path.join(sys.argv[1], "**", "artifact.json"), recursive=True):
        a = json.load(open(f))
        print(" ", f, a["identity"].get("arch"), a["identity"]["source"].get("synthetic"), file=sys.stderr)
PY
)
	[ -n "$art" ] || { echo "profile-h200: no olmoe-1b-7b seed 924 int4 artifact under $2" >&2; exit 1; }
else
	art=${1:?usage: profile-h200.sh ARTIFACT_DIR | --find CACHE_DIR}
fi
echo "artifact: $art"
gen=(generate --device cuda --artifact "$art" --capacity 64 --executor grouped-v1 --prompt-ids 1 --tokens 3)
t0=$SECONDS
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv "$bin" "${gen[@]}" \
	>"$OUT/ncu-graph-full-nodes.csv" 2>&1 || echo "ncu (nodes) failed: see $OUT/ncu-graph-full-nodes.csv"
echo "ncu nodes: $((SECONDS - t0)) s"
t0=$SECONDS
ncu --clock-control none --cache-control none --graph-profiling graph --metrics gpu__time_duration.sum --csv "$bin" "${gen[@]}" \
	>"$OUT/ncu-graph-full-graphs.csv" 2>&1 || echo "ncu (graphs) failed: see $OUT/ncu-graph-full-graphs.csv"
echo "ncu graphs: $((SECONDS - t0)) s"
python3 - "$OUT" <<'PY'
import csv, sys, collections
out = sys.argv[1]
for name in ("ncu-graph-full-nodes.csv", "ncu-graph-full-graphs.csv"):
    rows = []
    with open(f"{out}/{name}") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            rows.append((r["Kernel Name"], float(r["Metric Value"].replace(",", "")) / 1e3))
    print(f"{name}: {len(rows)} results, {sum(t for _, t in rows):.1f} us in all")
    agg = collections.OrderedDict()
    for k, t in rows:
        n, s = agg.get(k, (0, 0.0))
        agg[k] = (n + 1, s + t)
    for k, (n, s) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"  {k:40s} {n:5d} x {s / n:8.2f} us = {s:9.1f} us")
PY
# decode-bench.sh takes its artifact from $WORK/<arch>-<seed>-int4.
work=${WORK:-/tmp/decode-bench}
mkdir -p "$work"
[ -e "$work/olmoe-1b-7b-924-int4" ] || ln -s "$(realpath "$art")" "$work/olmoe-1b-7b-924-int4"
WORK=$work OUT=$OUT bash scripts/decode-bench.sh olmoe-1b-7b 924 "${BENCH:-64:grouped-v1:auto 30:grouped-v1:graph-segmented:registered 30:grouped-v1:graph-segmented:registered:hit-compute 30:grouped-v1:graph-wait:registered 30:grouped-v1:ops:registered 30:grouped-v1:ops:registered:off:next-layer}" || true
