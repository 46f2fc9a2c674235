# h200-lib.sh: what the GPU-machine scripts share; source it after setting
# OUT and summary (the file each step's one-line result is appended to).
#
#   h200_begin WORKDIR               a call script's start: R=$OUT (or /tmp/out), W=WORKDIR (made),
#                                    DEADLINE (560 unless set), summary=$R/summary.txt (emptied),
#                                    h200_unpack, and the GPU's name, driver and clocks to $summary
#   h200_unpack                      carry/bins.tar.xz -> carry/ (the device tool carries at most 64 MiB),
#                                    and carry/jit-cache.tar.xz into an empty driver JIT cache (scripts/jit-cache.sh)
#   h200_suite SECONDS               the whole CUDA suite (carry/cuda.test) into $OUT/cuda-test.log
#                                    (session 20: ~145 s of tests and ~45 s of start on a fresh
#                                    machine; 200 s was too short, give it 280)
#                                    (SUITE_RUN: a -test.run pattern, to run part of it)
#   h200_artifacts ROOT ARCH:SEED... INT4 artifacts of the synthetic presets under ROOT (kept there
#                                    on a warm machine; the missing ones made side by side), their
#                                    directories ':'-separated in $arts
#   h200_tests_beside_artifacts PATTERN ARCH:SEED...
#                                    the GPU tests matching PATTERN (carry/cuda.test, at most 150 s)
#                                    while h200_artifacts makes the artifacts under /dev/shm/persistent;
#                                    the tests' result and failures to $summary, the log in $W/tests.log
#   h200_vram ART CAP...             for each capacity CAP, a short `generate` on artifact ART (grouped-v1, FP16
#                                    KV sized to 8,192 positions) while nvidia-smi samples the process's
#                                    device memory every 100 ms; the peak (MiB) to $summary; each needs
#                                    45 s before DEADLINE
#   h200_prefill_bench LABEL BINARY SECONDS
#                                    BenchmarkPrefillModes (full residency, 1x) of test binary BINARY (a path
#                                    from runtime/cuda: ../../carry/cuda.test, or another build's) on $arts
#                                    at LENGTHS (comma-separated) in MODES into $R/bench-LABEL.log, at most
#                                    SECONDS; its prompt tok/s lines to $summary. Two builds' lines compare
#                                    only from one call (carry the other's cuda.test as carry/old/cuda.test.xz
#                                    and unpack it with h200_old_bins)
#   h200_old_bins                    carry/old/cuda.test.xz -> carry/old/cuda.test
#   h200_depth LABEL ART DEPTHS MODES SECONDS
#                                    BenchmarkDecodeDepth (FP16 KV, batched prefill, 1x) on artifact
#                                    ART at DEPTHS in MODES (comma-separated) into $W/LABEL.log, its
#                                    result lines to $summary; at most SECONDS, and no later than
#                                    DEADLINE s into the script (skipped with under 20 s left)

h200_begin() {
	R=${OUT:-/tmp/out}
	W=$1
	mkdir -p "$W"
	DEADLINE=${DEADLINE:-560}
	summary=$R/summary.txt
	: > "$summary"
	h200_unpack
	nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a "$summary"
}

h200_unpack() {
	[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
	bash scripts/jit-cache.sh restore
	return 0
}

h200_prefill_bench() {
	local t0=$SECONDS
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$arts HORIZON_BENCH_PROMPTS=$LENGTHS HORIZON_BENCH_PREFILL_MODES=$MODES \
		timeout "$3" "$2" -test.run '^$' -test.bench BenchmarkPrefillModes -test.benchtime 1x -test.v) >"$R/bench-$1.log" 2>&1
	echo "bench $1: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	grep -E "prompt-tok/s|within" "$R/bench-$1.log" | tee -a "$summary"
}

h200_old_bins() {
	xz -dc carry/old/cuda.test.xz >carry/old/cuda.test && chmod +x carry/old/cuda.test
}

h200_suite() {
	local t0=$SECONDS limit=${1:-200}
	(cd runtime/cuda && timeout "$limit" ../../carry/cuda.test -test.v -test.run "${SUITE_RUN:-.}" -test.timeout "$((limit - 10))s") >"$OUT/cuda-test.log" 2>&1
	echo "cuda-test: rc=$? ($((SECONDS - t0)) s), $(grep -c '^--- PASS' "$OUT/cuda-test.log") top-level PASS, $(grep -c -- '--- FAIL' "$OUT/cuda-test.log") FAIL" | tee -a "$summary"
	grep -E -A8 -- "--- FAIL|panic" "$OUT/cuda-test.log" | head -40 | tee -a "$summary"
}

h200_artifacts() {
	local root=$1 spec arch seed art ckpt pids=""
	shift
	arts=""
	mkdir -p "$root"
	# The missing artifacts are made side by side (synth, then prepare, one process each). Session
	# 22 made OLMoE's in 31 s and Qwen's in 76 s one after the other, each at ~1.1 GB/s on 16
	# cores; side by side session 25 made them in 27 s and 60 s (both done at 60 s), while the
	# GPU tests ran beside them (results/h100-s25).
	for spec in "$@"; do
		arch=${spec%%:*} seed=${spec#*:}
		art=$root/$arch-$seed-int4
		if [ ! -f "$art/artifact.json" ]; then
			ckpt=$root/ckpt-$arch-$seed
			(
				t0=$SECONDS
				"${HORIZON_BENCH:-carry/horizon-bench-cuda}" synth --arch "$arch" --seed "$seed" --out "$ckpt" >"$OUT/synth-$arch.log" 2>&1 &&
					"${HORIZON_BENCH:-carry/horizon-bench-cuda}" prepare --checkpoint "$ckpt" --out "$art" >"$OUT/prepare-$arch.log" 2>&1
				echo "$arch artifact: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
				rm -rf "$ckpt"
			) &
			pids="$pids $!"
		fi
		arts="$arts${arts:+:}$art"
	done
	[ -z "$pids" ] || wait $pids
}

h200_tests_beside_artifacts() {
	local pattern=$1
	shift
	( local t0=$SECONDS; cd runtime/cuda && timeout 150 ../../carry/cuda.test -test.v -test.run "$pattern" -test.timeout 145s > "$W/tests.log" 2>&1
	  echo "tests: rc=$? ($((SECONDS - t0)) s)" > "$W/tests-rc.txt" ) &
	local sp=$!
	h200_artifacts /dev/shm/persistent "$@"
	wait $sp
	tee -a "$summary" < "$W/tests-rc.txt"
	grep -E -- "^--- (PASS|FAIL)|^    --- FAIL" "$W/tests.log" | head -20 | tee -a "$summary"
	grep -E -A6 -- "--- FAIL|panic" "$W/tests.log" | head -30 | tee -a "$summary"
	# A failing test's message comes before its "--- FAIL" line under -v.
	grep -E -- "_test\.go:[0-9]+: " "$W/tests.log" | head -20 | cut -c1-400 | tee -a "$summary"
}

h200_vram() {
	local art=$1 cap rc smp
	shift
	for cap in "$@"; do
		[ $((${DEADLINE:-100000} - SECONDS)) -gt 45 ] || { echo "vram c$cap: skipped (time)" | tee -a "$summary"; continue; }
		( while sleep 0.1; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits; done ) > "$W/smi-c$cap.txt" 2>&1 &
		smp=$!
		timeout 60 carry/horizon-bench-cuda generate --artifact "$art" --device cuda --executor grouped-v1 --capacity "$cap" --kv fp16 \
			--max-context 8192 --prompt "The quick brown fox" --tokens 16 --json > "$W/gen-c$cap.json" 2> "$W/gen-c$cap.err"
		rc=$?
		kill $smp 2>/dev/null
		echo "vram c$cap: generate rc=$rc, process peak $(awk -F', *' '{print $2}' "$W/smi-c$cap.txt" | sort -n | tail -1) MiB" | tee -a "$summary"
	done
}

h200_depth() {
	local label=$1 art=$2 depths=$3 modes=$4 t0=$SECONDS lim=$5
	local left=$((${DEADLINE:-100000} - SECONDS - 5))
	[ "$lim" -lt "$left" ] || lim=$left
	[ "$lim" -gt 20 ] || { echo "$label: skipped (time)" | tee -a "$summary"; return; }
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$art HORIZON_BENCH_DEPTHS=$depths HORIZON_BENCH_KV=fp16 HORIZON_BENCH_PREFILL=batched \
		HORIZON_BENCH_MODES=$modes timeout "$lim" ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x) >"$W/$label.log" 2>&1
	echo "$label: rc=$? ($((SECONDS - t0)) s)" | tee -a "$summary"
	grep -E "^Benchmark.*tok/s|FAIL|panic|differ" "$W/$label.log" | sed -E 's/ +/ /g; s/\t/ /g' | tee -a "$summary"
}
