#!/usr/bin/env bash
# decode-bench.sh: full-shape decode on the GPU machine, one request per
# configuration (not an edition: editions come from `horizon-bench run`).
# Build first with `make gpu-test` (carry/horizon-bench-cuda), then on the
# GPU machine from the repository root:
#
#   bash scripts/decode-bench.sh olmoe-1b-7b 924 "64:grouped-v1:auto 64:grouped-v1:ops 30:scalar-v1:auto"
#
# Each configuration is capacity:executor:step-mode[:transport]. The
# synthetic checkpoint and its artifact go to ${WORK:-/tmp/decode-bench};
# one JSON per configuration (horizon-bench generate --json) and a summary
# table go to $OUT (or out/decode-bench); synth/prepare logs to $WORK.
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
	IFS=: read -r cap ex mode transport <<<"$c"
	transport=${transport:-staged}
	name="gen-$arch-c$cap-$ex-$mode-$transport"
	"$bin" generate --device cuda --artifact "$art" --capacity "$cap" --executor "$ex" --step-mode "$mode" \
		--transport "$transport" --prompt "$prompt" --tokens 128 --json >"$OUT/$name.json"
	python3 - "$OUT/$name.json" <<'PY' | tee -a "$summary"
import json, sys
d = json.load(open(sys.argv[1]))
c = d.get("cache", {})
print(f"{sys.argv[1].split('/')[-1]}: {d['step_mode']} decode {d['decode_tok_s']:.1f} tok/s, TTFT {d['ttft_seconds']*1e3:.1f} ms, misses {c.get('misses')}, h2d {c.get('h2d_bytes')}, VRAM device/process {d.get('vram_peak_bytes')}/{d.get('vram_process_peak_bytes')}")
PY
done
