// embed_argmax.cu: embedding gather and greedy selection.
#include "common.cuh"

// embed: dst[j] = table[tok*D + j]; table FP16 (kind 1) or FP32 (kind 2).
extern "C" __global__ void embed_gather(float* dst, const void* table, int kind, int tok, int D) {
	for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < D; j += gridDim.x * blockDim.x) {
		const size_t at = (size_t)tok * D + j;
		dst[j] = kind == 1 ? __half2float(reinterpret_cast<const __half*>(table)[at]) : reinterpret_cast<const float*>(table)[at];
	}
}

__device__ __forceinline__ bool beats(float v, int i, float bv, int bi) {
	if (i < 0) return false;
	if (bi < 0) return true;
	return v > bv || (v == bv && i < bi);
}

// argmax_masked: *out = the index of the largest logit, skipping NaN and the
// nm ids in masked (EOS suppression); ties pick the lowest index; -1 when
// nothing is left. Launch: one block of 1024 threads; thread t scans t,
// t+1024, ... in order, then a fixed butterfly and warp-order combine.
extern "C" __global__ void __launch_bounds__(1024) argmax_masked(const float* logits, int n, const int* masked,
                                                                int nm, int* out) {
	__shared__ float rv[32];
	__shared__ int ri[32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	float bv = 0.0f;
	int bi = -1;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		const float v = logits[i];
		if (v != v) continue;
		bool skip = false;
		for (int j = 0; j < nm; j++) skip |= masked[j] == i;
		if (!skip && beats(v, i, bv, bi)) bv = v, bi = i;
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(FULL_MASK, bv, o);
		int oi = __shfl_xor_sync(FULL_MASK, bi, o);
		if (beats(ov, oi, bv, bi)) bv = ov, bi = oi;
	}
	if (lane == 0) rv[warp] = bv, ri[warp] = bi;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < nw; w++)
			if (beats(rv[w], ri[w], rv[0], ri[0])) rv[0] = rv[w], ri[0] = ri[w];
		*out = ri[0];
	}
}
