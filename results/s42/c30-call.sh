#!/usr/bin/env bash
# Session 42: OLMoE's c30 batched prefill as a campaign (results/s42/c30-prefill.yaml: the
# edition's configuration and session 28's pool), alone on the machine, each worker profiled
# (HORIZON_WORKER_PROFILE). What comes back: the edition (c30-prefill-s42.tar.gz), the workers'
# profiles (worker-profiles.tar.gz), device-campaign.sh's status and log. Any card.
# carry ["carry/bins.tar.xz", "carry/jit-cache.tar.xz"] after `make gpu-bins` (a build with the
# profile hook) and `make device-aside`:
#   BUDGET=300 bash results/s42/c30-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
BUDGET=${BUDGET:-300}
tar -xJf carry/bins.tar.xz -C carry
rm -rf /tmp/s42-prof
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/c30-call.txt"
nproc | sed 's/^/cpus: /' | tee -a "$O/c30-call.txt"
HORIZON_WORKER_PROFILE=/tmp/s42-prof bash scripts/device-campaign.sh results/s42/c30-prefill.yaml --budget "$BUDGET"
rc=$?
echo "campaign: rc=$rc at $SECONDS s" | tee -a "$O/c30-call.txt"
tar -czf "$O/worker-profiles.tar.gz" -C /tmp s42-prof
exit "$rc"
