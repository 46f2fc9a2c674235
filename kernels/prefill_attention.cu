// prefill_attention.cu: the causal attention of a batched prefill's query
// rows, tiled so that a block reads each K and V row once for QT queries
// (runtime/cuda rowops.go AttentionRows; the default where the batched ops
// run on the tensor cores, attnTiled there; under tuning.noMatmulTC
// prefill_rows.cu's attention_rows_f32 runs instead, the decode kernel's
// bits row by row).
//
//	attention_tiled_rows_f32         QT 16 over an FP32 cache
//	attention_tiled_rows_f32_kv16    QT 16 over an FP16 cache (values read exactly)
//	attention_tiled32_rows_f32       QT 32 (attnTiled32 there)
//	attention_tiled32_rows_f32_kv16
//
// Block b is query tile b / n_heads (rows t0 = QT * tile ..) of head
// h = b % n_heads, which reads kv head h / (n_heads / n_kv). Row t is the
// query at position pos0 + t and attends to positions 0..pos0+t of a cache
// that already holds the batch's rows. The block walks the positions in
// tiles of PA_PT: it stages the tile's K and V rows in shared memory (FP32),
// then each warp takes its QPW = QT / PA_WARPS queries together, so a K or
// V value read from shared memory serves all of them: lane p scores
// position p0 + p for each query (the FMA chain over the head's dims in
// order, times 1/sqrt(hd)), the warp keeps each query's online softmax
// (running max m, sum l of exp(score - m), and acc = sum of exp(score - m)
// * v, lane l holding dims 4l..4l+3), and the tile's probabilities are
// added to acc in position order. The output is acc / l. Every sum's order
// is fixed by the query's position alone (tiles start at 0, so a row's bits
// do not depend on QT, on which rows share its block or launch, or on which
// of its warp's queries are still attending), but it is not the decode
// kernel's order: a prefill on this kernel agrees with token at a time
// within the HF oracle's tolerance, not bit for bit. hd % 4 == 0,
// hd <= PA_HD. Launch: n_heads * ceil(T / QT) blocks of PA_WARPS * 32
// threads, PA_SMEM(QT) bytes of dynamic shared memory (over 48 KiB for QT
// 32: the launch opts in). Op by op only (never captured), but each kernel
// waits on its prerequisite grid first (tuning.prefillPDL).
#include "common.cuh"  // listed for the PTX source hashes (step.cuh includes it)
#include "step.cuh"

#define PA_PT 32     // positions a tile: one a lane
#define PA_HD 128    // the largest head dim
#define PA_WARPS 8   // warps a block (QT / PA_WARPS queries each)
#define PA_LDK 132   // floats a staged K row: PA_HD + 4 (the lanes' float4 reads hit distinct banks)
// PA_SMEM is a block's shared memory in bytes: the queries qs[QT][PA_HD],
// the tile's keys ks[PA_PT][PA_LDK] and values vs[PA_PT][PA_HD], FP32.
#define PA_SMEM(QT) (((QT) * PA_HD + PA_PT * PA_LDK + PA_PT * PA_HD) * 4)

extern __shared__ __align__(16) float xs_smem[];

__device__ __forceinline__ float pa_warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

template <typename KV, int QT>
__device__ __forceinline__ void attention_tiled_body(float* __restrict__ dst, const float* __restrict__ q,
                                                     const KV* __restrict__ kc, const KV* __restrict__ vc, int T,
                                                     int pos0, int n_heads, int n_kv, int hd) {
	constexpr int QPW = QT / PA_WARPS;
	float* qs = xs_smem;               // [QT][PA_HD]
	float* ks = qs + QT * PA_HD;       // [PA_PT][PA_LDK]
	float* vs = ks + PA_PT * PA_LDK;   // [PA_PT][PA_HD]
	const int h = blockIdx.x % n_heads, t0 = (blockIdx.x / n_heads) * QT;
	const int nq = min(QT, T - t0);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int kv_dim = n_kv * hd, off = (h / (n_heads / n_kv)) * hd, hd4 = hd >> 2;
	const size_t qdim = (size_t)n_heads * hd;
	const float scale = (float)(1.0 / sqrt((double)hd));

	for (int idx = threadIdx.x; idx < QT * hd4; idx += blockDim.x) {
		const int i = idx / hd4, c = idx - i * hd4;
		float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
		if (i < nq) v = *reinterpret_cast<const float4*>(q + (size_t)(t0 + i) * qdim + (size_t)h * hd + 4 * c);
		*reinterpret_cast<float4*>(&qs[i * PA_HD + 4 * c]) = v;
	}
	float m[QPW], l[QPW];
	float4 acc[QPW];
#pragma unroll
	for (int r = 0; r < QPW; r++) m[r] = -INFINITY, l[r] = 0.0f, acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
	// The warp's rows are warp * QPW + r; the last of them that exists
	// attends to the most positions.
	const int wlast = min(warp * QPW + QPW, nq) - 1;
	const int last = pos0 + t0 + nq - 1;  // the block's last query position
	for (int p0 = 0; p0 <= last; p0 += PA_PT) {
		__syncthreads();  // the queries are staged; the previous tile is read
		for (int idx = threadIdx.x; idx < PA_PT * hd4; idx += blockDim.x) {
			const int p = idx / hd4, c = idx - p * hd4;
			float4 kk = make_float4(0.f, 0.f, 0.f, 0.f), vv = kk;
			if (p0 + p <= last) {
				const size_t at = (size_t)(p0 + p) * kv_dim + off + 4 * c;
				kk = kv_ld4(kc + at);
				vv = kv_ld4(vc + at);
			}
			*reinterpret_cast<float4*>(&ks[p * PA_LDK + 4 * c]) = kk;
			*reinterpret_cast<float4*>(&vs[p * PA_HD + 4 * c]) = vv;
		}
		__syncthreads();
		if (wlast < 0 || p0 > pos0 + t0 + wlast) continue;  // none of the warp's rows attends here (the same for the whole warp)
		// The scores: one K read of the lane's position serves the warp's
		// rows; a row that no longer attends (p0 > its position) or does not
		// exist is scored too, and never used.
		float s[QPW];
#pragma unroll
		for (int r = 0; r < QPW; r++) s[r] = 0.0f;
#pragma unroll 4
		for (int c = 0; c < hd4; c++) {
			const float4 kk = *reinterpret_cast<const float4*>(&ks[lane * PA_LDK + 4 * c]);
#pragma unroll
			for (int r = 0; r < QPW; r++)
				s[r] = att_dot4(*reinterpret_cast<const float4*>(&qs[(warp * QPW + r) * PA_HD + 4 * c]), kk, s[r]);
		}
		float pr[QPW];
		int np[QPW];
#pragma unroll
		for (int r = 0; r < QPW; r++) {
			const int i = warp * QPW + r;
			const int qp = pos0 + t0 + i;
			pr[r] = 0.0f, np[r] = 0;
			if (i >= nq || p0 > qp) continue;  // the same for the whole warp
			const float sc = __fmul_rn(s[r], scale);
			const bool ok = p0 + lane <= qp;
			const float mx = fmaxf(m[r], pa_warp_max(ok ? sc : -INFINITY));  // position p0 <= qp: a real score
			const float a = att_weight(m[r], mx);
			pr[r] = ok ? expf(__fsub_rn(sc, mx)) : 0.0f;
			l[r] = __fadd_rn(__fmul_rn(l[r], a), warp_sum(pr[r]));
			acc[r] = att_scale4(a, acc[r]);
			m[r] = mx;
			np[r] = min(PA_PT, qp - p0 + 1);
		}
		// The values: one V read serves the warp's rows, each adding its
		// own positions (pp < np[r]) in order.
		const int npw = min(PA_PT, pos0 + t0 + wlast - p0 + 1);
		for (int pp = 0; pp < npw; pp++) {
			float4 vv = make_float4(0.f, 0.f, 0.f, 0.f);
			if (lane < hd4) vv = *reinterpret_cast<const float4*>(&vs[pp * PA_HD + 4 * lane]);
#pragma unroll
			for (int r = 0; r < QPW; r++) {
				const float w = __shfl_sync(FULL_MASK, pr[r], pp);
				if (pp < np[r] && lane < hd4) acc[r] = att_axpy4(w, vv, acc[r]);
			}
		}
	}
#pragma unroll
	for (int r = 0; r < QPW; r++) {
		const int i = warp * QPW + r;
		if (i < nq && lane < hd4) {
			const float4 a = acc[r];
			*reinterpret_cast<float4*>(dst + (size_t)(t0 + i) * qdim + (size_t)h * hd + 4 * lane) =
			    make_float4(__fdiv_rn(a.x, l[r]), __fdiv_rn(a.y, l[r]), __fdiv_rn(a.z, l[r]), __fdiv_rn(a.w, l[r]));
		}
	}
}

#define ATTENTION_TILED(NAME, KV, QT)                                                                                     \
	extern "C" __global__ void __launch_bounds__(PA_WARPS * 32) NAME(float* dst, const float* q, const KV* kc, const KV* vc, \
	                                                                int T, int pos0, int n_heads, int n_kv, int hd) {          \
		grid_dep_enter();                                                                                                   \
		attention_tiled_body<KV, QT>(dst, q, kc, vc, T, pos0, n_heads, n_kv, hd);                                           \
	}
ATTENTION_TILED(attention_tiled_rows_f32, float, 16)
ATTENTION_TILED(attention_tiled_rows_f32_kv16, __half, 16)
ATTENTION_TILED(attention_tiled32_rows_f32, float, 32)
ATTENTION_TILED(attention_tiled32_rows_f32_kv16, __half, 32)

// ---------------------------------------------------------------------------
// attention_tc_rows_kv16 (tuning.attTC): the same causal attention over an
// FP16 cache on the tensor cores, flash-attention style. Block b is query
// tile b / n_heads (PAT_BM = 64 rows from t0) of head h = b % n_heads; warp
// w owns rows t0 + 16w .. +15 (one m16 tile). The block walks the positions
// in tiles of PAT_BN = 64: it stages the tile's K rows (ks [pos][dim]) and
// V transposed (vt [dim][pos]) in shared memory, exactly (the cache's FP16
// values). Each warp then
//   - scores its 16 rows against the tile's 64 positions with mma: the
//     queries as FP16 hi and lo halves (hi = fp16(q), lo = fp16(q - hi),
//     staged once), so a score carries ~22 bits of q, accumulated in FP32;
//   - keeps each row's online softmax in FP32 (running max m, sum l; a row's
//     four lanes combine their maxima and sums with two shuffles);
//   - adds the tile's probabilities times V with mma, the probabilities
//     split into hi and lo halves the same way, the output accumulators
//     (16 rows x hd) in FP32 registers.
// The output is acc / l. Other bits than the tiled kernel's (the products
// are summed in the tensor cores' order), within the HF oracle's tolerance;
// a row's results depend on its position, T and pos0 alone. hd % 16 == 0,
// hd <= PA_HD. Launch: n_heads * ceil(T / PAT_BM) blocks of 128 threads,
// PAT_SMEM bytes of dynamic shared memory (the launch opts in).
#include "tc.cuh"

#define PAT_BM 64                  // queries a block: 4 warps of one m16 tile
#define PAT_BN 64                  // positions a tile
#define PAT_LDQ (PA_HD + 8)        // halves a staged Q or K row (rows 4 banks apart: ldmatrix conflict-free)
#define PAT_LDV (PAT_BN + 8)       // halves a staged V^T row
#define PAT_SMEM ((2 * PAT_BM * PAT_LDQ + PAT_BN * PAT_LDQ + PA_HD * PAT_LDV) * 2)

// pat_mma2 adds the products of an m16 x k16 A fragment's hi and lo halves
// with the two n8 B tiles of one ldmatrix_x4 load (b4: tile n's b0, b1,
// then tile n + 1's) into their accumulators c0 and c1.
__device__ __forceinline__ void pat_mma2(float (&c0)[4], float (&c1)[4], const unsigned (&hi)[4], const unsigned (&lo)[4],
                                         const unsigned (&b4)[4]) {
	const unsigned b0[2] = {b4[0], b4[1]}, b1[2] = {b4[2], b4[3]};
	mma_16816(c0, hi, b0);
	mma_16816(c0, lo, b0);
	mma_16816(c1, hi, b1);
	mma_16816(c1, lo, b1);
}

extern "C" __global__ void __launch_bounds__(128) attention_tc_rows_kv16(float* dst, const float* q, const __half* kc,
                                                                          const __half* vc, int T, int pos0, int n_heads,
                                                                          int n_kv, int hd) {
	grid_dep_enter();
	__half* qh = reinterpret_cast<__half*>(xs_smem);  // [PAT_BM][PAT_LDQ]
	__half* ql = qh + PAT_BM * PAT_LDQ;               // [PAT_BM][PAT_LDQ]
	__half* ks = ql + PAT_BM * PAT_LDQ;               // [PAT_BN][PAT_LDQ]
	__half* vt = ks + PAT_BN * PAT_LDQ;               // [PA_HD][PAT_LDV]
	const int h = blockIdx.x % n_heads, t0 = (blockIdx.x / n_heads) * PAT_BM;
	const int nq = min(PAT_BM, T - t0);
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, qd = lane & 3;
	const int kv_dim = n_kv * hd, off = (h / (n_heads / n_kv)) * hd, hd8 = hd >> 3, kst = hd >> 4;
	const size_t qdim = (size_t)n_heads * hd;
	const float scale = (float)(1.0 / sqrt((double)hd));

	// The queries' hi and lo halves (zero past nq).
	for (int idx = tid; idx < PAT_BM * hd8; idx += blockDim.x) {
		const int i = idx / hd8, c = idx - i * hd8;
		unsigned hv[4], lv[4];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			float a = 0.0f, b = 0.0f;
			if (i < nq) {
				const float* src = q + (size_t)(t0 + i) * qdim + (size_t)h * hd + 8 * c + 2 * j;
				a = src[0], b = src[1];
			}
			const __half ah = __float2half_rn(a), bh = __float2half_rn(b);
			hv[j] = tc_pack(ah, bh);
			lv[j] = tc_pack(__float2half_rn(__fsub_rn(a, __half2float(ah))), __float2half_rn(__fsub_rn(b, __half2float(bh))));
		}
		*reinterpret_cast<uint4*>(qh + i * PAT_LDQ + 8 * c) = make_uint4(hv[0], hv[1], hv[2], hv[3]);
		*reinterpret_cast<uint4*>(ql + i * PAT_LDQ + 8 * c) = make_uint4(lv[0], lv[1], lv[2], lv[3]);
	}

	// This warp's rows: 16w + g (accumulator elements 0, 1) and + 8 (2, 3).
	const int r0 = 16 * warp;
	const int qp0 = pos0 + t0 + r0 + g, qp1 = qp0 + 8;  // their positions
	const bool live0 = r0 + g < nq, live1 = r0 + g + 8 < nq;
	const int wlast = min(r0 + 16, nq) - 1;            // the warp's last real row (< 0: none)
	const int last = pos0 + t0 + nq - 1;                // the block's last query position
	float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
	float o[PA_HD / 8][4];
#pragma unroll
	for (int n = 0; n < PA_HD / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
	// ldmatrix addresses: A rows (lane % 16) at column 8 (lane / 16); B rows
	// 8 ((lane / 16) & 1) + lane % 8 at column 8 ((lane / 8) & 1) of an n8
	// pair (tc_chunk's).
	const tc_saddr a_hi = tc_shared_addr(qh + (r0 + (lane & 15)) * PAT_LDQ + 8 * (lane >> 4));
	const tc_saddr a_lo = tc_shared_addr(ql + (r0 + (lane & 15)) * PAT_LDQ + 8 * (lane >> 4));
	const tc_saddr b_k = tc_shared_addr(ks + (8 * ((lane >> 4) & 1) + (lane & 7)) * PAT_LDQ + 8 * ((lane >> 3) & 1));
	const tc_saddr b_v = tc_shared_addr(vt + (8 * ((lane >> 4) & 1) + (lane & 7)) * PAT_LDV + 8 * ((lane >> 3) & 1));

	for (int p0 = 0; p0 <= last; p0 += PAT_BN) {
		__syncthreads();  // the queries are staged; the previous tile is read
		for (int idx = tid; idx < PAT_BN * hd8; idx += blockDim.x) {
			const int p = idx / hd8, c = idx - p * hd8;
			uint4 kk = make_uint4(0u, 0u, 0u, 0u), vv = kk;
			if (p0 + p <= last) {
				const size_t at = (size_t)(p0 + p) * kv_dim + off + 8 * c;
				kk = *reinterpret_cast<const uint4*>(kc + at);
				vv = *reinterpret_cast<const uint4*>(vc + at);
			}
			*reinterpret_cast<uint4*>(ks + p * PAT_LDQ + 8 * c) = kk;
			const __half* v8 = reinterpret_cast<const __half*>(&vv);
#pragma unroll
			for (int j = 0; j < 8; j++) vt[(8 * c + j) * PAT_LDV + p] = v8[j];
		}
		__syncthreads();
		if (wlast < 0 || p0 > pos0 + t0 + wlast) continue;  // no row of this warp attends here (warp-uniform)

		// Scores: S[n] is rows (g, g + 8) x positions p0 + 8n + 2qd (+1).
		float s[PAT_BN / 8][4];
#pragma unroll
		for (int n = 0; n < PAT_BN / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
		for (int k = 0; k < PA_HD / 16; k++) {
			if (k >= kst) break;  // uniform
			unsigned ah[4], al[4];
			ldmatrix_x4(ah, a_hi + 32 * k);
			ldmatrix_x4(al, a_lo + 32 * k);
#pragma unroll
			for (int n = 0; n < PAT_BN / 8; n += 2) {
				unsigned b4[4];
				ldmatrix_x4(b4, b_k + (8 * n * PAT_LDQ + 16 * k) * 2);
				pat_mma2(s[n], s[n + 1], ah, al, b4);
			}
		}
		// The online softmax of rows g (elements 0, 1) and g + 8 (2, 3).
		float mx[2] = {m[0], m[1]};
#pragma unroll
		for (int n = 0; n < PAT_BN / 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int p = p0 + 8 * n + 2 * qd + (e & 1), hi = e >> 1;
				const bool ok = hi ? live1 && p <= qp1 : live0 && p <= qp0;
				s[n][e] = ok ? __fmul_rn(s[n][e], scale) : -INFINITY;
				mx[hi] = fmaxf(mx[hi], s[n][e]);
			}
		float a[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
		for (int hi = 0; hi < 2; hi++) {
			mx[hi] = fmaxf(mx[hi], __shfl_xor_sync(FULL_MASK, mx[hi], 1));
			mx[hi] = fmaxf(mx[hi], __shfl_xor_sync(FULL_MASK, mx[hi], 2));
			a[hi] = mx[hi] == -INFINITY ? 1.0f : expf(__fsub_rn(m[hi], mx[hi]));  // exp(-inf) = 0 for the first tile
		}
#pragma unroll
		for (int n = 0; n < PAT_BN / 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int hi = e >> 1;
				s[n][e] = s[n][e] == -INFINITY ? 0.0f : expf(__fsub_rn(s[n][e], mx[hi]));
				rs[hi] = __fadd_rn(rs[hi], s[n][e]);
			}
#pragma unroll
		for (int hi = 0; hi < 2; hi++) {
			rs[hi] = __fadd_rn(rs[hi], __shfl_xor_sync(FULL_MASK, rs[hi], 1));
			rs[hi] = __fadd_rn(rs[hi], __shfl_xor_sync(FULL_MASK, rs[hi], 2));
			l[hi] = __fadd_rn(__fmul_rn(l[hi], a[hi]), rs[hi]);
			m[hi] = mx[hi];
		}
#pragma unroll
		for (int n = 0; n < PA_HD / 8; n++) {
			o[n][0] = __fmul_rn(o[n][0], a[0]), o[n][1] = __fmul_rn(o[n][1], a[0]);
			o[n][2] = __fmul_rn(o[n][2], a[1]), o[n][3] = __fmul_rn(o[n][3], a[1]);
		}
		// Values: the probabilities of positions 16k.. as an m16 x k16 A
		// fragment (score tiles 2k and 2k + 1), hi and lo halves, against
		// V^T's n8 tiles of dims.
#pragma unroll
		for (int k = 0; k < PAT_BN / 16; k++) {
			if (p0 + 16 * k > pos0 + t0 + wlast) break;  // no row of the warp attends to these positions (uniform)
			unsigned ph[4], pl[4];
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const float* sv = s[2 * k + (j >> 1)] + 2 * (j & 1);  // a0: (g, 2qd) of tile 2k, a1: g + 8, a2, a3: tile 2k + 1
				const __half x0 = __float2half_rn(sv[0]), x1 = __float2half_rn(sv[1]);
				ph[j] = tc_pack(x0, x1);
				pl[j] = tc_pack(__float2half_rn(__fsub_rn(sv[0], __half2float(x0))), __float2half_rn(__fsub_rn(sv[1], __half2float(x1))));
			}
#pragma unroll
			for (int n = 0; n < PA_HD / 8; n += 2) {
				if (n >= 2 * (hd >> 4)) break;  // uniform: hd / 8 n8 tiles of dims
				unsigned b4[4];
				ldmatrix_x4(b4, b_v + (8 * n * PAT_LDV + 16 * k) * 2);
				pat_mma2(o[n], o[n + 1], ph, pl, b4);
			}
		}
	}
	// acc / l into the rows' dims 8n + 2qd (+1).
#pragma unroll
	for (int hi = 0; hi < 2; hi++) {
		const int i = r0 + g + 8 * hi;
		if (i >= nq) continue;
		float* out = dst + (size_t)(t0 + i) * qdim + (size_t)h * hd;
#pragma unroll
		for (int n = 0; n < PA_HD / 8; n++) {
			if (n >= hd8) break;
			*reinterpret_cast<float2*>(out + 8 * n + 2 * qd) =
			    make_float2(__fdiv_rn(o[n][2 * hi], l[hi]), __fdiv_rn(o[n][2 * hi + 1], l[hi]));
		}
	}
}
