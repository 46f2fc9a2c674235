#!/usr/bin/env bash
# one-plan-h200.sh: the H200 checks of issue 13 (one model, one plan: the
# plan in the engine and in the CUDA stepper, runtime/device, the one cache
# protocol, executors by strategy, devices opened by name), in one device
# call on one GPU. Build here from clean clones (so every record names its revision):
#
#   carry/horizon-bench-cuda, carry/cuda.test, carry/horizon-verify  (HEAD)
#   carry/old/horizon-bench-cuda                                   (the old build, e.g. 50c0b05)
#
# packed as carry/bins.tar.xz when the tree and the binaries exceed what the
# device tool carries (the script unpacks it);
# then on the GPU machine, from the repository root:
#
#   bash scripts/one-plan-h200.sh
#
# 1. the CUDA tests (TestStepperMatchesOps for every step mode, executors,
#    determinism, conformance, rows) and the PTX freshness test;
# 2. horizon-bench reproduce of a full-residency (full-residency-v1 OLMoE
#    64/64) and a partial-residency (residency-ablation OLMoE c30 registered)
#    configuration with the new build: tokens and counters must be identical;
# 3. single requests, old and new build alternating on the same artifact
#    (OLMoE-1B-7B shape seed 924): c64 auto (graph-full) and c30 registered
#    (graph-segmented), three rounds.
# Everything goes to $OUT: logs, summary.txt, reproduction archives, generate JSONs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/one-plan-h200}
CACHE=${CACHE:-/dev/shm/horizon-artifacts}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"
# The device tool carries at most 64 MiB: the binaries may come packed.
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
if [ -x carry/kernels.test ]; then
	t0=$SECONDS
	(cd kernels && timeout 30 ../carry/kernels.test -test.v) >"$OUT/kernels-test.log" 2>&1
	echo "kernels-test: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
fi
t0=$SECONDS
(cd runtime/cuda && timeout 280 ../../carry/cuda.test -test.v -test.timeout 270s) >"$OUT/cuda-test.log" 2>&1
echo "cuda-test: rc=$? ($((SECONDS - t0)) s), $(grep -c '^--- PASS' "$OUT/cuda-test.log") top-level PASS, $(grep -c -- '--- FAIL' "$OUT/cuda-test.log") FAIL" | tee -a "$summary"
grep -E -- "--- FAIL|panic" -A8 "$OUT/cuda-test.log" | head -40
grep -E "^(=== RUN|--- PASS).*TestStepperMatchesOps" "$OUT/cuda-test.log" | grep PASS | head -20 | tee -a "$summary"

for pair in full-residency-v1:olmoe-0924-c64-grouped residency-ablation:olmoe-0924-c30-grouped-registered; do
	ed=${pair%%:*} cfg=${pair#*:}
	dir="$OUT/repro-$ed-$cfg"
	t0=$SECONDS
	carry/horizon-bench-cuda reproduce "editions/$ed" --configs "$cfg" --out "$dir" \
		--artifact-cache "$CACHE" --run-dir "/dev/shm/repro-run-$ed" >"$OUT/reproduce-$ed-$cfg.log" 2>&1
	echo "reproduce $ed $cfg: exit $? ($((SECONDS - t0)) s)" | tee -a "$summary"
	grep -E "IDENTICAL|DIFFER|differ" "$OUT/reproduce-$ed-$cfg.log" | tee -a "$summary"
	carry/horizon-verify "editions/$ed" --reproduction "$dir" >"$OUT/verify-$ed-$cfg.txt" 2>&1
	echo "horizon-verify --reproduction: exit $?" | tee -a "$summary"
	# The device is opened by name (device.Open): the worker's records must
	# still carry the GPU, its driver and the measured H2D bandwidth.
	python3 - "$dir" <<'PY' | tee -a "$summary"
import glob, json, sys
fs = sorted(glob.glob(sys.argv[1] + "/rerun/raw/*/block-1.json"))
for f in fs:
    d = json.load(open(f)); e = d.get("environment", {}); o = d.get("observations", {})
    print(f"  records: device {e.get('device')}, gpu {e.get('gpu')}, driver {e.get('driver')}, h2d_bandwidth_bytes_per_s {o.get('h2d_bandwidth_bytes_per_s')}")
if not fs:
    print("  records: none found")
PY
	tar -czf "$dir.tar.gz" -C "$OUT" "$(basename "$dir")" && rm -rf "$dir"
done

art=$(ls -d "$CACHE"/artifacts/*olmoe-1b-7b*924*int4* | head -1)
echo "artifact: $art" | tee -a "$summary"
prompt="The quick brown fox jumps over the lazy dog and keeps running through the forest until night falls."
for round in 1 2 3; do
	for build in old new; do
		bin=carry/horizon-bench-cuda
		[ $build = old ] && bin=carry/old/horizon-bench-cuda
		for c in 64:auto:staged 30:auto:registered; do
			IFS=: read -r cap mode transport <<<"$c"
			f="$OUT/gen-$build-c$cap-$transport-r$round.json"
			"$bin" generate --device cuda --artifact "$art" --capacity "$cap" --executor grouped-v1 --step-mode "$mode" \
				--transport "$transport" --prompt "$prompt" --tokens 128 --json >"$f" 2>"$f.err"
			python3 - "$f" "$build" <<'PY' | tee -a "$summary"
import json, sys
d = json.load(open(sys.argv[1])); c = d.get("cache", {})
print(f"{sys.argv[2]:3s} {sys.argv[1].split('/')[-1]}: {d['step_mode']} decode {d['decode_tok_s']:.1f} tok/s, TTFT {d['ttft_seconds']*1e3:.1f} ms, misses {c.get('misses')}, tokens[:6] {d['token_ids'][:6]}")
PY
		done
	done
done
python3 - "$OUT" <<'PY' | tee -a "$summary"
import json, glob, sys, statistics
out = sys.argv[1]
for cap in ("64-staged", "30-registered"):
    row = {}
    toks = {}
    for b in ("old", "new"):
        fs = sorted(glob.glob(f"{out}/gen-{b}-c{cap}-r*.json"))
        ds = [json.load(open(f)) for f in fs]
        row[b] = [d["decode_tok_s"] for d in ds]
        toks[b] = {tuple(d["token_ids"]) for d in ds}
    same = toks["old"] == toks["new"] and len(toks["new"]) == 1
    print(f"c{cap}: old median {statistics.median(row['old']):.1f} {row['old']}, new median {statistics.median(row['new']):.1f} {row['new']}, tokens identical across builds and rounds: {same}")
PY
# The device tool returns a handful of files, a few levels deep: pack
# everything into one archive beside the summary.
(cd "$OUT" && tar -czf /tmp/one-plan-h200.tar.gz --exclude=one-plan-h200.tar.gz . && find . -mindepth 1 ! -name summary.txt -delete && mv /tmp/one-plan-h200.tar.gz .)
ls -la "$OUT"
