#!/usr/bin/env bash
# make test-slurm: horizon-bench run --scheduler slurm against a real Slurm,
# a one-node cluster on this machine (scripts/slurm-cluster.sh).
#
#  1. the smoke campaign (campaigns/smoke.yaml, 12 workers) is submitted as a
#     job array; once its first task finished the submitter is killed (the
#     array keeps running) and the task then running is cancelled (scancel);
#  2. the same command again adopts the finished records and the tasks still
#     pending or running, resubmits only the cancelled worker, and publishes;
#  3. the edition verifies (horizon-verify) and its tokens equal the local
#     smoke edition's (editions/smoke-cpu);
#  4. a worker failing on purpose: the mini campaign is submitted held, the
#     executable is replaced by another build at the same path, the array is
#     released; every task refuses to run another build, and the submitter
#     fails naming each task's log; the same command run again (now with the
#     new build) resubmits them all and publishes;
#  5. the mini campaign declaring hosts: mixed runs one task per configuration
#     (its blocks in turn) and verifies.
#
# It installs slurm-wlm and munge when missing (scripts/install-slurm.sh) and
# fails, never skips, where it cannot. SLURM_SMOKE_LOCAL=1 also runs the
# smoke campaign locally first and prints both wall times. Logs and editions
# go to out/slurm-smoke/ (SLURM_SMOKE_OUT). The daemons it started are
# stopped on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${SLURM_SMOKE_OUT:-$repo/out/slurm-smoke}
say() { printf '%s slurm-smoke: %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { say "FAIL: $*" >&2; exit 1; }

if [ "$(id -u)" != 0 ]; then
	fail "the test cluster's daemons run as root (SlurmUser=root); run make test-slurm as root"
fi
bash scripts/install-slurm.sh

rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d /tmp/horizon-slurm-smoke.XXXXXX)
source scripts/slurm-cluster.sh
submitter=""
cleanup() {
	local rc=$?
	if [ -n "$submitter" ]; then kill "$submitter" 2>/dev/null || true; fi
	if [ -n "${SLURM_CONF:-}" ]; then scancel --name=horizon-smoke-cpu --name=horizon-mini-test 2>/dev/null || true; fi
	slurm_cluster_stop || true
	cp -r "$tmp/cluster/log" "$out/cluster-log" 2>/dev/null || true
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
slurm_cluster_start "$tmp/cluster"

say "building horizon-bench and horizon-verify into $tmp/bin"
go build -buildvcs=true -o "$tmp/bin/" ./cmd/horizon-bench ./cmd/horizon-verify
hb=$tmp/bin/horizon-bench
hv=$tmp/bin/horizon-verify

if [ "${SLURM_SMOKE_LOCAL:-0}" = 1 ]; then
	say "local smoke run (--scheduler local) for the wall time"
	t0=$(date +%s.%N)
	"$hb" run campaigns/smoke.yaml --out "$out/smoke-local" --run-dir "$tmp/run-local" 2>"$out/local.log"
	t1=$(date +%s.%N)
	local_wall=$(echo "$t1 - $t0" | bc)
	say "local smoke run: ${local_wall}s"
fi

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every half second.
wait_for() {
	local secs=$1 what=$2
	shift 2
	local i
	for i in $(seq 1 $((secs * 2))); do
		if "$@"; then return 0; fi
		sleep 0.5
	done
	fail "timed out after ${secs}s waiting for $what"
}

smoke=(run campaigns/smoke.yaml --scheduler slurm --run-dir "$tmp/run-smoke" --out "$out/smoke-slurm" --slurm-poll 1s --slurm-time 15:00)
say "1. submit: horizon-bench ${smoke[*]}"
t0=$(date +%s.%N)
"$hb" "${smoke[@]}" >"$out/submit-1.log" 2>&1 &
submitter=$!
wait_for 300 "the first finished task" grep -q '^task .* done' "$out/submit-1.log"
kill -TERM "$submitter"
if wait "$submitter"; then fail "the killed submitter exited 0"; fi
submitter=""
say "submitter killed after its first finished task:"
sed 's/^/    /' "$out/submit-1.log"
grep -q 'the job array keeps running' "$out/submit-1.log" || fail "the killed submitter did not say the array keeps running"
job=$(sed -n 's/.*submitted job array \([0-9]*\) .*/\1/p' "$out/submit-1.log")
[ -n "$job" ] || fail "no job id in the submitter's log"
running_task() { squeue --noheader --array --jobs="$job" --states=RUNNING --format=%i | head -n 1; }
# A function, so that every poll asks squeue again: the CPU tasks run one at a
# time (--exclusive) and the submitter was killed just as one finished, often
# before the next had started.
a_task_runs() { test -n "$(running_task)"; }
wait_for 60 "a running task of array $job" a_task_runs
victim=$(running_task)
scancel "$victim"
say "scancel $victim (mid-run); the array keeps running without its submitter:"
squeue --array --states=all --jobs="$job" --format='%.10i %.10T %.20j' | sed 's/^/    /'
wait_for 30 "$victim to be cancelled" sh -c "squeue --noheader --array --states=all --jobs=$job --format='%i|%T' | grep -qx '$victim|CANCELLED'"

say "2. the same command again: adopts and resubmits"
"$hb" "${smoke[@]}" 2>&1 | tee "$out/submit-2.log"
t1=$(date +%s.%N)
slurm_wall=$(echo "$t1 - $t0" | bc)
grep -q 'edition smoke-cpu written to' "$out/submit-2.log" || fail "the re-run published no edition"
grep -Eq '[0-9]+ finished before, [1-9][0-9]* still pending or running in an earlier array \(adopted\), 1 to submit' "$out/submit-2.log" ||
	fail "the re-run did not adopt the earlier array's tasks and resubmit exactly the cancelled one"

say "3. the edition verifies and its tokens equal editions/smoke-cpu's"
"$hv" "$out/smoke-slurm" | tee "$out/verify.log"
HORIZON_EDITION_A=$repo/editions/smoke-cpu HORIZON_EDITION_B=$out/smoke-slurm \
	go test -count=1 -run TestEditionTokensMatch -v ./campaigns/ | tee "$out/tokens.log"
grep -q -- '--- PASS: TestEditionTokensMatch' "$out/tokens.log" || fail "tokens differ from editions/smoke-cpu"
hosts=$(grep -ho '"hostname": *"[^"]*"' "$out"/smoke-slurm/raw/*/*.json | sort | uniq -c)
say "hosts of the records: $hosts"

say "4. a worker failing on purpose: another build replaces the executable before the held array is released"
mkdir -p "$tmp/bin2"
cp "$hb" "$tmp/bin2/horizon-bench"
hb2=$tmp/bin2/horizon-bench
mini=(run campaigns/testdata/mini.good.yml --contract campaigns/testdata/mini-contract.yaml --scheduler slurm
	--run-dir "$tmp/run-mini" --out "$out/mini-slurm" --slurm-poll 1s --slurm-time 5:00 --slurm-args --hold)
"$hb2" "${mini[@]}" >"$out/fail-1.log" 2>&1 &
submitter=$!
wait_for 120 "the mini array's submission" grep -q 'submitted job array' "$out/fail-1.log"
mjob=$(sed -n 's/.*submitted job array \([0-9]*\) .*/\1/p' "$out/fail-1.log")
cp "$hb2" "$tmp/bin2/horizon-bench.new"
printf 'another build' >>"$tmp/bin2/horizon-bench.new"
mv "$tmp/bin2/horizon-bench.new" "$hb2"
scontrol release "$mjob"
if wait "$submitter"; then fail "the submitter of failing tasks exited 0"; fi
submitter=""
sed 's/^/    /' "$out/fail-1.log"
grep -q "FAILED" "$out/fail-1.log" || fail "no task reported FAILED"
log0=$tmp/run-mini/slurm/logs/${mjob}_0.log
grep -qF "log $log0" "$out/fail-1.log" || fail "the error does not name the failed task's log $log0"
grep -q 'not the build the run was submitted with' "$log0" || fail "$log0 does not say why the task failed"
say "the failed task's log $log0:"
sed 's/^/    /' "$log0"
say "the same command again, with the new build: resubmits the failed workers"
"$hb2" "${mini[@]/--hold/--comment=rerun}" 2>&1 | tee "$out/fail-2.log"
grep -q 'edition mini-test written to' "$out/fail-2.log" || fail "the re-run after the failure published nothing"
"$hv" "$out/mini-slurm" --contract campaigns/testdata/mini-contract.yaml >/dev/null || fail "the mini edition does not verify"

say "5. hosts: mixed: each configuration's blocks run as one task"
cp campaigns/testdata/mini.good.yml "$tmp/mini-mixed.yml"
echo "hosts: mixed" >>"$tmp/mini-mixed.yml"
"$hb2" run "$tmp/mini-mixed.yml" --contract campaigns/testdata/mini-contract.yaml --scheduler slurm \
	--run-dir "$tmp/run-mixed" --out "$out/mini-mixed" --slurm-poll 1s --slurm-time 5:00 2>&1 | tee "$out/mixed.log"
grep -q 'submitted job array [0-9]* (horizon-mini-test, 2 tasks' "$out/mixed.log" || fail "hosts: mixed did not submit one task per configuration"
"$hv" "$out/mini-mixed" --contract campaigns/testdata/mini-contract.yaml | tail -n 1
grep -q '"hosts": "mixed"' "$out/mini-mixed/campaign.json" || fail "the mixed edition's campaign does not declare hosts: mixed"

say "PASS: smoke campaign through Slurm in ${slurm_wall}s (submit, kill, scancel, re-run, publish)${local_wall:+; locally in ${local_wall}s}"
