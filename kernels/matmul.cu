// matmul.cu: the batched row kernels of prefill (backend.Batched):
//
//	y[yrow(t)][r] = M[r] · x[xrow(t)] (+ bias[r])   for t < T, r < rows
//
// M is an FP16 matrix (matmul_f16_*: the projections; fp16 expert records)
// or a qpack-int4-b256-v1 expert matrix (matmul_w4a16_*); xrow and yrow are
// index arrays (gather, scatter: ExpertMatMul) or the identity (null:
// MatMul). Every (row, token) result is the per-token row kernel's bits
// (matvec_f16 / matvec_w4a16): the same staging of x (stage_values, and for
// int4 the chunk sums), the same per-lane chunk order through Fmt::accum
// and the same warp_sum, so a prompt prefilled in batches gives the logits
// of one prefilled token at a time.
//
// Launch: blocks of 256 threads (8 warps). A block owns TB tokens (a token
// group, staged once in shared memory: TB x FmtInfo<Fmt>::stride(cols)
// floats) and 8 x tpw consecutive row tasks of NR rows (a warp takes tpw
// of them in turn); block b is (row tile b / G, token group b % G) with G =
// ceil(T / TB), so the blocks that run together read the same weight tile
// and all but the first find it in L2. Per task a warp reads its NR rows
// once per token group, in segments of CPL 16-byte chunks per lane (the
// next segment's loads issued before the current one's arithmetic), and
// accumulates each segment into the TB tokens' accumulators.
#include "common.cuh"

extern __shared__ __align__(16) float xs_smem[];

template <class Fmt, int NR, int CPL, int TB>
__device__ __forceinline__ void matmul_body(float* __restrict__ y, const uint8_t* __restrict__ mat,
                                            const float* __restrict__ x, const void* __restrict__ bias, int bias_kind,
                                            int rows, int cols, int cols_padded, int scales_offset, int T,
                                            const int* __restrict__ xrows, const int* __restrict__ yrows, int tpw) {
	constexpr bool INT4 = FmtInfo<Fmt>::int4;
	typedef typename Fmt::Row Row;
	typedef typename Fmt::template Frag<NR, CPL> Frag;
	typedef typename Fmt::Acc Acc;
	typedef typename XSource<Fmt, true>::T XS;
	const int G = (T + TB - 1) / TB;
	const int g = blockIdx.x % G, tile = blockIdx.x / G;
	const int t0 = g * TB, nt = min(TB, T - t0);
	const int stride = FmtInfo<Fmt>::stride(cols);
	// Stage the group's tokens as stage_block stages one vector.
	for (int u = 0; u < nt; u++) {
		const int xr = xrows != nullptr ? xrows[t0 + u] : t0 + u;
		stage_values<INT4>(xs_smem + (size_t)u * stride, stride, x + (size_t)xr * cols, 1, cols);
	}
	if (INT4) {
		__syncthreads();
		stage_sums(xs_smem, stride, nt, cols);
	}
	__syncthreads();
	XS xs[TB];
#pragma unroll
	for (int u = 0; u < TB; u++) xs[u] = XSource<Fmt, true>::make(nullptr, xs_smem + (size_t)u * stride, cols);
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int ntasks = (rows + NR - 1) / NR;
	const int nch = Fmt::nchunks(cols);
	constexpr int SPAN = 32 * CPL;
	const int nseg = max(1, (nch + SPAN - 1) / SPAN);
	for (int k = 0; k < tpw; k++) {
		const int task = (tile * nw + warp) * tpw + k;
		if (task >= ntasks) break;
		auto row_of = [&](int i) { return Fmt::row(mat, min(task * NR + i, rows - 1), cols, cols_padded, scales_offset); };
		float out[TB][NR];
		if (!Fmt::chunked(cols)) {
			Row rw[NR];
#pragma unroll
			for (int i = 0; i < NR; i++) rw[i] = row_of(i);
#pragma unroll
			for (int u = 0; u < TB; u++)
				if (u < nt) Fmt::template narrow<NR>(rw, xs[u], cols, out[u]);
		} else {
			Acc acc[TB][NR];
#pragma unroll
			for (int u = 0; u < TB; u++)
#pragma unroll
				for (int i = 0; i < NR; i++) Fmt::zero(acc[u][i]);
			Frag cur, nxt;
			Fmt::load(cur, row_of, 0, nch);
			for (int s = 0; s < nseg; s++) {
				if (s + 1 < nseg) Fmt::load(nxt, row_of, (s + 1) * SPAN, nch);
#pragma unroll
				for (int u = 0; u < TB; u++)
					if (u < nt) Fmt::accum(acc[u], cur, xs[u], s * SPAN, nch);
				cur = nxt;
			}
#pragma unroll
			for (int u = 0; u < TB; u++)
#pragma unroll
				for (int i = 0; i < NR; i++) out[u][i] = Fmt::finish(acc[u][i]);
		}
		if (lane != 0) continue;
#pragma unroll
		for (int u = 0; u < TB; u++) {
			if (u >= nt) break;
			float* yr = y + (size_t)(yrows != nullptr ? yrows[t0 + u] : t0 + u) * rows;
#pragma unroll
			for (int i = 0; i < NR; i++) {
				const int r = task * NR + i;
				if (r < rows) {
					float v = out[u][i];
					if (bias_kind != 0) v = __fadd_rn(v, bias_at(bias, bias_kind, r));
					yr[r] = v;
				}
			}
		}
	}
}

#define MATMUL(NAME, FMT, NR, CPL, TB)                                                                          \
	extern "C" __global__ void __launch_bounds__(256, 2)                                                           \
	    NAME(float* y, const uint8_t* mat, const float* x, const void* bias, int bias_kind, int rows, int cols,     \
	         int cols_padded, int scales_offset, int T, const int* xrows, const int* yrows, int tpw) {              \
		matmul_body<FMT, NR, CPL, TB>(y, mat, x, bias, bias_kind, rows, cols, cols_padded, scales_offset, T, xrows, \
		                              yrows, tpw);                                                             \
	}

// _b8: 8 tokens a group, _b4: 4 (when 8 staged vectors do not fit shared
// memory). 2 rows x 2 chunks per lane per step (64 bytes a lane), at most
// 128 registers: two blocks (16 warps) an SM where shared memory holds them.
MATMUL(matmul_f16_b8, F16Fmt, 2, 2, 8)
MATMUL(matmul_f16_b4, F16Fmt, 2, 2, 4)
MATMUL(matmul_w4a16_b8, Int4Fmt, 2, 2, 8)
MATMUL(matmul_w4a16_b4, Int4Fmt, 2, 2, 4)
