#!/usr/bin/env bash
# session 21, call C (new bins): Nsight Compute on batched prefill (OLMoE shape, seed 924): the grouped
# int4 expert matmuls' stall reasons and a per-kernel table of the whole prefill, at 64 tokens for the
# default ring and ring2, then at 512 tokens for the default.
set -u
ART_ROOT=/dev/shm/persistent MODES="batched-tc batched-tc-ring2" ALL_KERNELS=1 PROMPT=64 OUT=$OUT/p64 \
	bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
ART_ROOT=/dev/shm/persistent MODES="batched-tc" ALL_KERNELS=1 PROMPT=512 OUT=$OUT/p512 NCU_LIMIT=200 \
	bash scripts/ncu-prefill-h200.sh olmoe-1b-7b:924
