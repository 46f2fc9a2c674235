// norm.cu: RMSNorm over groups of g values.
//
//	dst[j] = w[j % g] * (x[j] * inv),  inv = 1/sqrt(mean(x[group]^2) + eps)
//
// Launch: one block of 256 threads per group; the body is rmsnorm_group
// (step.cuh). dst may alias x: every thread reads its values before the
// block-wide reduction and writes after it.
#include "common.cuh"  // listed for the PTX source hashes (step.cuh includes it)
#include "step.cuh"

// w_kind: 1 FP16 weights, 2 FP32 weights.
extern "C" __global__ void __launch_bounds__(256) rmsnorm(float* dst, const float* x, const void* w, int w_kind, int g,
                                                         float eps) { grid_dep_enter();
	__shared__ float red[32];
	rmsnorm_group(dst + (size_t)blockIdx.x * g, x + (size_t)blockIdx.x * g, w, w_kind, g, eps, red);
}
