// experts.cuh: the bodies of the grouped expert kernels (experts_grouped.cu
// has the launch shapes and the arithmetic's description), shared with the
// persistent decode kernel (persistent.cu). A body runs as block vg.bid of
// vg.nblk and reads its activations from dynamic shared memory xs_smem.
#pragma once

#include "common.cuh"

extern __shared__ __align__(16) float xs_smem[];

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
                                            const GroupTable& tbl, int k0, NormSpec nm, VGrid vg,
                                            const NormPre* pre = nullptr) {
	GateUpTasks<Fmt, NRP, SHARED> tk;
	tk.tbl = &tbl, tk.k0 = k0, tk.act = act, tk.A = A, tk.F = F, tk.D = D, tk.gate_off = gate_off, tk.up_off = up_off;
	tk.cols_padded = cols_padded, tk.scales_offset = scales_offset, tk.per = (F + NRP - 1) / NRP;
	tk.x = XSource<Fmt, SHARED>::make(x, xs_smem, D);
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	row_pipeline<Fmt, 2 * NRP, CPL>(tk, vg.bid * nw + warp, vg.nblk * nw, D, [&] {
		if (SHARED) stage_one<FmtInfo<Fmt>::int4>(xs_smem, x, D, nm, pre);
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
                                          int accumulate, VGrid vg, bool enter = false) {
	DownTasks<Fmt, NR, SHARED> tk;
	tk.tbl = &tbl, tk.k0 = k0, tk.act = act, tk.A = A, tk.D = D, tk.F = F, tk.down_off = down_off;
	tk.cols_padded = cols_padded, tk.scales_offset = scales_offset, tk.R = R, tk.G = R / NR;
	tk.d0 = vg.bid * R;
	tk.stride = SHARED ? FmtInfo<Fmt>::stride(F) : 0;
	tk.p = xs_smem + (size_t)A * tk.stride;
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	row_pipeline<Fmt, NR, CPL>(tk, warp, nw, F, [&] {
		if (enter) grid_dep_enter();  // the first weight loads (rows found through tbl) are in flight
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

