#!/usr/bin/env bash
# device-campaign.sh: run benchmark campaigns (and the transformers peer baseline) on the GPU
# machine in time-boxed calls, resumably, and bring each finished edition back as ONE archive.
#
# Run on the GPU machine from the repository root, after `make carry` here (it builds
# carry/horizon-bench-cuda and carry/horizon-verify, which travel in carry/):
#
#   bash scripts/device-campaign.sh residency39 ablation --budget 540        # one after the other
#   bash scripts/device-campaign.sh residency39 ablation --gpu 0,1 --unsafe-vram-gpu   # at the same time, see --gpu
#   bash scripts/device-campaign.sh baseline --budget 540                     # HF peer baseline only
#   bash scripts/device-campaign.sh smoke --bin bin/horizon-bench --budget 120   # the CPU smoke campaign (try-out)
#
# Steps, in the order given:
#   residency39   campaigns/residency39.yaml         -> edition technical-preview-v3
#   ablation      campaigns/residency-ablation.yaml  -> edition residency-ablation
#   smoke         campaigns/smoke.yaml               -> edition smoke-cpu
#   NAME / PATH   campaigns/NAME.yaml, or a campaign file
#   baseline      scripts/baseline_hf.py, eager and compiled, --blocks 1, on the synthetic
#                 olmoe-1b-7b seed 924 and qwen15-moe-a27b seed 1 checkpoints (synthesised into
#                 --baseline-work, reused while there, removed once both modes are done)
#
# Each campaign runs
#   carry/horizon-bench-cuda run campaigns/<file> --run-dir runs/<edition> \
#       --out out/editions/<edition> --artifact-cache runs/artifact-cache --stop-after <slot>
# with <slot> = what is left of --budget minus --reserve (room for the worker in flight and the
# packing), under a hard `timeout` at the budget. The runner exits 75 when the slot ends with
# workers left; running this script again continues where it stopped (the run directory's
# journal, the prepared artifacts in the shared cache). All campaigns share one artifact cache:
# the three synthetic checkpoints are prepared once (~19 GB of artifacts; a 29 GB Qwen checkpoint
# exists while it is prepared).
#
# The CUDA driver's JIT cache is restored first from carry/jit-cache.tar.xz when that is carried and
# the cache is empty (scripts/jit-cache.sh; `bash scripts/jit-cache.sh save $OUT` brings a new one back).
#
# What comes back in $OUT (at most 8 files, each <= 16 MiB, on this workplace's device runner):
#   status.txt                   one line per step, disk and GPU memory; the exit status below
#   device-campaign.log          this call's log (runner output, verify output, timings)
#   <edition>.tar.gz             a finished edition: `tar -xzf <edition>.tar.gz -C editions`
#                                gives editions/<edition>/ (or `make unpack-edition ARCHIVE=...`).
#                                Verified with carry/horizon-verify first when it is there.
#                                Larger than 16 MiB: it comes back split as <edition>.tar.gz.part-0,
#                                -1, ... (at most 5 parts); make unpack-edition ARCHIVE=<dir>/<edition>.tar.gz joins them.
#   <edition>.state.tar.gz       an unfinished edition's run directory without artifacts (journal,
#                                finished records). Put it in carry/state/ before the next call:
#                                a fresh (cold) machine restores it and redoes only the rest. The
#                                journal keys records by the binary's SHA-256, so records made by
#                                another build are redone, never mixed into one edition.
#   baseline-<arch>-<seed>.json  the baseline of one checkpoint, both modes
#
# Exit status: 0 every step finished (editions verified and packed, baselines written);
# 75 some step has work left (call again); 1 a step failed (see status.txt); 2 bad usage.
#
# Idempotent: a finished edition (out/editions/<edition>/manifest.json) is not run again, only
# verified and packed again; a finished baseline JSON (out/baseline/) is copied again.
#
# --gpu 0,1 pins the campaigns, in order, to those GPUs (CUDA_VISIBLE_DEVICES) and runs them at
# the same time; the baseline runs after them. The worker's NVML sampler follows
# CUDA_VISIBLE_DEVICES (runtime/observe), and this script sets CUDA_DEVICE_ORDER=PCI_BUS_ID so
# that CUDA and NVML number the GPUs alike. Concurrent campaigns share the host's CPUs and
# memory bandwidth (expert misses are copied from host memory): each worker records its own
# measured H2D bandwidth. Two instances of this script may also run at once, one per GPU, each
# with its own --out and CUDA_VISIBLE_DEVICES in the environment, sharing --artifact-cache.
set -uo pipefail

usage() {
	sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	cat <<'EOF'
Options:
  --budget S          seconds this call may take in all (default 540; the device call limit is 600)
  --reserve S         seconds kept after the runner's --stop-after for the worker in flight and
                      packing (default 150)
  --gpu LIST          comma list of GPU indices, one per campaign step, e.g. 0,1: run them at once
  --unsafe-vram-gpu   accepted for compatibility (NVML now follows CUDA_VISIBLE_DEVICES)
  --baseline-gpu N    CUDA_VISIBLE_DEVICES for the baseline (default: inherited)
  --baseline-arch A   only the baseline of this architecture (olmoe-1b-7b or qwen15-moe-a27b)
  --bin PATH          horizon-bench (default carry/horizon-bench-cuda)
  --verify PATH       horizon-verify (default carry/horizon-verify; skipped when absent)
  --out DIR           where the files that come back go (default $OUT, else out/device-out)
  --artifact-cache D  shared artifact cache (default runs/artifact-cache)
  --checkpoint-scratch D
                      synthesise checkpoints in D, the last kept for the next artifact of it (run
                      --checkpoint-scratch; default: beside each artifact). The fidelity campaign's
                      four artifacts (~57 GB, FP16 and INT4 of both shapes) and a 29 GB Qwen
                      checkpoint do not fit the 64 GiB disk together: artifacts in /dev/shm, the
                      checkpoint on disk (--artifact-cache /dev/shm/horizon-artifacts
                      --checkpoint-scratch /tmp/horizon-scratch)
  --state DIR         state archives to restore on a cold machine (default carry/state)
  --baseline-work D   synthetic checkpoints for the baseline (default /tmp/horizon-baseline)
  --python PATH       python for the baseline (default python3)
  --prepare-only      only prepare (or verify) the campaigns' artifacts in --artifact-cache, one
                      campaign after another (run --prepare-only, run directory runs/prepare/<edition>),
                      e.g. in the background while GPU tests or a peer's build run: the campaigns'
                      calls then verify and reuse them (waiting on the cache's lock while a
                      preparation is still going). Writes only its log and status to --out: give
                      a background instance its own (--out /tmp/prepare-out). Exit 0 ready, 1 a
                      preparation failed
EOF
}

budget=540 reserve=150 gpus="" unsafe_gpu=0 baseline_gpu="" baseline_arch=""
bin=carry/horizon-bench-cuda verify=carry/horizon-verify out_dir="${OUT:-out/device-out}"
cache=runs/artifact-cache scratch="" state_dir=carry/state baseline_work=/tmp/horizon-baseline python=python3
steps=() prepare_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	--budget) budget=$2; shift ;;
	--reserve) reserve=$2; shift ;;
	--gpu) gpus=$2; shift ;;
	--unsafe-vram-gpu) unsafe_gpu=1 ;;
	--baseline-gpu) baseline_gpu=$2; shift ;;
	--baseline-arch) baseline_arch=$2; shift ;;
	--bin) bin=$2; shift ;;
	--verify) verify=$2; shift ;;
	--out) out_dir=$2; shift ;;
	--artifact-cache) cache=$2; shift ;;
	--checkpoint-scratch) scratch=$2; shift ;;
	--state) state_dir=$2; shift ;;
	--baseline-work) baseline_work=$2; shift ;;
	--python) python=$2; shift ;;
	--prepare-only) prepare_only=1 ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "device-campaign: unknown option $1 (--help)" >&2; exit 2 ;;
	*) steps+=("$1") ;;
	esac
	shift
done
[ ${#steps[@]} -gt 0 ] || { usage >&2; exit 2; }
[[ $budget =~ ^[0-9]+$ && $reserve =~ ^[0-9]+$ ]] || { echo "device-campaign: --budget and --reserve are seconds" >&2; exit 2; }
[ -f go.mod ] && [ -d campaigns ] || { echo "device-campaign: run me from the repository root" >&2; exit 2; }

[ -x "$bin" ] || { echo "device-campaign: no executable $bin (make carry, or --bin)" >&2; exit 2; }
campaign_steps=() want_baseline=0
for s in "${steps[@]}"; do
	if [ "$s" = baseline ]; then want_baseline=1; else campaign_steps+=("$s"); fi
done
IFS=, read -r -a gpu_list <<<"$gpus"
if [ -n "$gpus" ] && [ ${#gpu_list[@]} -ne ${#campaign_steps[@]} ]; then
	echo "device-campaign: --gpu names ${#gpu_list[@]} GPUs for ${#campaign_steps[@]} campaigns" >&2
	exit 2
fi
export CUDA_DEVICE_ORDER=PCI_BUS_ID

start=$(date +%s)
deadline=$((start + budget))
final_margin=20 # seconds kept at the very end for verify, tar and status
max_archive=$((16 * 1024 * 1024))
max_parts=5
# status files per --out, so that two instances (one per GPU) keep their own
status_dir=out/device-status/$(printf '%s' "$out_dir" | sha256sum | cut -c1-12)
mkdir -p "$out_dir" out/editions out/baseline "$status_dir" runs
log="$out_dir/device-campaign.log"
: >"$log"
rm -f "$status_dir"/*

left() { echo $((deadline - $(date +%s))); }

# say TAG MESSAGE: a timestamped line on stdout and in the log.
say() {
	local l
	printf -v l '%(%H:%M:%S)T +%4ds [%s] %s' -1 $(($(date +%s) - start)) "$1" "$2"
	echo "$l"
	echo "$l" >>"$log"
}

# prefix TAG: say every line of stdin.
prefix() {
	local line
	while IFS= read -r line; do say "$1" "$line"; done
}

# The driver's JIT cache from an earlier lease (carry/jit-cache.tar.xz; scripts/jit-cache.sh), so
# that the first worker does not compile every kernel module (~40 s on a fresh H100).
bash scripts/jit-cache.sh restore 2>&1 | prefix jit-cache

# status STEP STATE DETAIL: the step's line of status.txt (files, so background steps can write).
status() { printf '%-14s %-9s %s\n' "$1" "$2" "$3" >"$status_dir/${1//\//_}.status"; }

campaign_file() {
	case "$1" in
	residency39) echo campaigns/residency39.yaml ;;
	ablation) echo campaigns/residency-ablation.yaml ;;
	*.yaml | *.yml) echo "$1" ;;
	*) echo "campaigns/$1.yaml" ;;
	esac
}

# edition_of FILE: the edition a campaign file publishes.
edition_of() { sed -n 's/^edition:[[:space:]]*//p' "$1" | head -n1 | tr -d '"'"'"'[:space:]'; }

# pack_edition EDITION STEP: verify and pack out/editions/EDITION into $OUT/EDITION.tar.gz.
pack_edition() {
	local ed=$1 step=$2 dir=out/editions/$1 vres="not verified (no $verify)" rc=0
	if [ -x "$verify" ]; then
		"$verify" "$dir" 2>&1 | tail -n 40 | prefix "$step verify"
		if [ "${PIPESTATUS[0]}" -eq 0 ]; then vres="horizon-verify passed"; else vres="horizon-verify FAILED"; rc=1; fi
	fi
	local tmp="out/$ed.tar.gz.tmp"
	tar --sort=name --owner=0 --group=0 --numeric-owner -czf "$tmp" -C out/editions "$ed" || { status "$step" failed "tar failed"; return 1; }
	local size
	size=$(stat -c %s "$tmp")
	if [ "$size" -gt "$max_archive" ]; then
		# A file over 16 MiB does not come back: split the archive into parts that do
		# (cat EDITION.tar.gz.part-* > EDITION.tar.gz here). At most max_parts of them, so
		# that status.txt, the log and the parts stay within the 8 files a call returns.
		local parts=$(((size + max_archive - 1) / max_archive))
		if [ "$parts" -gt "$max_parts" ]; then
			mv "$tmp" "out/$ed.tar.gz"
			say "$step" "ERROR: $ed.tar.gz is $size bytes, more than $max_parts parts of 16 MiB; kept in out/ only"
			status "$step" failed "$ed complete, $vres, but $ed.tar.gz is $size bytes > $max_parts x 16 MiB (kept as out/$ed.tar.gz)"
			return 1
		fi
		rm -f "$out_dir/$ed.tar.gz" "$out_dir/$ed.tar.gz.part-"*
		split -b "$max_archive" -d -a 1 "$tmp" "$out_dir/$ed.tar.gz.part-" || { status "$step" failed "split failed"; return 1; }
		(cd "$out_dir" && sha256sum "$ed.tar.gz.part-"*) | prefix "$step parts"
		say "$step" "$ed.tar.gz is $size bytes: $parts parts ($ed.tar.gz.part-0..), sha256 of the whole $(sha256sum "$tmp" | cut -d' ' -f1)"
		rm -f "$tmp"
	else
		mv "$tmp" "$out_dir/$ed.tar.gz"
	fi
	rm -f "$out_dir/$ed.state.tar.gz"
	say "$step" "$ed.tar.gz: $size bytes ($(numfmt --to=iec "$size")), $vres"
	if [ $rc -eq 0 ]; then status "$step" complete "$ed: $vres; $ed.tar.gz $size bytes"; else status "$step" failed "$ed: $vres; $ed.tar.gz $size bytes"; fi
	return $rc
}

# run_campaign STEP GPU: run one campaign for what is left of the budget.
run_campaign() {
	local step=$1 gpu=$2 file ed
	file=$(campaign_file "$step")
	[ -f "$file" ] || { say "$step" "no campaign file $file"; status "$step" failed "no campaign file $file"; return 1; }
	ed=$(edition_of "$file")
	[ -n "$ed" ] || { status "$step" failed "no edition in $file"; return 1; }
	local run_dir=runs/$ed ed_dir=out/editions/$ed
	if [ -f "$ed_dir/manifest.json" ]; then
		say "$step" "$ed was finished in an earlier call: verify and pack only"
		pack_edition "$ed" "$step"
		return
	fi
	if [ ! -s "$run_dir/journal.jsonl" ] && [ -f "$state_dir/$ed.state.tar.gz" ]; then
		say "$step" "restoring the run directory from $state_dir/$ed.state.tar.gz"
		mkdir -p runs && tar -xzf "$state_dir/$ed.state.tar.gz" -C runs
	fi
	local hard=$(($(left) - final_margin))
	local slot=$((hard - reserve))
	if [ "$slot" -le 0 ]; then
		say "$step" "no time left in this call for $ed (${hard}s before the packing margin)"
		status "$step" pending "$ed: not started in this call (no time left)"
		return 75
	fi
	local env=()
	[ -n "$gpu" ] && env=(CUDA_VISIBLE_DEVICES="$gpu")
	say "$step" "$bin run $file -> $ed_dir; --stop-after ${slot}s, killed at ${hard}s${gpu:+, CUDA_VISIBLE_DEVICES=$gpu}"
	local runlog=$status_dir/${step//\//_}.runlog
	env "${env[@]}" timeout -s TERM -k 15 "$hard" "$bin" run "$file" --run-dir "$run_dir" --out "$ed_dir" \
		--artifact-cache "$cache" ${scratch:+--checkpoint-scratch "$scratch"} --stop-after "${slot}s" 2>&1 | tee "$runlog" | prefix "$step"
	local rc=${PIPESTATUS[0]}
	local remain
	remain=$(grep -o '[0-9]* of [0-9]* workers remain' "$runlog" | tail -n1)
	case $rc in
	0)
		say "$step" "$ed complete"
		pack_edition "$ed" "$step"
		return
		;;
	75) status "$step" pending "$ed: ${remain:-workers remain} (stopped by --stop-after; call again)" ;;
	124 | 137) status "$step" pending "$ed: killed at the budget (the worker in flight is lost; call again, or raise --reserve)" ;;
	*)
		say "$step" "runner failed with exit $rc"
		status "$step" failed "$ed: runner exit $rc: $(grep -v '^\s*$' "$runlog" | tail -n1 | cut -c1-300)"
		;;
	esac
	if [ -s "$run_dir/journal.jsonl" ]; then
		tar --sort=name -czf "$out_dir/$ed.state.tar.gz" -C runs --exclude="$ed/artifacts" --exclude="$ed/.lock" "$ed" &&
			say "$step" "run state: $ed.state.tar.gz ($(stat -c %s "$out_dir/$ed.state.tar.gz") bytes, $(wc -l <"$run_dir/journal.jsonl") journaled records); put it in $state_dir/ for a cold machine"
	fi
	[ "$rc" -eq 75 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && return 75
	return 1
}

# baseline: the HF peer baseline, one checkpoint and one mode at a time.
run_baseline() {
	local env=() rc=0 bstep="baseline${baseline_arch:+-$baseline_arch}"
	[ -n "$baseline_gpu" ] && env=(CUDA_VISIBLE_DEVICES="$baseline_gpu")
	"$python" -c 'import torch, transformers, yaml' 2>/dev/null || {
		say baseline "$python cannot import torch, transformers and yaml"
		status "$bstep" failed "python lacks torch/transformers/yaml"
		return 1
	}
	mkdir -p "$baseline_work"
	local done_list=""
	# arch seed checkpoint-GB seconds-a-mode-needs: OLMoE eager took 70 s on the
	# H200 (model load + warmup + 12 requests; results/h200-editions); compiled
	# adds 30-75 s of compilation (GPU-NOTES.md); Qwen runs about half as fast.
	for spec in "olmoe-1b-7b 924 15 150" "qwen15-moe-a27b 1 30 240"; do
		set -- $spec
		local arch=$1 seed=$2 gb=$3 need=$4 name="baseline-$1-$2"
		[ -z "$baseline_arch" ] || [ "$baseline_arch" = "$arch" ] || continue
		local final=out/baseline/$name.json ckpt=$baseline_work/$arch-$seed
		if [ -f "$final" ]; then
			cp "$final" "$out_dir/" && done_list+=" $name"
			rm -rf "$ckpt"
			continue
		fi
		for mode in eager compiled; do
			local part=out/baseline/$name-$mode.json
			[ -f "$part" ] && continue
			if [ ! -f "$ckpt/config.json" ]; then
				rm -rf "$ckpt".tmp-* 2>/dev/null
				local avail
				avail=$(df -Pk "$baseline_work" | awk 'NR==2 {print int($4/1048576)}')
				if [ "$avail" -lt $((gb + 5)) ]; then
					say baseline "only ${avail} GiB free in $baseline_work, $arch needs ~${gb}+5"
					status "$bstep" failed "$name: not enough disk (${avail} GiB free)"
					return 1
				fi
				if [ "$(left)" -lt $((final_margin + 60 + need)) ]; then
					status "$bstep" pending "$name: no time left to synthesise ($done_list done)"
					return 75
				fi
				say baseline "synthesising $arch seed $seed into $ckpt"
				timeout -s TERM -k 10 $(($(left) - final_margin)) "$bin" synth --arch "$arch" --seed "$seed" --out "$ckpt" 2>&1 |
					tail -n 3 | prefix baseline
				[ -f "$ckpt/config.json" ] || { status "$bstep" failed "$name: synth failed"; return 1; }
			fi
			local hard=$(($(left) - final_margin))
			if [ "$hard" -lt "$need" ]; then
				status "$bstep" pending "$name: ${hard}s left, a $mode run needs ~${need}s ($done_list done)"
				return 75
			fi
			say baseline "$name $mode (--blocks 1), killed at ${hard}s"
			env "${env[@]}" timeout -s TERM -k 10 "$hard" "$python" scripts/baseline_hf.py --checkpoint "$ckpt" \
				--blocks 1 --modes "$mode" --out "$part" 2>&1 | prefix "baseline $mode"
			rc=${PIPESTATUS[0]}
			if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
				rm -f "$part"
				status "$bstep" pending "$name $mode: killed at the budget; call again"
				return 75
			elif [ "$rc" -ne 0 ] || [ ! -f "$part" ]; then
				rm -f "$part"
				status "$bstep" failed "$name $mode: baseline_hf.py exit $rc"
				return 1
			fi
		done
		"$python" scripts/baseline_hf.py --merge "$final" out/baseline/"$name"-eager.json out/baseline/"$name"-compiled.json 2>&1 | prefix baseline
		[ -f "$final" ] || { status "$bstep" failed "$name: merge failed"; return 1; }
		cp "$final" "$out_dir/" && done_list+=" $name"
		rm -rf "$ckpt" # one checkpoint on disk at a time
	done
	status "$bstep" complete "written:$done_list"
}

# ---- main -------------------------------------------------------------------------------------
say main "steps: ${steps[*]}; budget ${budget}s, reserve ${reserve}s; bin $bin ($(sha256sum "$bin" | cut -c1-12)); out $out_dir"

overall=0
note() { # keep the worst status: 1 beats 75 beats 0
	if [ "$1" -eq 1 ] || { [ "$1" -ne 0 ] && [ "$1" -ne 75 ]; }; then overall=1
	elif [ "$1" -eq 75 ] && [ $overall -eq 0 ]; then overall=75; fi
}
# prepare_campaign STEP: the campaign's artifacts into the shared cache, nothing else.
prepare_campaign() {
	local step=$1 file ed
	file=$(campaign_file "$step")
	[ -f "$file" ] || { status "$step" failed "no campaign file $file"; return 1; }
	ed=$(edition_of "$file")
	[ -n "$ed" ] || { status "$step" failed "no edition in $file"; return 1; }
	local hard=$(($(left) - final_margin))
	[ "$hard" -gt 0 ] || { status "$step" pending "$ed: artifacts not prepared (no time left)"; return 75; }
	local runlog=$status_dir/${step//\//_}.runlog
	timeout -s TERM -k 15 "$hard" "$bin" run "$file" --prepare-only --run-dir "runs/prepare/$ed" \
		--artifact-cache "$cache" ${scratch:+--checkpoint-scratch "$scratch"} 2>&1 | tee "$runlog" | prefix "$step prepare"
	local rc=${PIPESTATUS[0]}
	case $rc in
	0) status "$step" prepared "$ed: artifacts ready in $cache" ;;
	124 | 137) status "$step" pending "$ed: preparation killed at the budget"; return 75 ;;
	*) status "$step" failed "$ed: run --prepare-only exit $rc: $(grep -v '^\s*$' "$runlog" | tail -n1 | cut -c1-300)"; return 1 ;;
	esac
}

if [ $prepare_only -eq 1 ]; then
	for s in "${campaign_steps[@]}"; do prepare_campaign "$s"; note $?; done
elif [ -n "$gpus" ]; then
	pids=()
	for i in "${!campaign_steps[@]}"; do
		run_campaign "${campaign_steps[$i]}" "${gpu_list[$i]}" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; note $?; done
else
	for s in "${campaign_steps[@]}"; do run_campaign "$s" ""; note $?; done
fi
if [ $want_baseline -eq 1 ] && [ $prepare_only -eq 0 ]; then run_baseline; note $?; fi

{
	echo "device-campaign $(date -u +%FT%TZ): exit $overall (0 done, 75 call again, 1 failed); $(( $(date +%s) - start ))s of ${budget}s"
	cat "$status_dir"/*.status 2>/dev/null
	echo
	echo "disk: $(df -h . | awk 'NR==2 {print $3 " used, " $4 " free of " $2}'); artifact cache: $(du -sh "$cache" 2>/dev/null | cut -f1); /dev/shm: $(df -h /dev/shm 2>/dev/null | awk 'NR==2 {print $3 " used, " $4 " free of " $2}')"
	nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
	echo "files in $out_dir:"
	ls -l "$out_dir" | tail -n +2
} >"$out_dir/status.txt"
cat "$out_dir/status.txt"
cat "$out_dir/status.txt" >>"$log"
exit $overall
