// norm.cu: RMSNorm over groups of g values.
//
//	dst[j] = w[j % g] * (x[j] * inv),  inv = 1/sqrt(mean(x[group]^2) + eps)
//
// Launch: one block of 256 threads per group. Each thread sums the squares
// of values t, t+256, ... in order; block_sum combines them with a fixed
// tree. inv is computed in double and rounded once, like the CPU reference;
// the products keep the reference's order. dst may alias x: every thread
// reads its values before the block-wide reduction and writes after it.
#include "common.cuh"

// w_kind: 1 FP16 weights, 2 FP32 weights.
extern "C" __global__ void __launch_bounds__(256) rmsnorm(float* dst, const float* x, const void* w, int w_kind, int g,
                                                         float eps) {
	__shared__ float red[32];
	const float* xg = x + (size_t)blockIdx.x * g;
	float* dg = dst + (size_t)blockIdx.x * g;
	float ss = 0.0f;
	for (int i = threadIdx.x; i < g; i += blockDim.x) ss = __fmaf_rn(xg[i], xg[i], ss);
	ss = block_sum(ss, red);
	const float mean = __fadd_rn(__fdiv_rn(ss, (float)g), eps);
	const float inv = (float)(1.0 / sqrt((double)mean));
	for (int i = threadIdx.x; i < g; i += blockDim.x) {
		float wv = w_kind == 1 ? __half2float(reinterpret_cast<const __half*>(w)[i]) : reinterpret_cast<const float*>(w)[i];
		dg[i] = __fmul_rn(wv, __fmul_rn(xg[i], inv));
	}
}
