#!/usr/bin/env bash
# llamacpp-h200.sh: the llama.cpp peer numbers on the GPU machine, in one command (docs/peers.md).
#
#   OUT=... scripts/llamacpp/llamacpp-h200.sh            (from the repo root; the device tool sets OUT)
#
# Phases, each timed and logged to $OUT/run.log:
#   build    the llama.cpp build hook ($LLAMACPP_BUILD, default carry/llamacpp/build.sh: an ignored,
#            uncommitted file, as is carry/llamacpp-src.tar.xz; see docs/peers.md) makes
#            llama-bench + llama-quantize under $LLAMACPP_ROOT (CUDA sm_90; kept on a warm machine)
#   convert  beside the build: per model, horizon-bench synth (same seeds as scripts/h200-lib.sh)
#            -> F16 GGUF by llama.cpp's converter (it needs the source, not the build)
#   prepare  per model: routed experts Q4_0, the rest F16 (scripts/llamacpp/gguf_synth.py; synth and
#            conversion here too when the convert phase did not make the F16 GGUF); the GGUF is
#            kept under $LLAMACPP_MODELS for a second call on a warm machine
#   bench    llama-bench -fa on -ngl 99 -r 3, JSON lines: one run for every pp length (d 0), then
#            one tg128 run per context depth
# Models: olmoe-1b-7b (seed 924) then qwen15-moe-a27b (seed 1). A model's last depth is its context
# length less 128 (OLMoE 3968, Qwen 8064), so depth + tg128 stays inside n_ctx_train; see docs/peers.md.
#
# $OUT gets at most 5 files (the device tool returns 8): run.log, summary.txt, llama-bench.jsonl
# (every result line, as llama-bench writes them), gguf-types.json (the GGUFs' tensor types) and
# logs.tar.gz (build, synth, convert, quantize and llama-bench logs; re-packed after every phase).
#
# Environment:
#   LLAMACPP_BUDGET_S  wall-clock budget for the whole script (default 540): a phase that would not
#                      fit is skipped and said so; a running llama-bench is cut at the budget
#   LLAMACPP_CPU=1     CPU mode for checking everything but CUDA on a machine without a GPU: builds
#                      without CUDA, the tiny archs, small -p/-n/-d, -ngl 0, -r 1
#   LLAMACPP_ROOT      build root (default /tmp/llamacpp-peer; outside the repo, so llama.cpp's build
#                      info does not pick up this repo's git commit)
#   LLAMACPP_MODELS    where the GGUFs are made and kept (default /dev/shm/llamacpp-peer; falls
#                      back to $LLAMACPP_ROOT/models when /dev/shm has too little room)
#   LLAMACPP_MODELS_LIST  "arch:seed:depths ..." to run instead of the defaults
#   LLAMACPP_PP, LLAMACPP_TG, LLAMACPP_REPS, LLAMACPP_NGL, LLAMACPP_JOBS  override the defaults
#   HORIZON_BENCH      the horizon-bench binary for synth (default: in cuda mode carry/horizon-bench-cuda,
#                      else carry/horizon-bench; when neither is there, carry/bins.tar.xz or
#                      carry/horizon-bench.xz is unpacked first. In CPU mode only carry/horizon-bench,
#                      unpacked from carry/horizon-bench.xz when missing: the CUDA build needs a GPU)
#   LLAMACPP_PYTHON    python with torch + numpy (default python3)
#   LLAMACPP_EARLY=0   do not synthesise and convert the F16 GGUFs beside the build (default: they
#                      are, from a second unpack of the source, and the prepare phase only quantizes)
#   LLAMACPP_PREPARE_ONLY=1  build and prepare the GGUFs, run no llama-bench (a first call on a
#                      fresh machine, so that the call that benches has the time for its own work)
set -uo pipefail

[ -n "${OUT:-}" ] || { echo "llamacpp-h200: set OUT to the output folder" >&2; exit 2; }
mkdir -p "$OUT" || { echo "llamacpp-h200: cannot create $OUT" >&2; exit 2; }
T0=$SECONDS
budget=${LLAMACPP_BUDGET_S:-540}
cpu=${LLAMACPP_CPU:-0}
root=${LLAMACPP_ROOT:-/tmp/llamacpp-peer}
models=${LLAMACPP_MODELS:-/dev/shm/llamacpp-peer}
py=${LLAMACPP_PYTHON:-python3}
build_hook=${LLAMACPP_BUILD:-carry/llamacpp/build.sh}
tarball=${LLAMACPP_SRC:-carry/llamacpp-src.tar.xz}
here=$(cd "$(dirname "$0")" && pwd)
logs=$root/logs
run_log=$OUT/run.log summary=$OUT/summary.txt jsonl=$OUT/llama-bench.jsonl types=$OUT/gguf-types.json
if [ "$cpu" = 1 ]; then
	mode=cpu
	list=${LLAMACPP_MODELS_LIST:-"olmoe-tiny:924:0,64 qwen2moe-tiny:1:0,64"}
	pp=${LLAMACPP_PP:-16,64}
	tg=${LLAMACPP_TG:-16}
	reps=${LLAMACPP_REPS:-1}
	ngl=${LLAMACPP_NGL:-0}
	jobs=${LLAMACPP_JOBS:-$(nproc)}
else
	mode=cuda
	list=${LLAMACPP_MODELS_LIST:-"olmoe-1b-7b:924:0,512,2048,3968 qwen15-moe-a27b:1:0,512,2048,3968,4096,8064"}
	pp=${LLAMACPP_PP:-16,64,256,512,1024,2048,3968,4096}
	tg=${LLAMACPP_TG:-128}
	reps=${LLAMACPP_REPS:-3}
	ngl=${LLAMACPP_NGL:-99}
	jobs=${LLAMACPP_JOBS:-16}
fi
rm -f "$run_log" "$summary" "$jsonl" "$types" "$OUT/logs.tar.gz"
rm -rf "$logs"
mkdir -p "$logs"

say() { echo "[$((SECONDS - T0))s] $*" | tee -a "$run_log"; }
left() { echo $((budget - (SECONDS - T0))); }
pack_logs() { tar -czf "$OUT/logs.tar.gz" -C "$root" logs 2>/dev/null || say "warning: could not pack $logs"; }
# lim: the seconds left, at least 1 (timeout 0 would mean no limit)
lim() { local l; l=$(left); [ "$l" -ge 1 ] && echo "$l" || echo 1; }
# fits NEED: true when NEED seconds are left in the budget
fits() { [ "$(left)" -ge "$1" ]; }

say "llamacpp-h200: mode $mode, budget ${budget}s, models: $list; pp $pp, tg $tg, reps $reps, ngl $ngl"
say "host: $(uname -n), $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
{
	echo "llama.cpp peer ($mode): llama-bench -fa on -ngl $ngl -r $reps; pp $pp at depth 0; tg$tg at each depth"
	echo "source: $(cat "${tarball%.tar.xz}.commit" 2>/dev/null || echo 'unknown commit (no .commit beside the tarball)')"
} >"$summary"

# --- horizon-bench for synth -------------------------------------------------
hb=${HORIZON_BENCH:-}
if [ -z "$hb" ]; then
	# candidates, best first: CPU mode only the plain build (the CUDA one needs libcuda and a GPU)
	if [ "$mode" = cpu ]; then
		hb_cands=(carry/horizon-bench)
		hb_packs=(carry/horizon-bench.xz)
	else
		hb_cands=(carry/horizon-bench-cuda carry/horizon-bench)
		hb_packs=(carry/bins.tar.xz carry/horizon-bench.xz)
	fi
	hb_pick() { local c; for c in "${hb_cands[@]}"; do [ -x "$c" ] && { hb=$c; return 0; }; done; return 1; }
	# when none is there, unpack a packed one (in the same order) until one is
	if ! hb_pick; then
		for p in "${hb_packs[@]}"; do
			[ -f "$p" ] || continue
			case $p in
			*.tar.xz) tar -xJf "$p" -C carry || say "warning: could not unpack $p" ;;
			*.xz)
				if ! { xz -dc "$p" >"${p%.xz}" && chmod +x "${p%.xz}"; }; then
					say "warning: could not unpack $p"
					rm -f "${p%.xz}"
				fi
				;;
			esac
			hb_pick && break
		done
	fi
fi
if [ -z "$hb" ] || [ ! -x "$hb" ]; then
	say "synth: no horizon-bench binary (HORIZON_BENCH ${HORIZON_BENCH:-unset}; $mode mode looks for ${hb_cands[*]:-carry/horizon-bench}); only GGUFs already under $models can run"
	hb=""
else
	say "synth: $hb"
fi

# --- convert, beside the build -------------------------------------------------------
# The F16 GGUFs need llama.cpp's converter, not its build: each model that has no Q4 GGUF yet is
# synthesised and converted now, in the background, from a second unpack of the source, while the
# hook builds (it uses the CPUs too, but the conversion is mostly one thread and the disk). The
# prepare phase below then only quantizes an F16 GGUF marked .ok. LLAMACPP_EARLY=0 turns this off.
# room: bytes free under a folder
room() { df -PB1 "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'; }
# the shapes' parameter counts (for the room check and the budget's time estimates)
params_of() {
	case $1 in
	olmoe-1b-7b) echo 6920000000 ;;
	qwen15-moe-a27b) echo 14320000000 ;;
	*) echo 20000000 ;;
	esac
}
early_convert() {
	local spec arch seed depths f16 ckpt np t csrc=$root/convert-src
	rm -rf "$csrc" && mkdir -p "$csrc" && tar -xJf "$tarball" -C "$csrc" --strip-components=1 || { echo "early: cannot unpack $tarball"; return 1; }
	for spec in $list; do
		IFS=: read -r arch seed depths <<<"$spec"
		[ -f "$models/$arch-$seed-q4e.gguf.ok" ] && continue
		f16=$models/$arch-$seed-f16.gguf
		[ -f "$f16.ok" ] && continue
		np=$(params_of "$arch")
		free_b=$(room "$models")
		# the checkpoint and the F16 GGUF at once (2 bytes a parameter each) + 1 GB, beside any
		# F16 GGUF made before it
		if [ -z "$free_b" ] || [ "$free_b" -lt $((np * 4 + 1000000000)) ]; then
			echo "early: $arch: $models has ${free_b:-unknown} bytes free, too few; the prepare phase makes it"
			continue
		fi
		t=$SECONDS
		ckpt=$models/ckpt-$arch-$seed
		rm -rf "$ckpt" "$f16"
		if ! timeout "$(lim)" "$hb" synth --arch "$arch" --seed "$seed" --out "$ckpt" >"$logs/synth-$arch.log" 2>&1; then
			echo "early: $arch: synth failed"
			rm -rf "$ckpt"
			continue
		fi
		if timeout "$(lim)" "$py" "$here/gguf_synth.py" --llama-src "$csrc" --checkpoint "$ckpt" --arch "$arch" \
			--f16 "$f16" --drop-checkpoint >"$logs/convert-$arch.log" 2>&1; then
			touch "$f16.ok"
			echo "early: $arch: synth + F16 GGUF in $((SECONDS - t))s"
		else
			echo "early: $arch: F16 conversion failed (logs/convert-$arch.log)"
			rm -f "$f16"
		fi
		rm -rf "$ckpt"
	done
	return 0
}
early_pid=""
mkdir -p "$models" 2>/dev/null
if [ "${LLAMACPP_EARLY:-1}" = 1 ] && [ -n "$hb" ] && [ -d "$models" ]; then
	early_convert >"$logs/early.log" 2>&1 &
	early_pid=$!
	say "convert: synth + F16 GGUFs started beside the build (logs/early.log)"
fi

# --- build -----------------------------------------------------------------
t=$SECONDS
if [ ! -x "$build_hook" ]; then
	say "build: FAILED: no build hook $build_hook (it is kept out of the repo; docs/peers.md says how to make it)"
	pack_logs
	exit 1
fi
if ! "$build_hook" "$tarball" "$root" "$mode" "$jobs" >"$logs/build.log" 2>&1; then
	say "build: FAILED after $((SECONDS - t))s:"
	[ -n "$early_pid" ] && kill "$early_pid" 2>/dev/null
	tail -25 "$logs/build.log" | tee -a "$run_log"
	cp "$root/cmake.log" "$root/build.log" "$logs/" 2>/dev/null
	pack_logs
	exit 1
fi
grep -E '^build:' "$logs/build.log" | while read -r l; do say "  $l"; done
say "build: ok in $((SECONDS - t))s"
bench=$root/bin/llama-bench quant=$root/bin/llama-quantize src=$root/src
grep -E '^build: (compiled|kept)' "$logs/build.log" | head -1 >>"$summary"
if [ -n "$early_pid" ]; then
	t=$SECONDS
	wait "$early_pid"
	while read -r l; do say "  $l"; done <"$logs/early.log"
	say "convert: waited ${t:+$((SECONDS - t))}s for it after the build"
fi
pack_logs

# --- per model: prepare, then bench ---------------------------------------------
echo "[]" >"$types"

# gguf_done STEP LOG RC: after a gguf_synth.py run that made $gguf (STEP names it in messages):
# on success its report lines into run.log and the .ok mark; on failure the end of LOG, a summary
# line, no GGUF, rc_all 1. Returns RC's success.
gguf_done() {
	local step=$1 log=$2 rc=$3
	[ -f "${gguf%.gguf}.quantize.log" ] && mv "${gguf%.gguf}.quantize.log" "$logs/quantize-$arch.log"
	if [ "$rc" != 0 ]; then
		say "prepare: FAILED $step $arch, rc $rc (see logs/$(basename "$log")):"
		grep -E 'gguf_synth|Error|error' "$log" | tail -5 | tee -a "$run_log"
		echo "$arch: $step failed (rc $rc)" >>"$summary"
		rm -f "$gguf"
		rc_all=1
		pack_logs
		return 1
	fi
	grep '^gguf_synth:' "$log" | while read -r l; do say "  $l"; done
	touch "$gguf.ok"
}

rc_all=0
for spec in $list; do
	IFS=: read -r arch seed depths <<<"$spec"
	gguf=$models/$arch-$seed-q4e.gguf
	# an earlier call may have made it in the fallback folder
	if [ ! -f "$gguf.ok" ] && [ -f "$root/models/$arch-$seed-q4e.gguf.ok" ]; then gguf=$root/models/$arch-$seed-q4e.gguf; fi
	say "== $arch (seed $seed)"
	# prepare ----------------------------------------------------------------
	early_f16=$models/$arch-$seed-f16.gguf
	if [ -f "$gguf" ] && [ -f "$gguf.ok" ]; then
		say "prepare: kept $gguf ($(stat -c %s "$gguf") bytes)"
	elif [ -f "$early_f16.ok" ] && fits $(($(params_of "$arch") / 300000000 + 10)); then
		# converted beside the build: quantize only (gguf_synth.py without --checkpoint)
		t=$SECONDS
		gguf=$models/$arch-$seed-q4e.gguf
		rm -f "$gguf" "$gguf.ok" "$gguf.types.json"
		timeout "$(lim)" "$py" "$here/gguf_synth.py" --llama-src "$src" --f16 "$early_f16" --quantize "$quant" --q4 "$gguf" \
			--threads "$(nproc)" --drop-f16 --summary "$gguf.types.json" >"$logs/quantize-only-$arch.log" 2>&1
		rc=$?
		rm -f "$early_f16" "$early_f16.ok"
		gguf_done quantize "$logs/quantize-only-$arch.log" "$rc" || continue
		say "prepare: $arch quantized in $((SECONDS - t))s (its F16 GGUF made beside the build)"
	else
		np=$(params_of "$arch")
		# synth + convert + quantize, seconds: 106 for OLMoE and 199 for Qwen, against the 81 s and
		# 144 s they took on the H100 machine (16 cores, /dev/shm; results/h100-s36)
		need_s=$((np / 80000000 + 20))
		[ "$mode" = cpu ] && need_s=15
		if ! fits "$need_s"; then
			say "prepare: SKIPPED $arch: ~${need_s}s needed, $(left)s left"
			echo "$arch: skipped (budget: prepare needs ~${need_s}s, $(left)s left)" >>"$summary"
			continue
		fi
		if [ -z "$hb" ]; then
			say "prepare: FAILED $arch: no horizon-bench"
			echo "$arch: not run (no horizon-bench binary)" >>"$summary"
			rc_all=1
			continue
		fi
		mkdir -p "$models" || { say "prepare: FAILED: cannot create $models"; rc_all=1; continue; }
		# at most two of checkpoint (BF16), F16 GGUF and Q4 GGUF at once (gguf_synth.py removes the
		# checkpoint before it quantizes): 2 * 2 bytes a parameter + 1 GB
		scratch=$models
		free_b=$(room "$models")
		if [ -n "$free_b" ] && [ "$free_b" -lt $((np * 4 + 1000000000)) ]; then
			scratch=$root/models
			mkdir -p "$scratch"
			say "prepare: $models has $free_b bytes free, too few; using $scratch"
			gguf=$scratch/$arch-$seed-q4e.gguf
		fi
		t=$SECONDS
		ckpt=$scratch/ckpt-$arch-$seed
		rm -rf "$ckpt" "$gguf" "$gguf.ok" "$gguf.types.json" "$scratch/$arch-$seed-f16.gguf"
		if ! timeout "$(lim)" "$hb" synth --arch "$arch" --seed "$seed" --out "$ckpt" >"$logs/synth-$arch.log" 2>&1; then
			say "prepare: FAILED synth $arch (see logs/synth-$arch.log):"
			tail -5 "$logs/synth-$arch.log" | tee -a "$run_log"
			echo "$arch: synth failed" >>"$summary"
			rm -rf "$ckpt"
			rc_all=1
			pack_logs
			continue
		fi
		say "prepare: synth $arch in $((SECONDS - t))s ($(du -sb "$ckpt" | cut -f1) bytes)"
		t=$SECONDS
		timeout "$(lim)" "$py" "$here/gguf_synth.py" --llama-src "$src" --checkpoint "$ckpt" --arch "$arch" \
			--f16 "$scratch/$arch-$seed-f16.gguf" --quantize "$quant" --q4 "$gguf" --threads "$(nproc)" --drop-f16 --drop-checkpoint \
			--summary "$gguf.types.json" >"$logs/convert-$arch.log" 2>&1
		rc=$?
		rm -rf "$ckpt" "$scratch/$arch-$seed-f16.gguf"
		gguf_done convert/quantize "$logs/convert-$arch.log" "$rc" || continue
		say "prepare: $arch converted + quantized in $((SECONDS - t))s"
	fi
	if [ -f "$gguf.types.json" ]; then
		"$py" -c 'import json,sys; a=json.load(open(sys.argv[1])); a.extend(json.load(open(sys.argv[2]))); json.dump(a,open(sys.argv[1],"w"),indent=1)' \
			"$types" "$gguf.types.json" 2>>"$run_log" || say "warning: could not add $gguf.types.json to $types"
	fi
	echo "$arch: $(basename "$gguf") $(stat -c %s "$gguf") bytes" >>"$summary"
	pack_logs

	# bench ------------------------------------------------------------------
	if [ "${LLAMACPP_PREPARE_ONLY:-0}" = 1 ]; then
		say "bench: not run (LLAMACPP_PREPARE_ONLY=1: the build and the GGUFs only, for a later call)"
		continue
	fi
	# one run for all pp lengths at depth 0, then one tg run a depth (each its own model load)
	runs=("pp:-p $pp -n 0 -d 0")
	for d in ${depths//,/ }; do runs+=("tg-d$d:-p 0 -n $tg -d $d"); done
	for r in "${runs[@]}"; do
		name=${r%%:*} args=${r#*:}
		# a run needs about: load + (for deep tg) the depth prefill, reps times
		need=20
		[ "$mode" = cpu ] && need=5
		if ! fits "$need"; then
			say "bench: SKIPPED $arch $name: $(left)s left"
			echo "$arch $name: skipped (budget)" >>"$summary"
			continue
		fi
		t=$SECONDS
		# shellcheck disable=SC2086
		timeout -k 5 "$(lim)" "$bench" -m "$gguf" $args -fa on -ngl "$ngl" -r "$reps" -o jsonl \
			>"$logs/bench-$arch-$name.jsonl" 2>"$logs/bench-$arch-$name.log"
		rc=$?
		n=$(grep -c '^{' "$logs/bench-$arch-$name.jsonl" 2>/dev/null)
		cat "$logs/bench-$arch-$name.jsonl" >>"$jsonl" 2>/dev/null
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			say "bench: $arch $name CUT at the budget after $((SECONDS - t))s ($n results kept)"
			echo "$arch $name: cut at the budget ($n results kept)" >>"$summary"
		elif [ "$rc" != 0 ]; then
			say "bench: $arch $name FAILED rc $rc after $((SECONDS - t))s ($n results); the end of its log:"
			tail -8 "$logs/bench-$arch-$name.log" | tee -a "$run_log"
			echo "$arch $name: failed (rc $rc)" >>"$summary"
			rc_all=1
		else
			say "bench: $arch $name ok in $((SECONDS - t))s ($n results)"
		fi
		pack_logs
	done
done

# --- summary ---------------------------------------------------------------------
if [ -s "$jsonl" ]; then
	"$py" "$here/llamabench_table.py" "$jsonl" >>"$summary" 2>>"$run_log" || say "summary: the table could not be made (see run.log)"
fi
say "done in $((SECONDS - T0))s (budget ${budget}s), rc $rc_all"
cat "$summary" >>"$run_log"
pack_logs
exit "$rc_all"
