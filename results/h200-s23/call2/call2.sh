#!/usr/bin/env bash
# session 23, call 2 (carry: carry/bins.tar.xz from 1f4d70b, the shared-expert branch as graph-full's default): the whole CUDA suite
set -u
summary=$OUT/summary.txt; : > $summary
. scripts/h200-lib.sh
h200_unpack
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $summary
h200_suite 290
xz -9 -T4 $OUT/cuda-test.log
