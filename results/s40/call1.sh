#!/usr/bin/env bash
# Session 40's first call of a lease: results/s38/next-h200.sh (the llama.cpp peer's build and run
# on both shapes, the campaigns' artifacts, the JIT cache back) with a short test list, so that the
# artifacts start sooner beside the peer's build: session 39's fix (TestDenseActivationsOnDevice
# then TestTCPreSplitSameBits, which failed in that order at 93df814 and not alone), the two-stage
# FP16 build (TestMatMulA16) and the default tuning's mirrors. Sessions 35-39's other GPU tests
# passed on H100s (results/s38, results/s39). carry ["carry/bins.tar.xz", "carry/jit-cache.tar.xz",
# "carry/llamacpp-src.tar.xz", "carry/llamacpp-src.commit", "carry/llamacpp"] after
# `make gpu-bins` and `make device-aside`.
#   DEADLINE=570 bash results/s40/call1.sh
TESTS='TestFreshBackendRunsTheDefaultTuning|TestMatMulA16|TestDenseActivationsOnDevice|TestTCPreSplitSameBits' \
	TEST_LIMIT=${TEST_LIMIT:-180} exec bash "$(dirname "$0")/../s38/next-h200.sh"
