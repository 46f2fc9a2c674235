// router.cu: softmax over the router logits and top-k selection.
//
// router_topk: probabilities p_i = exp(l_i - max) / sum (exp in double,
// rounded once; the sum in index order by one thread, like the CPU
// reference, so the selected experts match the reference exactly for the
// same logits), then k rounds of a block argmax over the unselected
// probabilities (ties to the lower index). Writes ids[k] and the
// un-renormalised p of each; the host renormalises.
//
// Launch: one block of 256 threads; dynamic shared memory E floats + E bytes.
#include "common.cuh"

// better reports whether (v, i) beats (bv, bi): larger value, then lower
// index; i < 0 means "none".
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
	if (i < 0) return false;
	if (bi < 0) return true;
	return v > bv || (v == bv && i < bi);
}

extern "C" __global__ void __launch_bounds__(256) router_topk(const float* logits, int E, int k, int* ids_out,
                                                             float* w_out) {
	extern __shared__ float p[];  // [E] probabilities, then E taken flags
	unsigned char* taken = reinterpret_cast<unsigned char*>(p + E);
	__shared__ float red[32];
	__shared__ float rv[32];
	__shared__ int ri[32];
	__shared__ float total;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	float m = -INFINITY;
	for (int i = threadIdx.x; i < E; i += blockDim.x) m = fmaxf(m, logits[i]);
	m = block_max(m, red);
	for (int i = threadIdx.x; i < E; i += blockDim.x) {
		p[i] = (float)exp((double)__fsub_rn(logits[i], m));
		taken[i] = 0;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		float s = 0.0f;
		for (int i = 0; i < E; i++) s = __fadd_rn(s, p[i]);
		total = s;
	}
	__syncthreads();
	for (int i = threadIdx.x; i < E; i += blockDim.x) p[i] = __fdiv_rn(p[i], total);
	__syncthreads();

	for (int r = 0; r < k; r++) {
		float bv = 0.0f;
		int bi = -1;
		for (int i = threadIdx.x; i < E; i += blockDim.x)
			if (!taken[i] && better(p[i], i, bv, bi)) bv = p[i], bi = i;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			float ov = __shfl_xor_sync(FULL_MASK, bv, o);
			int oi = __shfl_xor_sync(FULL_MASK, bi, o);
			if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
		}
		if (lane == 0) rv[warp] = bv, ri[warp] = bi;
		__syncthreads();
		if (threadIdx.x == 0) {
			float v = rv[0];
			int idx = ri[0];
			for (int w = 1; w < nw; w++)
				if (better(rv[w], ri[w], v, idx)) v = rv[w], idx = ri[w];
			ids_out[r] = idx;
			w_out[r] = v;
			taken[idx] = 1;
		}
		__syncthreads();
	}
}
