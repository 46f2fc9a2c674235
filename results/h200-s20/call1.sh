#!/usr/bin/env bash
# session 20, call 1: the whole CUDA suite (first GPU run of tcRing), then the fidelity campaign
set -u
summary=$OUT/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $summary
df -h . /dev/shm | tail -2 | tee -a $summary
h200_suite 200
grep -E "^(=== RUN|--- |    --- ).*(TCPreSplit|Ring|ring)" $OUT/cuda-test.log | head -20 >> $summary
xz -9 -T4 $OUT/cuda-test.log
t0=$SECONDS
bash scripts/device-campaign.sh fidelity --budget $((585 - SECONDS)) --reserve 100 --artifact-cache /dev/shm/horizon-artifacts --checkpoint-scratch /tmp/horizon-scratch > $OUT/dc1.txt 2>&1
echo "device-campaign fidelity: rc=$? ($((SECONDS - t0)) s)" | tee -a $summary
tail -8 $OUT/dc1.txt >> $summary
ls /dev/shm/horizon-artifacts/artifacts >> $summary 2>&1
