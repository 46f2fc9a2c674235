#!/usr/bin/env bash
# speed-compare-h200.sh: single-request decode speed of several builds,
# interleaved round by round on one GPU and one artifact, so that machine
# drift hits every build alike. Build here from clean clones, one
# carry/<name>/horizon-bench-cuda per build (carry/horizon-bench-cuda is
# "new"), packed as carry/bins.tar.xz if needed; then on the GPU machine:
#
#   BUILDS="new prev old" CONFIGS="30:registered 64:staged" ROUNDS=4 TOKENS=512 \
#       bash scripts/speed-compare-h200.sh
#
# CONFIGS are capacity:transport pairs (step mode auto, grouped-v1), on the
# OLMoE-1B-7B shape, seed 924, INT4. Output: $OUT/summary.txt and one
# generate JSON per run, packed into $OUT/speed-compare.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/speed-compare}
BUILDS=${BUILDS:-new old}
CONFIGS=${CONFIGS:-30:registered}
ROUNDS=${ROUNDS:-4}
TOKENS=${TOKENS:-512}
ART=${ART:-/dev/shm/speed-compare/olmoe-1b-7b-924-int4}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
bin_of() { if [ "$1" = new ]; then echo carry/horizon-bench-cuda; else echo "carry/$1/horizon-bench-cuda"; fi; }
if [ ! -f "$ART/artifact.json" ]; then
	t0=$SECONDS
	ckpt=/dev/shm/speed-compare/ckpt
	carry/horizon-bench-cuda synth --arch olmoe-1b-7b --seed 924 --out "$ckpt" >"$OUT/synth.log" 2>&1 &&
		carry/horizon-bench-cuda prepare --checkpoint "$ckpt" --out "$ART" >"$OUT/prepare.log" 2>&1
	echo "artifact: rc=$? ($((SECONDS - t0)) s) $ART" | tee -a "$summary"
	rm -rf "$ckpt"
fi
prompt="The quick brown fox jumps over the lazy dog and keeps running through the forest until night falls."
for round in $(seq 1 "$ROUNDS"); do
	for c in $CONFIGS; do
		IFS=: read -r cap transport <<<"$c"
		for build in $BUILDS; do
			f="$OUT/gen-$build-c$cap-$transport-r$round.json"
			"$(bin_of "$build")" generate --device cuda --artifact "$ART" --capacity "$cap" --executor grouped-v1 \
				--transport "$transport" --prompt "$prompt" --tokens "$TOKENS" --json >"$f" 2>"$f.err"
			python3 - "$f" "$build" <<'PY' | tee -a "$summary"
import json, sys
try:
    d = json.load(open(sys.argv[1])); c = d.get("cache", {})
    print(f"{sys.argv[2]:5s} {sys.argv[1].split('/')[-1]}: {d['step_mode']} decode {d['decode_tok_s']:.1f} tok/s, misses {c.get('misses')}")
except Exception as e:
    print(f"{sys.argv[2]:5s} {sys.argv[1].split('/')[-1]}: no result ({e})")
PY
		done
	done
done
python3 - "$OUT" "$BUILDS" "$CONFIGS" <<'PY' | tee -a "$summary"
import glob, json, statistics, sys
out, builds, configs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
for c in configs:
    cap, tr = c.split(":")
    toks, line = set(), []
    for b in builds:
        ds = []
        for f in sorted(glob.glob(f"{out}/gen-{b}-c{cap}-{tr}-r*.json")):
            try:
                ds.append(json.load(open(f)))
            except Exception:
                pass
        v = [d["decode_tok_s"] for d in ds]
        toks |= {tuple(d["token_ids"]) for d in ds}
        if v:
            line.append(f"{b} median {statistics.median(v):.1f} (min {min(v):.1f}, max {max(v):.1f}, n {len(v)})")
    print(f"c{cap} {tr}: " + "; ".join(line) + f"; one token stream across builds and rounds: {len(toks) == 1}")
PY
(cd "$OUT" && tar -czf /tmp/speed-compare.tar.gz --exclude=speed-compare.tar.gz . && find . -mindepth 1 ! -name summary.txt -delete && mv /tmp/speed-compare.tar.gz .)
