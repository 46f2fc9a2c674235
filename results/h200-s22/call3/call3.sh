#!/usr/bin/env bash
# session 22, call 3 (carry: carry/bins.tar.xz, the shared_down build): Nsight Compute on batched prefill
# (OLMoE shape, seed 924; the grouped int4 ring with the conflict-free staging) at 64 and 512 tokens, and the
# per-instruction decode profile of both shapes on this build.
set -u
. scripts/h200-lib.sh
h200_unpack
ART_ROOT=/dev/shm/persistent MODES="batched-tc" ALL_KERNELS=1 PROMPT=64 OUT=$OUT/p64 \
	bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
ART_ROOT=/dev/shm/persistent MODES="batched-tc" ALL_KERNELS=1 PROMPT=512 OUT=$OUT/p512 NCU_LIMIT=200 \
	bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
mkdir -p /dev/shm/instruction-profile
for a in olmoe-1b-7b-924-int4 qwen15-moe-a27b-1-int4; do
	[ -f /dev/shm/persistent/$a/artifact.json ] && ln -sfn /dev/shm/persistent/$a /dev/shm/instruction-profile/$a
done
OUT=$OUT/prof bash scripts/instruction-profile-h200.sh olmoe-1b-7b:924 qwen15-moe-a27b:1
