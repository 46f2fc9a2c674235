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
// rope_inv_freq is pair i's inverse frequency (it depends on neither the
// position nor the activations, so a kernel may compute it before its
// dependency wait) and rope_pair_at the rotation with it.
__device__ __forceinline__ float rope_inv_freq(int i, int hd, double theta) {
	const float e = __fdiv_rn((float)(2 * i), (float)hd);
	return __fdiv_rn(1.0f, (float)pow(theta, (double)e));
}
// rope_rot rotates the pair (a, c) in registers: rope_pair_at's arithmetic.
__device__ __forceinline__ void rope_rot(float& a, float& c, int pos, float inv_freq) {
	const float f = __fmul_rn((float)pos, inv_freq);
	const float cs = (float)cos((double)f), sn = (float)sin((double)f);
	const float ra = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(c, sn));
	const float rc = __fadd_rn(__fmul_rn(c, cs), __fmul_rn(a, sn));
	a = ra, c = rc;
}
__device__ __forceinline__ void rope_pair_at(float* v, int i, int hd, int pos, float inv_freq) {
	const int half = hd >> 1;
	float a = v[i], c = v[i + half];
	rope_rot(a, c, pos, inv_freq);
	v[i] = a;
	v[i + half] = c;
}
__device__ __forceinline__ void rope_pair(float* v, int i, int hd, int pos, double theta) {
	rope_pair_at(v, i, hd, pos, rope_inv_freq(i, hd, theta));
}

// attention_split: the single-query attention of every CUDA path (op by op,
// captured steps, the persistent kernel), split over positions
// (flash-decoding). Head h's positions 0..n-1 are cut into ATT_SPLIT
// contiguous ranges of per = ceil(n/ATT_SPLIT); block (h, s) takes range s.
// Head h reads kv head h/(nHeads/nKV); hd % 4 == 0, hd <= ATT_HD_MAX.
//
// In a block, warp w takes positions t0+w, t0+w+ATT_WARPS, ... in rounds
// of ATT_U positions whose K and V rows it loads at once (lane l holds
// dims 4l+128j as float4s). A position's score is the lane FMA chain over
// its dims (j, then x, y, z, w), warp_sum, times 1/sqrt(hd). Each warp
// keeps an online softmax: its running max m, the sum l of exp(score - m)
// and the vector acc = sum of exp(score - m) * v; a round first rescales
// l and acc by exp(m_old - m_new), then adds its positions in order. The
// block merges its warps in warp order (weights exp(m_w - M), M the
// largest m_w) and writes (o[hd], M, L) to part[h][s]. The block that
// finishes head h last (cnt[h], a ticket it resets) merges the ATT_SPLIT
// partials in order the same way and writes dst[h*hd..] = o / L. The
// order of every sum is fixed by n alone, so every path gives the same
// bits; only the HF oracle's tolerance compares it with other
// implementations. part holds heads*ATT_SPLIT*(hd+2) floats; cnt heads
// counters, zero between launches. Launch: heads*ATT_SPLIT blocks of
// ATT_WARPS*32 threads.
#define ATT_WARPS 8
#define ATT_SPLIT 16
#define ATT_HD_MAX 256
// The ring loop (attention_ring_step, FP16 cache, hd <= 128, hd % 8 == 0):
// ATT_RING rounds of a warp's K and V rows staged in dynamic shared memory,
// ATT_RING_ROUND bytes a round (8 positions x 128 dims x 2 bytes, K and V),
// so ATT_RING_SMEM bytes a block: 96 KB at 3 rounds, two blocks an SM.
#define ATT_RING 3
#define ATT_RING_ROUND (2 * 8 * 128 * 2)
#define ATT_RING_SMEM (ATT_WARPS * ATT_RING * ATT_RING_ROUND)

__device__ __forceinline__ float4 att_ld4(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }

// The KV cache's element type KV: float (FP32) or __half (FP16, kv: fp16).
// kv_st stores one value (FP16: rounded to nearest even, __float2half_rn,
// the CPU backend's half.F32ToF16); kv_ld4 reads the 4 values at p (16
// bytes aligned for FP32, 8 for FP16) as a float4, exactly. Everything
// after the load is FP32 either way, so an FP16 cache changes only what
// was stored. kv_f32 is the cache row itself when it is FP32 (a kernel may
// then work in place), nullptr when it is FP16.
__device__ __forceinline__ float4 kv_ld4(const float* p) { return att_ld4(p); }
// kv_raw4 loads the 4 FP16 values at p as they are stored, kv_cvt4 converts
// them exactly: kv_ld4 split in two, so a loop can keep raw rows (half the
// registers) in flight and convert them when it uses them.
__device__ __forceinline__ uint2 kv_raw4(const __half* p) { return __ldcg(reinterpret_cast<const uint2*>(p)); }
__device__ __forceinline__ float4 kv_cvt4(uint2 u) {
	const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
	const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
	return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ float4 kv_ld4(const __half* p) { return kv_cvt4(kv_raw4(p)); }
// kv_ld4_cs is kv_ld4 through ld.global.cs (evict-first in L1 and L2: a
// streaming read), for attention_cs_step: the same values.
__device__ __forceinline__ float4 kv_ld4_cs(const float* p) { return __ldcs(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float4 kv_ld4_cs(const __half* p) { return kv_cvt4(__ldcs(reinterpret_cast<const uint2*>(p))); }
__device__ __forceinline__ void kv_st(float* p, float v) { *p = v; }
__device__ __forceinline__ void kv_st(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ float* kv_f32(float* p) { return p; }
__device__ __forceinline__ float* kv_f32(__half*) { return nullptr; }
template <typename KV> struct kv_is_f32 { static constexpr bool value = false; };
template <> struct kv_is_f32<float> { static constexpr bool value = true; };
__device__ __forceinline__ float att_dot4(float4 a, float4 b, float d) {
	d = __fmaf_rn(a.x, b.x, d);
	d = __fmaf_rn(a.y, b.y, d);
	d = __fmaf_rn(a.z, b.z, d);
	return __fmaf_rn(a.w, b.w, d);
}
__device__ __forceinline__ float4 att_axpy4(float p, float4 v, float4 a) {
	return make_float4(__fmaf_rn(p, v.x, a.x), __fmaf_rn(p, v.y, a.y), __fmaf_rn(p, v.z, a.z), __fmaf_rn(p, v.w, a.w));
}
__device__ __forceinline__ float4 att_scale4(float c, float4 a) {
	return make_float4(__fmul_rn(c, a.x), __fmul_rn(c, a.y), __fmul_rn(c, a.z), __fmul_rn(c, a.w));
}

// att_weight is exp(m - M) for a partial with max m under the merged max M
// (0 for a partial that saw no positions: m = -inf).
__device__ __forceinline__ float att_weight(float m, float M) { return m == -INFINITY ? 0.0f : expf(__fsub_rn(m, M)); }

// J float4s per lane cover hd <= 128*J; a round loads U positions per warp.
// AttShared is a block's shared memory: each warp's partial vector, max
// and sum, and the ticket's answer.
// The float4-read arrays come first, at 16-byte offsets.
struct AttShared {
	float acc[ATT_WARPS][ATT_HD_MAX];
	// attention_in: the block's query head and the new position's key row
	// (normalised and rotated), and rms_inv's reduction space.
	float q[ATT_HD_MAX], k[ATT_HD_MAX], red[32];
	float m[ATT_WARPS], l[ATT_WARPS];
	int last;
};

// att_round is one round of attention_split_t's loop: warp positions tb,
// tb + ATT_WARPS, ... (U of them; those at or past t1 are masked), whose K
// and V float4 j are K(u, j) and V(u, j). Each position's score is the
// lane FMA chain over its dims (j, then x, y, z, w), warp_sum, times scale;
// the round's max mx rescales l and acc by exp(m - mx); then the positions
// add exp(score - mx) to l and exp(score - mx)·v to acc in order.
template <int J, int U, typename KF, typename VF>
__device__ __forceinline__ void att_round(const float4 (&qv)[J], float4 (&acc)[J], float& m, float& l, int tb, int t1,
                                          float scale, KF K, VF V) {
	float sc[U];
	float mx = m;
#pragma unroll
	for (int u = 0; u < U; u++) {
		float d = 0.0f;
#pragma unroll
		for (int j = 0; j < J; j++) d = att_dot4(qv[j], K(u, j), d);
		sc[u] = __fmul_rn(warp_sum(d), scale);
		if (tb + u * ATT_WARPS < t1) mx = fmaxf(mx, sc[u]);
	}
	const float a = att_weight(m, mx);  // tb < t1: mx is a real score
	l = __fmul_rn(l, a);
#pragma unroll
	for (int j = 0; j < J; j++) acc[j] = att_scale4(a, acc[j]);
#pragma unroll
	for (int u = 0; u < U; u++) {
		if (tb + u * ATT_WARPS >= t1) break;  // the same for the whole warp
		const float p = expf(__fsub_rn(sc[u], mx));
		l = __fadd_rn(l, p);
#pragma unroll
		for (int j = 0; j < J; j++) acc[j] = att_axpy4(p, V(u, j), acc[j]);
	}
	m = mx;
}

// q_smem: q is the block's own query head in shared memory (attention_in),
// not the heads' vector in global memory. PIPE (an FP16 cache only): the
// next round's rows load while this round computes (attention_pipe_step).
// RING (an FP16 cache, J == 1, hd % 8 == 0; otherwise the plain loop): each
// warp keeps its next ATT_RING - 1 rounds' K and V rows copying into its
// slice of the block's dynamic shared memory (cp.async, ATT_RING_SMEM
// bytes) while it computes a round from there (attention_ring_step). The
// arithmetic is att_round's in every loop, on the same values: the same
// bits.
template <int J, int U, typename KV, bool PIPE = false, bool RING = false, bool CS = false>
__device__ __forceinline__ void attention_split_t(float* dst, float* part, unsigned* cnt, const float* q, const KV* kc,
                                                  const KV* vc, int n, int n_heads, int n_kv, int hd, int h, int s,
                                                  AttShared& sh, bool q_smem) {
	float (&wacc)[ATT_WARPS][ATT_HD_MAX] = sh.acc;
	float* wm = sh.m;
	float* wl = sh.l;
	int& last = sh.last;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int kv_dim = n_kv * hd, off = (h / (n_heads / n_kv)) * hd;
	const float scale = (float)(1.0 / sqrt((double)hd));
	const int per = (n + ATT_SPLIT - 1) / ATT_SPLIT;
	const int t0 = s * per, t1 = min(n, t0 + per);

	float4 qv[J], acc[J];
#pragma unroll
	for (int j = 0; j < J; j++) {
		const int i = 4 * lane + 128 * j;
		qv[j] = i >= hd  ? make_float4(0.f, 0.f, 0.f, 0.f)
		        : q_smem ? *reinterpret_cast<const float4*>(q + i)
		                 : att_ld4(q + (size_t)h * hd + i);
		acc[j] = make_float4(0.f, 0.f, 0.f, 0.f);
	}
	float m = -INFINITY, l = 0.0f;
	constexpr bool can_ring = RING && !kv_is_f32<KV>::value && J == 1 && U * 128 * 2 * 2 <= ATT_RING_ROUND;
	if (can_ring && hd % 8 == 0) {
		if constexpr (can_ring) {
		// Round r of this warp (positions tb + u*ATT_WARPS, u < U) sits in
		// stage r % ATT_RING: K rows at [u*hd], then V rows at [U*hd + u*hd]
		// (halves); round r + ATT_RING - 1 is issued into stage
		// (r - 1) % ATT_RING before round r computes. Every lane copies 16-byte pieces of the round's rows; a
		// position at or past t1 is zero-filled, as the plain loop loads
		// zeros. A round past the range copies nothing but still commits
		// its (empty) group, so the wait below always leaves the ring's
		// later rounds in flight.
		extern __shared__ __align__(16) float xs_smem[];  // the dynamic shared memory (also the emulator's)
		__half* ring = reinterpret_cast<__half*>(reinterpret_cast<unsigned char*>(xs_smem) + (size_t)warp * ATT_RING * ATT_RING_ROUND);
		const int pieces = hd / 8, step = U * ATT_WARPS;
		auto issue = [&](int tb, int stage) {
			if (tb < t1) {
				__half* ks = ring + (size_t)stage * (ATT_RING_ROUND / 2);
				for (int c = lane; c < U * pieces; c += 32) {
					const int u = c / pieces, pc = c % pieces, t = tb + u * ATT_WARPS;
					const size_t at = (size_t)(t < t1 ? t : tb) * kv_dim + off + 8 * pc;
					cp_async16z(ks + u * hd + 8 * pc, kc + at, t < t1);
					cp_async16z(ks + (U + u) * hd + 8 * pc, vc + at, t < t1);
				}
			}
			cp_async_commit();
		};
#pragma unroll
		for (int r = 0; r < ATT_RING - 1; r++) issue(t0 + warp + r * step, r);
		const int i = 4 * lane;
		int stage = 0;
		for (int tb = t0 + warp; tb < t1; tb += step) {
			cp_async_wait<ATT_RING - 2>();  // this lane's copies of the round are done
			__syncwarp();                    // every lane's are visible, and every lane has read the last round
			// The round ATT_RING - 1 ahead goes where the last round was.
			issue(tb + (ATT_RING - 1) * step, stage == 0 ? ATT_RING - 1 : stage - 1);
			const __half* ks = ring + (size_t)stage * (ATT_RING_ROUND / 2);
			att_round<J, U>(
			    qv, acc, m, l, tb, t1, scale,
			    [&](int u, int) { return i < hd ? kv_cvt4(*reinterpret_cast<const uint2*>(ks + u * hd + i)) : make_float4(0.f, 0.f, 0.f, 0.f); },
			    [&](int u, int) {
				    return i < hd ? kv_cvt4(*reinterpret_cast<const uint2*>(ks + (U + u) * hd + i)) : make_float4(0.f, 0.f, 0.f, 0.f);
			    });
			stage = stage == ATT_RING - 1 ? 0 : stage + 1;
		}
		cp_async_wait<0>();
		}
	} else if constexpr (PIPE && !kv_is_f32<KV>::value) {
		// FP16 cache, pipelined: the next round's K and V rows load, raw (8
		// bytes a lane a row), while this round computes, so a warp keeps
		// its rows in flight through the whole loop. The arithmetic is
		// att_round's either way: the same bits.
		uint2 kn[U][J], vn[U][J];
		auto load = [&](int tb) {
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int t = tb + u * ATT_WARPS;
#pragma unroll
				for (int j = 0; j < J; j++) {
					const int i = 4 * lane + 128 * j;
					const bool ok = t < t1 && i < hd;
					const size_t at = (size_t)t * kv_dim + off + i;
					kn[u][j] = ok ? kv_raw4(kc + at) : make_uint2(0u, 0u);
					vn[u][j] = ok ? kv_raw4(vc + at) : make_uint2(0u, 0u);
				}
			}
		};
		load(t0 + warp);
		for (int tb = t0 + warp; tb < t1; tb += U * ATT_WARPS) {
			uint2 kr[U][J], vr[U][J];
#pragma unroll
			for (int u = 0; u < U; u++)
#pragma unroll
				for (int j = 0; j < J; j++) kr[u][j] = kn[u][j], vr[u][j] = vn[u][j];
			load(tb + U * ATT_WARPS);
			att_round<J, U>(qv, acc, m, l, tb, t1, scale, [&](int u, int j) { return kv_cvt4(kr[u][j]); },
			                [&](int u, int j) { return kv_cvt4(vr[u][j]); });
		}
	} else {
		for (int tb = t0 + warp; tb < t1; tb += U * ATT_WARPS) {
			float4 kr[U][J], vr[U][J];
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int t = tb + u * ATT_WARPS;
#pragma unroll
				for (int j = 0; j < J; j++) {
					const int i = 4 * lane + 128 * j;
					const bool ok = t < t1 && i < hd;
					const size_t at = (size_t)t * kv_dim + off + i;
					if constexpr (CS) {
						kr[u][j] = ok ? kv_ld4_cs(kc + at) : make_float4(0.f, 0.f, 0.f, 0.f);
						vr[u][j] = ok ? kv_ld4_cs(vc + at) : make_float4(0.f, 0.f, 0.f, 0.f);
					} else {
						kr[u][j] = ok ? kv_ld4(kc + at) : make_float4(0.f, 0.f, 0.f, 0.f);
						vr[u][j] = ok ? kv_ld4(vc + at) : make_float4(0.f, 0.f, 0.f, 0.f);
					}
				}
			}
			att_round<J, U>(qv, acc, m, l, tb, t1, scale, [&](int u, int j) { return kr[u][j]; },
			                [&](int u, int j) { return vr[u][j]; });
		}
	}
#pragma unroll
	for (int j = 0; j < J; j++) {
		const int i = 4 * lane + 128 * j;
		if (i < hd) *reinterpret_cast<float4*>(&wacc[warp][i]) = acc[j];
	}
	if (lane == 0) wm[warp] = m, wl[warp] = l;
	__syncthreads();

	// The block's partial: its warps merged in warp order.
	float M = -INFINITY;
	for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, wm[w]);
	float* ph = part + (size_t)h * ATT_SPLIT * (hd + 2);
	float* mine = ph + (size_t)s * (hd + 2);
	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		float o = 0.0f;
		for (int w = 0; w < ATT_WARPS; w++) o = __fmaf_rn(att_weight(wm[w], M), wacc[w][i], o);
		mine[i] = o;
	}
	if (threadIdx.x == 0) {
		float L = 0.0f;
		for (int w = 0; w < ATT_WARPS; w++) L = __fmaf_rn(att_weight(wm[w], M), wl[w], L);
		mine[hd] = M;
		mine[hd + 1] = L;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence();
		last = atomicAdd(&cnt[h], 1u) == ATT_SPLIT - 1;
	}
	__syncthreads();
	if (!last) return;
	__threadfence();
	// The head's result: the ATT_SPLIT partials merged in range order.
	M = -INFINITY;
	for (int r = 0; r < ATT_SPLIT; r++) M = fmaxf(M, __ldcg(ph + (size_t)r * (hd + 2) + hd));
	float L = 0.0f;
	for (int r = 0; r < ATT_SPLIT; r++) {
		const float* pr = ph + (size_t)r * (hd + 2);
		L = __fmaf_rn(att_weight(__ldcg(pr + hd), M), __ldcg(pr + hd + 1), L);
	}
	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		float o = 0.0f;
		for (int r = 0; r < ATT_SPLIT; r++) {
			const float* pr = ph + (size_t)r * (hd + 2);
			o = __fmaf_rn(att_weight(__ldcg(pr + hd), M), __ldcg(pr + i), o);
		}
		dst[(size_t)h * hd + i] = __fdiv_rn(o, L);
	}
	if (threadIdx.x == 0) cnt[h] = 0;
}

// attention_split is attention_split_t for the block (h, s) = (bid /
// ATT_SPLIT, bid % ATT_SPLIT): 8 positions a round per warp up to hd 128,
// 4 above. KV: the cache's element type (float or __half); PIPE: the
// pipelined loop, RING: the shared-memory ring (FP16 only, the ring up to
// hd 128; the same bits); CS: the plain loop's K/V loads are streaming
// (ld.global.cs, evict-first; the same bits).
template <typename KV, bool PIPE = false, bool RING = false, bool CS = false>
__device__ __forceinline__ void attention_split(float* dst, float* part, unsigned* cnt, const float* q, const KV* kc,
                                                const KV* vc, int n, int n_heads, int n_kv, int hd, int bid) {
	__shared__ __align__(16) AttShared sh;
	const int h = bid / ATT_SPLIT, s = bid % ATT_SPLIT;
	if (hd <= 128)
		attention_split_t<1, 8, KV, PIPE, RING, CS>(dst, part, cnt, q, kc, vc, n, n_heads, n_kv, hd, h, s, sh, false);
	else
		attention_split_t<2, 4, KV, PIPE, false, CS>(dst, part, cnt, q, kc, vc, n, n_heads, n_kv, hd, h, s, sh, false);
}

// attention_in_row writes head hh of the projection x (q or k), RMS-normed
// over its group of g values with weights w when w_kind != 0 (rms_inv and
// rmsnorm_group's products: the op-by-op norm's bits) and then rotated at
// position pos (rope_pair), into dst[hd] in shared memory. Every thread of
// the block calls it.
__device__ __forceinline__ void attention_in_row(float* dst, const float* x, int hh, const void* w, int w_kind, int g, int hd,
                                                 int pos, double theta, float eps, float* red) {
	if (w_kind != 0) {
		const int g0 = hh * hd / g * g;  // the head's group starts at g0
		const float inv = rms_inv(x + g0, g, eps, red);
		for (int j = threadIdx.x; j < hd; j += blockDim.x) {
			const int i = hh * hd - g0 + j;  // index within the group
			const float wv = w_kind == 1 ? __half2float(reinterpret_cast<const __half*>(w)[i]) : reinterpret_cast<const float*>(w)[i];
			dst[j] = __fmul_rn(wv, __fmul_rn(x[g0 + i], inv));
		}
	} else {
		for (int j = threadIdx.x; j < hd; j += blockDim.x) dst[j] = x[(size_t)hh * hd + j];
	}
	__syncthreads();
	for (int i = threadIdx.x; i < (hd >> 1); i += blockDim.x) rope_pair(dst, i, hd, pos, theta);
	__syncthreads();
}

// attention_in is the q/k norm (optional), RoPE, KV append at pos = n-1 and
// attention_split in one launch, from the raw projections q, k, v: block
// (h, s) normalises and rotates query head h itself (the norm groups hold
// whole heads: g % hd == 0); the block whose range holds pos also makes
// that position's key row (kv head h/(nHeads/nKV)) and stores it and the
// value row in the caches before it reads them back (the blocks of one kv
// head's query heads store the same bits there). Every value is computed as
// op by op computes it, so the bits are attention_split's over op by op's
// caches. qw/kw: the norms' weights (w_kind 1 FP16, 2 FP32, 0 no norms).
template <typename KV>
__device__ __forceinline__ void attention_in(float* dst, float* part, unsigned* cnt, const float* q, const float* k,
                                             const float* v, KV* kc, KV* vc, const void* qw, const void* kw,
                                             int w_kind, int n, int n_heads, int n_kv, int hd, int gq, int gk, double theta,
                                             float eps, int bid) {
	__shared__ __align__(16) AttShared sh;
	const int h = bid / ATT_SPLIT, s = bid % ATT_SPLIT, pos = n - 1;
	const int per = (n + ATT_SPLIT - 1) / ATT_SPLIT, t0 = s * per;
	attention_in_row(sh.q, q, h, qw, w_kind, gq, hd, pos, theta, eps, sh.red);
	if (t0 <= pos && pos < t0 + per) {
		const int kh = h / (n_heads / n_kv), kvn = n_kv * hd;
		attention_in_row(sh.k, k, kh, kw, w_kind, gk, hd, pos, theta, eps, sh.red);
		KV* krow = kc + (size_t)pos * kvn + (size_t)kh * hd;
		KV* vrow = vc + (size_t)pos * kvn + (size_t)kh * hd;
		for (int j = threadIdx.x; j < hd; j += blockDim.x) {
			kv_st(krow + j, sh.k[j]);
			kv_st(vrow + j, v[(size_t)kh * hd + j]);
		}
		__syncthreads();  // the rows are the block's to read back
	}
	if (hd <= 128)
		attention_split_t<1, 8>(dst, part, cnt, sh.q, kc, vc, n, n_heads, n_kv, hd, h, s, sh, true);
	else
		attention_split_t<2, 4>(dst, part, cnt, sh.q, kc, vc, n, n_heads, n_kv, hd, h, s, sh, true);
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

// rope_kv_step: at position pos = st[1], rotate the nh query heads of q in
// place, rotate the nkv key heads of k and store them at kc[pos], and store
// v at vc[pos] (rows of kvn = nkv*hd values). One thread per work item:
// nh*hd/2 query pairs, then nkv*hd/2 key pairs, then kvn value copies.
// With enter (the launched kernel) the thread computes its first pair's
// inverse frequency (a constant: rope_inv_freq) before grid_dep_enter, so
// only cos and sin stay behind the wait; the values are the same. ROWS: at
// position row_pos instead of st[1] (a batched prefill's row).
template <typename KV, bool ROWS = false>
__device__ __forceinline__ void rope_kv_step_body(float* q, const float* k, const float* v, KV* kc, KV* vc, int nh,
                                        int nkv, int hd, const int* st, double theta, VGrid vg, bool enter = false,
                                        int row_pos = 0) {
	const int half = hd >> 1, kvn = nkv * hd;
	const int nqp = nh * half, nkp = nkv * half, total = nqp + nkp + kvn;
	const int idx0 = vg.bid * blockDim.x + threadIdx.x;
	float if0 = 0.0f;
	if (idx0 < nqp + nkp) if0 = rope_inv_freq((idx0 < nqp ? idx0 : idx0 - nqp) % half, hd, theta);
	if (enter) grid_dep_enter();
	const int pos = ROWS ? row_pos : st[1];
	for (int idx = idx0; idx < total; idx += vg.nblk * blockDim.x) {
		if (idx < nqp) {
			const int h = idx / half, i = idx - h * half;
			rope_pair_at(q + (size_t)h * hd, i, hd, pos, idx == idx0 ? if0 : rope_inv_freq(i, hd, theta));
		} else if (idx < nqp + nkp) {
			const int j = idx - nqp, h = j / half, i = j - h * half;
			// The pair is rotated in registers and stored into the cache
			// row: k itself stays as projected (only the cache holds the
			// rotated key, as after RoPE + KVAppend).
			const float* kh = k + (size_t)h * hd;
			KV* row = kc + (size_t)pos * kvn + (size_t)h * hd;
			float a = kh[i], c = kh[i + half];
			rope_rot(a, c, pos, idx == idx0 ? if0 : rope_inv_freq(i, hd, theta));
			kv_st(row + i, a);
			kv_st(row + i + half, c);
		} else {
			const int j = idx - nqp - nkp;
			kv_st(vc + (size_t)pos * kvn + j, v[j]);
		}
	}
}

// qk_norm_rope_kv_step: qk_norm_step followed by rope_kv_step in one
// launch, for norm groups that hold whole heads (g % hd == 0), one block per
// head: blocks 0..nh-1 take query head h, blocks nh..nh+nkv-1 key head b.
// Each block computes its group's inv (rms_inv: rmsnorm_group's sum order,
// so every block of a group gets the same bits), normalises only its head,
// into qo (queries: q itself stays as projected, since other blocks of the
// group still read it) or into the cache row at pos = st[1] (keys, which
// also copy their head of v into vc), then rotates that head. The
// arithmetic is rmsnorm_group's and rope_pair's in the op-by-op order
// (norm, rope, append), so the bits are the same. qo must not alias q.
// With enter (the launched kernel) the thread's first norm weight and its
// first pair's inverse frequency, both constants, are loaded and computed
// before grid_dep_enter: after the wait only the activations' round trip,
// the reduction and cos/sin remain. An FP16 cache (KV = __half): a key head
// is normalised and rotated in shared memory (kst) and then stored rounded.
// ROWS (a batched prefill's rows, prefill_rows.cu): the position is row_pos,
// not st[1]; the same arithmetic.
template <typename KV, bool ROWS = false>
__device__ __forceinline__ void qk_norm_rope_kv_step_body(float* qo, const float* q, const float* k,
                                                                      const float* v, KV* kc, KV* vc,
                                                                      const void* qw, const void* kw, int w_kind, int nh,
                                                                      int nkv, int hd, int gq, int gk, const int* st,
                                                                      double theta, float eps, VGrid vg, bool enter = false,
                                                                      int row_pos = 0) {
	__shared__ float red[32];
	__shared__ float kst[kv_is_f32<KV>::value ? 1 : ATT_HD_MAX];
	const int half = hd >> 1, kvn = nkv * hd;
	const bool isq = (int)vg.bid < nh;
	const int h = isq ? vg.bid : vg.bid - nh;  // head within q or k
	const int g = isq ? gq : gk, g0 = h * hd / g * g;   // the head's group starts at g0
	const float* x = isq ? q : k;
	const void* w = isq ? qw : kw;
	auto weight = [&](int i) {
		return w_kind == 1 ? __half2float(reinterpret_cast<const __half*>(w)[i]) : reinterpret_cast<const float*>(w)[i];
	};
	// Constants first (with enter, before the wait): this thread's first
	// norm weight and its first pair's inverse frequency.
	const int t = threadIdx.x;
	const float w0 = t < hd ? weight(h * hd - g0 + t) : 0.0f;
	const float if0 = t < half ? rope_inv_freq(t, hd, theta) : 0.0f;
	if (enter) grid_dep_enter();
	const int pos = ROWS ? row_pos : st[1];
	KV* krow = kc + (size_t)pos * kvn + (size_t)h * hd;
	float* kf = kv_f32(krow);  // FP32: normalise and rotate in the row itself
	float* dst = isq ? qo + (size_t)h * hd : kf ? kf : kst;
	const float inv = rms_inv(x + g0, g, eps, red);
	for (int j = t; j < hd; j += blockDim.x) {
		const int i = h * hd - g0 + j;  // index within the group
		const float wv = j == t ? w0 : weight(i);
		dst[j] = __fmul_rn(wv, __fmul_rn(x[g0 + i], inv));
		if (!isq) kv_st(vc + (size_t)pos * kvn + (size_t)h * hd + j, v[(size_t)h * hd + j]);
	}
	__syncthreads();
	for (int i = t; i < half; i += blockDim.x) rope_pair_at(dst, i, hd, pos, i == t ? if0 : rope_inv_freq(i, hd, theta));
	if (!isq && !kf) {  // FP16 cache: store the rotated head (a block-uniform branch)
		__syncthreads();
		for (int j = t; j < hd; j += blockDim.x) kv_st(krow + j, kst[j]);
	}
}

// route_topk_warp: at most ROUTE_MAX_PER_LANE*32 experts.
#define ROUTE_MAX_PER_LANE 8

// route_topk_warp is one warp's softmax over logits[E] (E <= 256) and its
// top-k (k <= 64), the values router_topk_block gives (max is exact in any
// order; p_i = exp(l_i - max) in double rounded once; the sum in index order
// by lane 0; one division each; selection by (p desc, index asc), a total
// order, so the winner of each round does not depend on the reduction
// order): ids[r], w[r] for r < k, in the warp's shared arrays p [E], ids and
// w [k]. The selection is one rank pass (a value's rank = how many values
// beat it; the k sequential rounds only when a NaN is present). The
// logits are read through L2 (__ldcg: another block may have written them).
// lane is the thread's lane (threadIdx.x for a block of one warp). The
// caller syncs the warp before reading ids and w. route_step (decode)
// and router_topk_rows_warp (a batched prefill's rows, a warp a row) run it.
__device__ __forceinline__ void route_topk_warp(const float* logits, int E, int k, float* p, int* ids, float* w, int lane) {
	float v[ROUTE_MAX_PER_LANE];
	float m = -INFINITY;
#pragma unroll
	for (int j = 0; j < ROUTE_MAX_PER_LANE; j++) {
		const int i = lane + 32 * j;
		v[j] = i < E ? __ldcg(logits + i) : -INFINITY;  // through L2: router_route_step's other blocks wrote them
		m = fmaxf(m, v[j]);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(FULL_MASK, m, o));
#pragma unroll
	for (int j = 0; j < ROUTE_MAX_PER_LANE; j++) {
		const int i = lane + 32 * j;
		if (i < E) p[i] = v[j] = (float)exp((double)__fsub_rn(v[j], m));
	}
	__syncwarp();
	float total = 0.0f;
	if (lane == 0) {
		// In index order (unrolled: the loads run ahead, the adds stay in order).
#pragma unroll 16
		for (int i = 0; i < E; i++) total = __fadd_rn(total, p[i]);
	}
	total = __shfl_sync(FULL_MASK, total, 0);
	bool nan = false;
#pragma unroll
	for (int j = 0; j < ROUTE_MAX_PER_LANE; j++) {
		v[j] = __fdiv_rn(v[j], total);
		nan |= lane + 32 * j < E && v[j] != v[j];
	}
	__syncwarp();  // every lane read p for the total
#pragma unroll
	for (int j = 0; j < ROUTE_MAX_PER_LANE; j++)
		if (lane + 32 * j < E) p[lane + 32 * j] = v[j];
	__syncwarp();
	if (!__any_sync(FULL_MASK, nan) && k <= E) {
		// (p desc, index asc) is a strict total order on non-NaN values,
		// so the value with rank r (r values beat it) is the one round r
		// of the selection below picks: one pass instead of k rounds.
#pragma unroll
		for (int j = 0; j < ROUTE_MAX_PER_LANE; j++) {
			const int i = lane + 32 * j;
			if (i >= E) continue;
			int rank = 0;
#pragma unroll 8
			for (int o = 0; o < E; o++) rank += beats(p[o], o, v[j], i);
			if (rank < k) ids[rank] = i, w[rank] = v[j];
		}
	} else {
		unsigned taken = 0;  // bit j: value j of this lane selected
		for (int r = 0; r < k; r++) {
			float bv = 0.0f;
			int bi = -1;
#pragma unroll
			for (int j = 0; j < ROUTE_MAX_PER_LANE; j++) {
				const int i = lane + 32 * j;
				if (i < E && !(taken & (1u << j)) && beats(v[j], i, bv, bi)) bv = v[j], bi = i;
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) {
				float ov = __shfl_xor_sync(FULL_MASK, bv, o);
				int oi = __shfl_xor_sync(FULL_MASK, bi, o);
				if (beats(ov, oi, bv, bi)) bv = ov, bi = oi;
			}
			if (bi >= 0 && (bi & 31) == lane) taken |= 1u << (bi >> 5);
			if (lane == 0) ids[r] = bi, w[r] = bv;
		}
	}
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
