// rope_attention.cu: RoPE, KV-cache append and single-query attention.
#include "common.cuh"

// rope: rotate x[nHeads*hd] in place at position pos, HF rotate_half pairs
// (i, i+hd/2). Like transformers (and the CPU reference) the inverse
// frequency and its product with pos are FP32; cos and sin are taken in
// double and rounded once. One thread per pair, grid-stride.
extern "C" __global__ void rope_f32(float* x, int n_heads, int hd, int pos, double theta) {
	const int half = hd >> 1;
	for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < n_heads * half; idx += gridDim.x * blockDim.x) {
		const int h = idx / half, i = idx - h * half;
		const float e = __fdiv_rn((float)(2 * i), (float)hd);
		const float inv_freq = __fdiv_rn(1.0f, (float)pow(theta, (double)e));
		const float f = __fmul_rn((float)pos, inv_freq);
		const float cs = (float)cos((double)f), sn = (float)sin((double)f);
		float* v = x + (size_t)h * hd;
		const float a = v[i], c = v[i + half];
		v[i] = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(c, sn));
		v[i + half] = __fadd_rn(__fmul_rn(c, cs), __fmul_rn(a, sn));
	}
}

// kv_append: kc[pos*n + j] = k[j], vc[pos*n + j] = v[j] for j < n.
extern "C" __global__ void kv_append_f32(float* kc, float* vc, const float* k, const float* v, int n, int pos) {
	for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
		kc[(size_t)pos * n + j] = k[j];
		vc[(size_t)pos * n + j] = v[j];
	}
}

// attention: dst[h*hd..] = softmax(q_h·K^T/sqrt(hd)) · V over positions
// 0..n-1, head h reading kv head h/(nHeads/nKV).
//
// Launch: one block of 256 threads (8 warps) per query head; dynamic shared
// memory (n + 8*hd) floats. Scores: warp w takes positions w, w+8, ...; a
// position's dot is lanes over hd, warp_sum. Max and sum are block
// reductions (fixed trees). Output: warp w accumulates a contiguous range of
// positions in order for each of its lanes' hd values; the 8 partial vectors
// are then added in warp order. hd <= 256.
#define ATT_WARPS 8
extern "C" __global__ void __launch_bounds__(256) attention_f32(float* dst, const float* q, const float* kc,
                                                               const float* vc, int n, int n_heads, int n_kv, int hd) {
	extern __shared__ float smem[];
	__shared__ float red[32];
	float* sc = smem;       // [n]
	float* part = smem + n;  // [ATT_WARPS][hd]
	const int h = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int kv_dim = n_kv * hd, off = (h / (n_heads / n_kv)) * hd;
	const float* qh = q + (size_t)h * hd;
	const float scale = (float)(1.0 / sqrt((double)hd));

	for (int t = warp; t < n; t += ATT_WARPS) {
		const float* kt = kc + (size_t)t * kv_dim + off;
		float s = 0.0f;
		for (int i = lane; i < hd; i += 32) s = __fmaf_rn(qh[i], kt[i], s);
		s = warp_sum(s);
		if (lane == 0) sc[t] = __fmul_rn(s, scale);
	}
	__syncthreads();
	float m = -INFINITY;
	for (int t = threadIdx.x; t < n; t += blockDim.x) m = fmaxf(m, sc[t]);
	m = block_max(m, red);
	float sum = 0.0f;
	for (int t = threadIdx.x; t < n; t += blockDim.x) {
		const float e = expf(__fsub_rn(sc[t], m));
		sc[t] = e;
		sum = __fadd_rn(sum, e);
	}
	sum = block_sum(sum, red);  // also orders the sc writes before the reads below

	const int per = (n + ATT_WARPS - 1) / ATT_WARPS;
	const int t0 = warp * per, t1 = min(n, t0 + per);
	float acc[8];
#pragma unroll
	for (int j = 0; j < 8; j++) acc[j] = 0.0f;
	for (int t = t0; t < t1; t++) {
		const float p = __fdiv_rn(sc[t], sum);
		const float* vt = vc + (size_t)t * kv_dim + off;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			const int i = lane + 32 * j;
			if (i < hd) acc[j] = __fmaf_rn(p, vt[i], acc[j]);
		}
	}
#pragma unroll
	for (int j = 0; j < 8; j++) {
		const int i = lane + 32 * j;
		if (i < hd) part[warp * hd + i] = acc[j];
	}
	__syncthreads();
	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		float o = part[i];
		for (int w = 1; w < ATT_WARPS; w++) o = __fadd_rn(o, part[w * hd + i]);
		dst[(size_t)h * hd + i] = o;
	}
}
