#!/usr/bin/env bash
# If the next lease is an H100 again: its device-to-device copy rate (BenchmarkHBMCopy, the method of
# GPU-NOTES.md's H200 figure: the figure `horizon-bench ceilings --gpu "NVIDIA H100 80GB HBM3"
# --hbm-tbps X` needs), then next-prefill-prompts.sh (the contract's text prompts against the
# benchmark's spread ids, and the text prompt's prefill by instruction). carry ["carry/bins.tar.xz"]
# (make gpu-bins at e74a15b or later). About 250 s with the artifacts made.
#   bash results/h100-s36/next-h100.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/out}
mkdir -p "$O"
[ -f carry/bins.tar.xz ] && tar -xJf carry/bins.tar.xz -C carry
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$O/copy.txt"
(cd runtime/cuda && timeout 60 ../../carry/cuda.test -test.run '^$' -test.bench BenchmarkHBMCopy -test.benchtime 5x) 2>&1 |
	grep -E "^Benchmark|FAIL|panic" | tee -a "$O/copy.txt"
OUT=$O bash results/h100-s36/next-prefill-prompts.sh
