#!/usr/bin/env bash
# decode-bench.sh: full-shape decode on the GPU machine, one request per
# configuration (not an edition: editions come from `horizon-bench run`).
# Build first with `make gpu-test` (carry/horizon-bench-cuda), then on the
# GPU machine from the repository root:
#
#   bash scripts/decode-bench.sh olmoe-1b-7b 924 "64:grouped-v1:auto 64:grouped-v1:ops 30:scalar-v1:auto"
#
# Each configuration is capacity:executor:step-mode[:transport[:overlap[:prefetch]]]
# (generate's --capacity, --executor, --step-mode, --transport, --overlap and
# --prefetch; defaults staged, off, off), e.g. 30:grouped-v1:auto:registered:hit-compute
# or 30:grouped-v1:ops:staged:off:next-layer. overlap hit-compute needs
# partial residency and graph-segmented steps (auto or graph-segmented);
# prefetch next-layer needs ops or auto (it runs op by op). The synthetic
# checkpoint and its artifact go to ${WORK:-/tmp/decode-bench}; one JSON per
# configuration (horizon-bench generate --json, named after all six fields)
# and a summary table (summary-<arch>.txt, one line per configuration, also
# printed) go to $OUT (or out/decode-bench); synth/prepare logs to $WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=$1 seed=$2 configs=$3
bin=${BIN:-carry/horizon-bench-cuda}
work=${WORK:-/tmp/decode-bench}
OUT=${OUT:-out/decode-bench}
mkdir -p "$work" "$OUT"
art="$work/$arch-$seed-int4"
if [ ! -f "$art/artifact.json" ]; then
	t0=$SECONDS
	"$bin" synth --arch "$arch" --seed "$seed" --out "$work/$arch-$seed-ckpt" >"$work/synth-$arch-$seed.log" 2>&1
	echo "synth $arch seed $seed: $((SECONDS - t0)) s"
	t0=$SECONDS
	"$bin" prepare --checkpoint "$work/$arch-$seed-ckpt" --out "$art" >"$work/prepare-$arch-$seed.log" 2>&1
	echo "prepare: $((SECONDS - t0)) s"
	rm -rf "$work/$arch-$seed-ckpt"
fi
prompt="The quick brown fox jumps over the lazy dog and keeps running through the forest until night falls."
summary="$OUT/summary-$arch.txt"
for c in $configs; do
	IFS=: read -r cap ex mode transport overlap prefetch <<<"$c"
	transport=${transport:-staged} overlap=${overlap:-off} prefetch=${prefetch:-off}
	name="gen-$arch-c$cap-$ex-$mode-$transport-overlap-$overlap-prefetch-$prefetch"
	"$bin" generate --device cuda --artifact "$art" --capacity "$cap" --executor "$ex" --step-mode "$mode" \
		--transport "$transport" --overlap "$overlap" --prefetch "$prefetch" \
		--prompt "$prompt" --tokens 128 --json >"$OUT/$name.json"
	python3 - "$OUT/$name.json" <<'PY' | tee -a "$summary"
import json, sys
d = json.load(open(sys.argv[1]))
c = d.get("cache", {})
pf = ""
if "prefetch_precision" in d and "prefetch_recall" in d:
    pf = f", prefetch precision {d['prefetch_precision']:.3f} recall {d['prefetch_recall']:.3f}"
print(f"{sys.argv[1].split('/')[-1]}: {d['step_mode']} {d.get('transport', 'staged')} overlap {d.get('overlap', 'off')} prefetch {d.get('prefetch', 'off')}"
      f" decode {d['decode_tok_s']:.1f} tok/s, TTFT {d['ttft_seconds']*1e3:.1f} ms, misses {c.get('misses')}, h2d {c.get('h2d_bytes')}{pf},"
      f" VRAM device/process {d.get('vram_peak_bytes')}/{d.get('vram_process_peak_bytes')}")
PY
done
