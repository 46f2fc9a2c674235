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
