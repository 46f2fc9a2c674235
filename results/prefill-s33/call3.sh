#!/usr/bin/env bash
# Session 33's third call (the warm machine of calls 1-2, or a fresh one): TestRouteGroupsTable with
# its expectation fixed (entries of 16 pairs where the small-entry kernel runs), then one more
# 64-token round of the default against batched-tc-nogateup and e659b13's default.
# From the repository root on the GPU machine, after `make gpu-bins` here;
# carry ["carry/bins.tar.xz", "carry/old/cuda.test.xz"].
#   DEADLINE=300 bash results/prefill-s33/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/h200-lib.sh
h200_begin /tmp/s33c3
(cd runtime/cuda && timeout 60 ../../carry/cuda.test -test.run 'TestRouteGroupsTable|TestAttnInRowsOnDevice' -test.v 2>&1 |
	grep -E -- "^--- |^    --- FAIL|_test.go" | head -20) | tee -a "$summary"
h200_artifacts /dev/shm/persistent olmoe-1b-7b:924 qwen15-moe-a27b:1
h200_old_bins
LENGTHS=64
l=$(((DEADLINE - SECONDS - 10) / 3))
MODES=batched-tc h200_prefill_bench old ../../carry/old/cuda.test "$l"
l=$((DEADLINE - SECONDS - 5))
[ "$l" -gt 20 ] && MODES=batched-tc,batched-tc-nogateup h200_prefill_bench new ../../carry/cuda.test "$l"
echo "done at $SECONDS s" | tee -a "$summary"
