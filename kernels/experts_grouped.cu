// experts_grouped.cu: the routed experts of one token in two launches,
// addressing the A experts through a row table passed by value as a kernel
// parameter (GroupTable: recs[k] = device address of the row holding expert
// k of the routed group, wts[k] = its routing weight), so a grouped op is one
// launch and nothing else on the stream. grouped-v1 issues both kernels;
// fused-topk-v1 issues both back to back.
//
//	experts_gateup_*: act[k*F + i] = silu(G_k[i]·x) * (U_k[i]·x)   for k < A, i < F
//	experts_down_*:   out[d] = sum over k = 0..A-1 in order of wts[k] * (D_k[d]·act_k)
//
// Every dot product is row_pipeline with Int4Fmt / F16Fmt from common.cuh,
// the reduction ExpertMatVec uses; the activation is silu_mul (SiLUMul's
// function) and the combine is add_scaled starting from 0 (AddScaled's
// function on a zeroed output), in k order. So for the same inputs the
// scalar sequence, grouped-v1 and fused-topk-v1 give bit-identical outputs.
//
// Launch shapes (blocks of 256 threads, 8 warps):
//   gate/up: a warp task is (expert k, rows i..i+NRP-1): NRP gate rows and
//            the same NRP up rows against x, staged once per block in shared
//            memory. Tasks are A*ceil(F/NRP); blocks stride over them.
//   down:    a block owns a tile of R output rows (R % NR == 0) and computes
//            all A experts for it: a warp task (item) is (expert k, NR rows of
//            the tile) against act_k, items k-major over the tile's R/NR row
//            groups, warps striding over them. Each dot goes to shared memory
//            p[k][r]; after a block barrier, thread r combines
//            out[d0+r] = add_scaled(...add_scaled(0, w_0, p[0][r])..., w_{A-1}, p[A-1][r]).
//            So experts and rows are both spread over warps (A*D/NR items in
//            all) while the combine keeps its fixed k order. All A activation
//            vectors are staged in shared memory (A * stride floats), then
//            p (A*R floats). Grid = ceil(D/R) blocks, one tile each.
#include "common.cuh"

extern __shared__ __align__(16) float xs_smem[];

// GroupTable is the row table; its layout is encodeTable's in
// runtime/cuda/experts.go. maxGroup there is 64.
struct GroupTable {
	unsigned long long recs[64];
	float wts[64];
};

template <class Fmt, int NRP, bool SHARED>
struct GateUpTasks {
	typedef typename XSource<Fmt, SHARED>::T XS;
	static constexpr int NR = 2 * NRP;
	const GroupTable* tbl;
	float* act;
	XS x;
	int A, F, D, gate_off, up_off, cols_padded, scales_offset, per, k0;

	__device__ __forceinline__ int count() const { return A * per; }
	// rows 0..NRP-1: gate rows i0.., rows NRP..: the same up rows.
	__device__ __forceinline__ typename Fmt::Row row(int t, int i) const {
		const int k = t / per, i0 = (t - k * per) * NRP;
		const int j = i < NRP ? i : i - NRP;
		const uint8_t* rec = reinterpret_cast<const uint8_t*>(tbl->recs[k0 + k]);
		return Fmt::row(rec + (i < NRP ? gate_off : up_off), min(i0 + j, F - 1), D, cols_padded, scales_offset);
	}
	__device__ __forceinline__ XS xs(int) const { return x; }
	__device__ __forceinline__ void emit(int t, const float (&out)[NR]) const {
		if ((threadIdx.x & 31) != 0) return;
		const int k = t / per, i0 = (t - k * per) * NRP;
#pragma unroll
		for (int j = 0; j < NRP; j++)
			if (i0 + j < F) act[(size_t)k * F + i0 + j] = silu_mul(out[j], out[NRP + j]);
	}
};

template <class Fmt, int NRP, int CPL, bool SHARED>
__device__ __forceinline__ void gateup_body(float* __restrict__ act, const float* __restrict__ x, int A, int F, int D,
                                            int gate_off, int up_off, int cols_padded, int scales_offset,
                                            const GroupTable& tbl, int k0, NormSpec nm) {
	GateUpTasks<Fmt, NRP, SHARED> tk;
	tk.tbl = &tbl, tk.k0 = k0, tk.act = act, tk.A = A, tk.F = F, tk.D = D, tk.gate_off = gate_off, tk.up_off = up_off;
	tk.cols_padded = cols_padded, tk.scales_offset = scales_offset, tk.per = (F + NRP - 1) / NRP;
	tk.x = XSource<Fmt, SHARED>::make(x, xs_smem, D);
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	row_pipeline<Fmt, 2 * NRP, CPL>(tk, blockIdx.x * nw + warp, gridDim.x * nw, D, [&] {
		if (SHARED) stage_one<FmtInfo<Fmt>::int4>(xs_smem, x, D, nm);
	});
}

template <class Fmt, int NR, bool SHARED>
struct DownTasks {
	typedef typename XSource<Fmt, SHARED>::T XS;
	const GroupTable* tbl;
	const float* act;  // global act[A][F]
	float* p;          // shared p[A][R]
	int A, D, F, down_off, cols_padded, scales_offset, R, G, d0, stride, k0;

	__device__ __forceinline__ int count() const { return A * G; }
	__device__ __forceinline__ typename Fmt::Row row(int j, int i) const {
		const int k = j / G, rg = j - k * G;
		const uint8_t* rec = reinterpret_cast<const uint8_t*>(tbl->recs[k0 + k]) + down_off;
		return Fmt::row(rec, min(d0 + rg * NR + i, D - 1), F, cols_padded, scales_offset);
	}
	__device__ __forceinline__ XS xs(int j) const {
		const int k = j / G;
		return XSource<Fmt, SHARED>::make(act + (size_t)k * F, xs_smem + (size_t)k * stride, F);
	}
	__device__ __forceinline__ void emit(int j, const float (&out)[NR]) const {
		if ((threadIdx.x & 31) != 0) return;
		const int k = j / G, rg = j - k * G;
#pragma unroll
		for (int i = 0; i < NR; i++) p[k * R + rg * NR + i] = out[i];
	}
};

template <class Fmt, int NR, int CPL, bool SHARED>
__device__ __forceinline__ void down_body(float* __restrict__ out, const float* __restrict__ act, int A, int D, int F,
                                          int down_off, int cols_padded, int scales_offset, int R,
                                          const GroupTable& tbl, int k0, const float* __restrict__ resid,
                                          int accumulate) {
	DownTasks<Fmt, NR, SHARED> tk;
	tk.tbl = &tbl, tk.k0 = k0, tk.act = act, tk.A = A, tk.D = D, tk.F = F, tk.down_off = down_off;
	tk.cols_padded = cols_padded, tk.scales_offset = scales_offset, tk.R = R, tk.G = R / NR;
	tk.d0 = blockIdx.x * R;
	tk.stride = SHARED ? FmtInfo<Fmt>::stride(F) : 0;
	tk.p = xs_smem + (size_t)A * tk.stride;
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	row_pipeline<Fmt, NR, CPL>(tk, warp, nw, F, [&] {
		if (SHARED) stage_block<FmtInfo<Fmt>::int4>(xs_smem, act, A, F);
	});
	__syncthreads();
	for (int r = threadIdx.x; r < R; r += blockDim.x) {
		const int d = tk.d0 + r;
		if (d < D) {
			float acc = accumulate ? out[d] : 0.0f;
			for (int k = 0; k < A; k++) acc = add_scaled(acc, tbl.wts[k0 + k], tk.p[k * R + r]);
			out[d] = resid != nullptr ? __fadd_rn(resid[d], acc) : acc;
		}
	}
}

#define GATEUP(NAME, FMT, NRP, CPL, SHARED, MINB)                                                              \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                           \
	    NAME(float* act, const float* x, int A, int F, int D, int gate_off, int up_off, int cols_padded,        \
	         int scales_offset, const __grid_constant__ GroupTable tbl) {                                        \
		gateup_body<FMT, NRP, CPL, SHARED>(act, x, A, F, D, gate_off, up_off, cols_padded, scales_offset, tbl, \
		                                   0, NormSpec{nullptr, 0, 0.0f});                                     \
	}                                                                                                         \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                           \
	    NAME##_t(float* act, const float* x, int A, int F, int D, int gate_off, int up_off, int cols_padded,    \
	             int scales_offset, const GroupTable* tbl, int k0, const void* nw, int nw_kind, float eps) {  \
		gateup_body<FMT, NRP, CPL, SHARED>(act, x, A, F, D, gate_off, up_off, cols_padded, scales_offset, *tbl, \
		                                   k0, NormSpec{nw, nw_kind, eps});                                    \
	}
#define DOWN(NAME, FMT, NR, CPL, SHARED, MINB)                                                             \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
	    NAME(float* out, const float* act, int A, int D, int F, int down_off, int cols_padded,              \
	         int scales_offset, int tile_rows, const __grid_constant__ GroupTable tbl) {                     \
		down_body<FMT, NR, CPL, SHARED>(out, act, A, D, F, down_off, cols_padded, scales_offset, tile_rows, \
		                                tbl, 0, nullptr, 0);                                                \
	}                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
	    NAME##_t(float* out, const float* act, int A, int D, int F, int down_off, int cols_padded,          \
	             int scales_offset, int tile_rows, const GroupTable* tbl, int k0, const float* resid,     \
	             int accumulate) {                                                                        \
		down_body<FMT, NR, CPL, SHARED>(out, act, A, D, F, down_off, cols_padded, scales_offset, tile_rows, \
		                                *tbl, k0, resid, accumulate);                                       \
	}

// gate/up: _p2 = 2 gate + 2 up rows x 2 chunks per lane, _p4 = 4 + 4 rows x
// 1 chunk (both 4 KB per warp-step). MINB 2 caps registers at 128 (16 warps
// per SM); int4 _p4 and the int4 down kernels need more and run 8 warps per SM
// (the down kernel's tiles are sized so the grid is one wave).
GATEUP(experts_gateup_int4_p2_s, Int4Fmt, 2, 2, true, 2)
GATEUP(experts_gateup_int4_p2_g, Int4Fmt, 2, 2, false, 2)
GATEUP(experts_gateup_int4_p4_s, Int4Fmt, 4, 1, true, 1)
GATEUP(experts_gateup_int4_p4_g, Int4Fmt, 4, 1, false, 1)
GATEUP(experts_gateup_f16_p2_s, F16Fmt, 2, 2, true, 2)
GATEUP(experts_gateup_f16_p2_g, F16Fmt, 2, 2, false, 2)
GATEUP(experts_gateup_f16_p4_s, F16Fmt, 4, 1, true, 1)
GATEUP(experts_gateup_f16_p4_g, F16Fmt, 4, 1, false, 1)
// down: _r4 = 4 rows x 2 chunks per lane, _r8 = 8 rows x 1 chunk (4 KB per
// warp-step, one block per SM for int4), _r4c1 = 4 rows x 1 chunk (2 KB per
// warp-step, registers capped for two blocks per SM).
DOWN(experts_down_int4_r4_s, Int4Fmt, 4, 2, true, 1)
DOWN(experts_down_int4_r4_g, Int4Fmt, 4, 2, false, 1)
DOWN(experts_down_int4_r8_s, Int4Fmt, 8, 1, true, 1)
DOWN(experts_down_int4_r8_g, Int4Fmt, 8, 1, false, 1)
DOWN(experts_down_int4_r4c1_s, Int4Fmt, 4, 1, true, 2)
DOWN(experts_down_int4_r4c1_g, Int4Fmt, 4, 1, false, 2)
DOWN(experts_down_f16_r4_s, F16Fmt, 4, 2, true, 2)
DOWN(experts_down_f16_r4_g, F16Fmt, 4, 2, false, 2)
DOWN(experts_down_f16_r8_s, F16Fmt, 8, 1, true, 2)
DOWN(experts_down_f16_r8_g, F16Fmt, 8, 1, false, 2)
DOWN(experts_down_f16_r4c1_s, F16Fmt, 4, 1, true, 2)
DOWN(experts_down_f16_r4c1_g, F16Fmt, 4, 1, false, 2)
