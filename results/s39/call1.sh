#!/usr/bin/env bash
# Session 39's first call of a lease: results/s38/next-h200.sh (the GPU tests beside the llama.cpp
# peer's build, the campaigns' artifacts, the peer, the JIT cache back) with session 39's GPU tests
# added (TestMatMulA16 and TestDenseActivationsOnDevice: the declared FP16 dense activations, which
# ttft.yaml's and prefill.yaml's FP16 twins now declare, and the two-stage kernel's FP16 build,
# not yet run on a GPU) and 40 s more for the tests (the carried JIT cache lacks the rebuilt
# matmul_tc module). carry ["carry/bins.tar.xz", "carry/jit-cache.tar.xz",
# "carry/llamacpp-src.tar.xz", "carry/llamacpp-src.commit", "carry/llamacpp"] after
# `make gpu-bins` and `make device-aside`; needs_h200 for the editions.
#   DEADLINE=570 bash results/s39/call1.sh
TESTS_EXTRA='TestMatMulA16|TestDenseActivationsOnDevice' TEST_LIMIT=260 exec bash "$(dirname "$0")/../s38/next-h200.sh"
