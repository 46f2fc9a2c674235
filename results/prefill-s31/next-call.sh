#!/usr/bin/env bash
# Written at the end of session 31 for the next device call (not yet run), whichever card comes.
# On an H200: editions/depth-v1 re-made alone (results/depth-v1-s30/call1.sh; commit it with
# `make unpack-edition` after removing the old edition). On an H100 (no edition is made there):
# call3.sh, the GPU tests of tc_chunk's ldmatrix fragments (5e5ae6d; they passed in call 4) and the
# prefill at 256 and 512 tokens against the build before (carry/old/cuda.test.xz: the cuda.test
# of `make gpu-bins` at d5ea237, xz-compressed; keep carry/bins.tar.xz aside while making it), and
# the fragment-direct kernel against the ring there.
# From the repository root on the GPU machine, after `make gpu-bins` here;
# carry ["carry/bins.tar.xz", "carry/old"].
#   DEADLINE=570 bash results/prefill-s31/next-call.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
	CAMPAIGN_BUDGET=$((${DEADLINE:-570} - 40)) exec bash results/depth-v1-s30/call1.sh
fi
DEADLINE=${DEADLINE:-570} exec bash results/prefill-s31/call3.sh
