// step.cuh: the bodies of the small per-step kernels (RMSNorm, RoPE, KV
// append, attention, router top-k, argmax), as device functions. The
// op-by-op kernels (norm.cu, rope_attention.cu, router.cu, embed_argmax.cu)
// and the graph-step kernels of decode.cu call the same functions, so a
// captured decode step gives the op-by-op path's bits.
#pragma once

#include "common.cuh"

// rmsnorm_group normalises one group of g values with the calling block
// (every thread of the block must call it):
//
//	dst[j] = w[j] * (x[j] * inv),  inv = 1/sqrt(mean(x^2) + eps)
//
// Each thread sums the squares of values t, t+blockDim, ... in order;
// block_sum combines them with a fixed tree; inv is computed in double and
// rounded once, like the CPU reference (rms_inv: the block's inv alone).
// dst may alias x. w_kind: 1 FP16 weights, 2 FP32.
__device__ __forceinline__ float rms_inv(const float* xg, int g, float eps, float* red) {
	float xv[NORM_REGS];
	const bool regs = g <= NORM_REGS * (int)blockDim.x;
	if (regs) norm_load(xv, xg, g);
	const float ss = sumsq_block(xg, regs ? xv : nullptr, g, red);
	const float mean = __fadd_rn(__fdiv_rn(ss, (float)g), eps);
	return (float)(1.0 / sqrt((double)mean));
}

__device__ __forceinline__ void rmsnorm_group(float* dg, const float* xg, const void* w, int w_kind, int g, float eps,
                                              float* red) {
	const float inv = rms_inv(xg, g, eps, red);
	for (int i = threadIdx.x; i < g; i += blockDim.x) {
		float wv = w_kind == 1 ? __half2float(reinterpret_cast<const __half*>(w)[i]) : reinterpret_cast<const float*>(w)[i];
		dg[i] = __fmul_rn(wv, __fmul_rn(xg[i], inv));
	}
}

// rope_pair rotates the pair (i, i+hd/2) of one head v at position pos (HF
// rotate_half). Like transformers (and the CPU reference) the inverse
// frequency and its product with pos are FP32; cos and sin are taken in
// double and rounded once.
__device__ __forceinline__ void rope_pair(float* v, int i, int hd, int pos, double theta) {
	const int half = hd >> 1;
	const float e = __fdiv_rn((float)(2 * i), (float)hd);
	const float inv_freq = __fdiv_rn(1.0f, (float)pow(theta, (double)e));
	const float f = __fmul_rn((float)pos, inv_freq);
	const float cs = (float)cos((double)f), sn = (float)sin((double)f);
	const float a = v[i], c = v[i + half];
	v[i] = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(c, sn));
	v[i + half] = __fadd_rn(__fmul_rn(c, cs), __fmul_rn(a, sn));
}

// attention_head computes head h of
// dst[h*hd..] = softmax(q_h·K^T/sqrt(hd)) · V over positions 0..n-1, head h
// reading kv head h/(nHeads/nKV). One block of 256 threads (ATT_WARPS warps)
// per head; smem holds (n + ATT_WARPS*hd) floats. Scores: warp w takes
// positions w, w+8, ...; a position's dot is lanes over hd, warp_sum. Max
// and sum are block reductions (fixed trees). Output: warp w accumulates a
// contiguous range of positions in order for each of its lanes' hd values;
// the 8 partial vectors are then added in warp order. hd <= 256.
#define ATT_WARPS 8
__device__ __forceinline__ void attention_head(float* dst, const float* q, const float* kc, const float* vc, int n,
                                               int n_heads, int n_kv, int hd, float* smem, float* red, int h) {
	float* sc = smem;        // [n]
	float* part = smem + n;  // [ATT_WARPS][hd]
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
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

// The split attention of a decode step: attention_head's bits, computed
// by heads x ATT_SPLIT blocks (scores) and then heads x ATT_WARPS blocks
// (softmax and weighted values) instead of one block per head, so a token
// at depth n keeps the whole GPU reading its K and V. Every value is
// computed as attention_head computes it: a position's score is the same
// lane-strided FMA chain and warp_sum; the max and the sum are the same
// 256-thread strided loops and block trees over all n scores (every block
// of a head recomputes them from the scores in memory); warp w's partial
// vector, the FMA chain over its contiguous range of positions, is block
// (h, w)'s; and the partials are added in warp order. Only the schedule
// changes: loads are issued ahead of the FMA chains that consume them.
#define ATT_SPLIT 8
#define ATT_UNROLL 4
#define ATT_CHUNK 256

// attention_scores_part: block s of ATT_SPLIT for head h writes
// sc[h*max_seq + t] = (q_h . k_t) * 1/sqrt(hd) for its positions: warp w
// of block s takes t = s*ATT_WARPS + w, then every ATT_SPLIT*ATT_WARPS.
__device__ __forceinline__ void attention_scores_part(float* sc, const float* q, const float* kc, int n, int n_heads,
                                                      int n_kv, int hd, int max_seq, int h, int s) {
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int kv_dim = n_kv * hd, off = (h / (n_heads / n_kv)) * hd;
	const float* qh = q + (size_t)h * hd;
	const float scale = (float)(1.0 / sqrt((double)hd));
	float qv[8];
#pragma unroll
	for (int j = 0; j < 8; j++) {
		const int i = lane + 32 * j;
		qv[j] = i < hd ? qh[i] : 0.0f;
	}
	const int stride = ATT_SPLIT * ATT_WARPS;
	for (int t0 = s * ATT_WARPS + warp; t0 < n; t0 += ATT_UNROLL * stride) {
		float kv[ATT_UNROLL][8];
#pragma unroll
		for (int u = 0; u < ATT_UNROLL; u++) {
			const int t = t0 + u * stride;
			const float* kt = kc + (size_t)t * kv_dim + off;
#pragma unroll
			for (int j = 0; j < 8; j++) {
				const int i = lane + 32 * j;
				kv[u][j] = t < n && i < hd ? kt[i] : 0.0f;
			}
		}
#pragma unroll
		for (int u = 0; u < ATT_UNROLL; u++) {
			const int t = t0 + u * stride;  // the same for the whole warp
			if (t >= n) break;
			float d = 0.0f;
#pragma unroll
			for (int j = 0; j < 8; j++)
				if (lane + 32 * j < hd) d = __fmaf_rn(qv[j], kv[u][j], d);
			d = warp_sum(d);
			if (lane == 0) sc[(size_t)h * max_seq + t] = __fmul_rn(d, scale);
		}
	}
}

// attention_pv_part: block r of ATT_WARPS for head h. It recomputes the
// softmax's max and sum from sc, accumulates the weighted values of
// positions [r*per, min(n, (r+1)*per)), per = ceil(n/ATT_WARPS) (thread i
// owns output value i, hd <= blockDim), and writes that partial vector to
// part[h][r][hd]. The block that finishes head h last (cnt[h], a ticket
// that it resets) adds the partials in order into dst[h*hd ..]. smem holds
// ATT_CHUNK+1 floats; red 32.
__device__ __forceinline__ void attention_pv_part(float* dst, float* part, unsigned* cnt, const float* sc,
                                                  const float* vc, int n, int n_heads, int n_kv, int hd, int max_seq,
                                                  int h, int r, float* smem, float* red) {
	float* pw = smem;  // [ATT_CHUNK]: the chunk's probabilities
	int* last = reinterpret_cast<int*>(smem + ATT_CHUNK);
	const float* sch = sc + (size_t)h * max_seq;
	float m = -INFINITY;
	for (int t = threadIdx.x; t < n; t += blockDim.x) m = fmaxf(m, sch[t]);
	m = block_max(m, red);
	float sum = 0.0f;
	for (int t = threadIdx.x; t < n; t += blockDim.x) sum = __fadd_rn(sum, expf(__fsub_rn(sch[t], m)));
	sum = block_sum(sum, red);

	const int kv_dim = n_kv * hd, off = (h / (n_heads / n_kv)) * hd;
	const int per = (n + ATT_WARPS - 1) / ATT_WARPS;
	const int t0 = r * per, t1 = min(n, t0 + per);
	const int i = threadIdx.x;
	const float* vp = vc + off + i;
	float acc = 0.0f;
	for (int c0 = t0; c0 < t1; c0 += ATT_CHUNK) {
		const int c1 = min(t1, c0 + ATT_CHUNK);
		__syncthreads();  // the previous chunk's reads of pw are done
		for (int t = c0 + threadIdx.x; t < c1; t += blockDim.x) pw[t - c0] = __fdiv_rn(expf(__fsub_rn(sch[t], m)), sum);
		__syncthreads();
		if (i < hd) {
			int t = c0;
			for (; t + 8 <= c1; t += 8) {
				float v[8];
#pragma unroll
				for (int u = 0; u < 8; u++) v[u] = vp[(size_t)(t + u) * kv_dim];
#pragma unroll
				for (int u = 0; u < 8; u++) acc = __fmaf_rn(pw[t + u - c0], v[u], acc);
			}
			for (; t < c1; t++) acc = __fmaf_rn(pw[t - c0], vp[(size_t)t * kv_dim], acc);
		}
	}
	float* ph = part + (size_t)h * ATT_WARPS * hd;
	if (i < hd) ph[(size_t)r * hd + i] = acc;
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence();
		*last = atomicAdd(&cnt[h], 1u) == ATT_WARPS - 1;
	}
	__syncthreads();
	if (!*last) return;
	__threadfence();
	for (int j = threadIdx.x; j < hd; j += blockDim.x) {
		float o = __ldcg(ph + j);
		for (int w = 1; w < ATT_WARPS; w++) o = __fadd_rn(o, __ldcg(ph + (size_t)w * hd + j));
		dst[(size_t)h * hd + j] = o;
	}
	if (threadIdx.x == 0) cnt[h] = 0;
}

// beats reports whether (v, i) beats (bv, bi): larger value, then lower
// index; i < 0 means "none".
__device__ __forceinline__ bool beats(float v, int i, float bv, int bi) {
	if (i < 0) return false;
	if (bi < 0) return true;
	return v > bv || (v == bv && i < bi);
}

// block_best combines one candidate (bv, bi) per thread (bi < 0: none)
// into the best by (value desc, index asc), returned in thread 0 (other
// threads get an unspecified value): a fixed butterfly per warp, then the
// warps in order.
__device__ __forceinline__ int block_best(float bv, int bi) {
	__shared__ float rv[32];
	__shared__ int ri[32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
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
	}
	return ri[0];
}

// router_topk_block: probabilities p_i = exp(l_i - max) / sum (exp in
// double, rounded once; the sum in index order by one thread, like the CPU
// reference, so the selected experts match the reference exactly for the
// same logits), then k rounds of a block argmax over the unselected
// probabilities (ties to the lower index). Thread 0 writes ids_out[r] and
// the un-renormalised p of each into w_out[r]. p holds E floats, then E
// taken flags (dynamic shared memory); one block of 256 threads.
__device__ __forceinline__ void router_topk_block(const float* logits, int E, int k, int* ids_out, float* w_out,
                                                  float* p) {
	unsigned char* taken = reinterpret_cast<unsigned char*>(p + E);
	__shared__ float red[32];
	__shared__ float total;

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
			if (!taken[i] && beats(p[i], i, bv, bi)) bv = p[i], bi = i;
		const int idx = block_best(bv, bi);
		if (threadIdx.x == 0) {
			ids_out[r] = idx;
			w_out[r] = p[idx];
			taken[idx] = 1;
		}
		__syncthreads();
	}
}

// argmax_block returns, in thread 0, the index of the largest logit,
// skipping NaN and the nm ids in masked (EOS suppression); ties pick the
// lowest index; -1 when nothing is left. Thread t scans t, t+blockDim, ...
// in order, then block_best. Other threads return an unspecified value.
__device__ __forceinline__ int argmax_block(const float* logits, int n, const int* masked, int nm) {
	float bv = 0.0f;
	int bi = -1;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		const float v = logits[i];
		if (v != v) continue;
		bool skip = false;
		for (int j = 0; j < nm; j++) skip |= masked[j] == i;
		if (!skip && beats(v, i, bv, bi)) bv = v, bi = i;
	}
	return block_best(bv, bi);
}
