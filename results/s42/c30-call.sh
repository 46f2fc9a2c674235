#!/usr/bin/env bash
# Session 42: OLMoE's c30 batched prefill as a campaign (results/s42/c30-prefill.yaml: the
# edition's configuration, session 28's pool and the registered transport), alone on the
# machine, each worker profiled (HORIZON_WORKER_PROFILE), with two builds one after the other:
#   - this one (carry/horizon-bench-cuda, make gpu-bins at HEAD: the staged transport's records
#     in 1 MiB runs as their bytes land since 0ef0684, the waves' resident experts first since
#     a7f7bee) into edition c30-prefill-s42;
#   - the build before both (carry/old/horizon-bench-cuda, f7b87d1: a record whole after its whole
#     host copy, waves in first-use order) into c30-prefill-s42-old.
# The two changes show apart: the wave order in the misses (the counters), the runs in the time
# a miss takes ((prefill - the full-residency prefill) / misses, per request).
# The registered configuration is the same code in both builds: the two editions' registered rows
# say how far apart two runs of one build land. Then BenchmarkMissService (this build's cuda.test:
# the cache's miss service alone, lone misses and top-k groups, staged and registered, at
# GOMAXPROCS 4, 8 and every CPU). Any card; nothing else on the machine meanwhile. What comes
# back: both editions, the workers' profiles (worker-profiles.tar.gz), the benchmark's log,
# device-campaign.sh's status and log, c30-call.txt.
# Here first: `make gpu-bins`, the old build (results/s42/README.md), then
#   tar -cJf carry/c30-ab.tar.xz -C carry cuda.test horizon-bench-cuda horizon-verify old/horizon-bench-cuda
# (~31.5 MB; with the tree after `make device-aside`, ~63 MiB: no room for the JIT cache, whose
# compile on a fresh machine falls in each worker's preparation, not in its timings);
# carry ["carry/c30-ab.tar.xz"]:
#   BUDGET=450 bash results/s42/c30-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
BUDGET=${BUDGET:-450}
BENCH_S=${BENCH_S:-110}
t0=$SECONDS
tar -xJf carry/c30-ab.tar.xz -C carry
rm -rf /tmp/s42-prof
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/c30-call.txt"
nproc | sed 's/^/cpus: /' | tee -a "$O/c30-call.txt"
# A CPU quota throttles a process that spins (the owner thread, the staging copies) for the rest
# of each period: cgroup v2's cpu.max and cpu.stat (nr_throttled, throttled_usec) before and after.
cg() { for f in /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu.stat; do [ -r "$f" ] && sed "s|^|$1 $(basename "$f"): |" "$f"; done | tee -a "$O/c30-call.txt"; }
cg before
lscpu 2>/dev/null | grep -E "^(Model name|Socket|NUMA node\(s\)|CPU\(s\))" | tee -a "$O/c30-call.txt"
half=$(((BUDGET - BENCH_S - 20) / 2))
HORIZON_WORKER_PROFILE=/tmp/s42-prof/new bash scripts/device-campaign.sh results/s42/c30-prefill.yaml --budget "$half"
rc=$?
echo "new build: rc=$rc at $((SECONDS - t0)) s" | tee -a "$O/c30-call.txt"
sed 's/^edition: c30-prefill-s42$/edition: c30-prefill-s42-old/' results/s42/c30-prefill.yaml >/tmp/c30-prefill-old.yaml
cp "$O/device-campaign.log" /tmp/device-campaign-new.log 2>/dev/null
left=$((BUDGET - BENCH_S - (SECONDS - t0) - 15))
HORIZON_WORKER_PROFILE=/tmp/s42-prof/old bash scripts/device-campaign.sh /tmp/c30-prefill-old.yaml \
	--bin carry/old/horizon-bench-cuda --budget "$left"
rc2=$?
echo "old build: rc=$rc2 at $((SECONDS - t0)) s" | tee -a "$O/c30-call.txt"
[ -f /tmp/device-campaign-new.log ] && cat /tmp/device-campaign-new.log "$O/device-campaign.log" >/tmp/dc.log && mv /tmp/dc.log "$O/device-campaign.log"
cg after
tar -czf "$O/worker-profiles.tar.gz" -C /tmp s42-prof
# The cache's miss service alone, after the campaigns (nothing else running).
. scripts/h200-lib.sh
summary=$O/c30-call.txt
OUT=/tmp h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 # its logs stay in /tmp (at most 8 files come back)
b=$((BUDGET - (SECONDS - t0) - 5))
if [ "$b" -gt 20 ]; then
	(cd runtime/cuda && HORIZON_BENCH_ARTIFACTS=$arts timeout "$b" ../../carry/cuda.test -test.run '^$' \
		-test.bench BenchmarkMissService -test.benchtime 200x) >"$O/miss-service.log" 2>&1
	echo "miss service: rc=$? at $((SECONDS - t0)) s" | tee -a "$O/c30-call.txt"
	grep -E "^Benchmark" "$O/miss-service.log" | tee -a "$O/c30-call.txt"
else
	echo "miss service: skipped, $b s left" | tee -a "$O/c30-call.txt"
fi
[ "$rc" -eq 0 ] && exit "$rc2"
exit "$rc"
