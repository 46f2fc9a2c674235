// experts_grouped.cu: the routed experts of one token in two launches,
// addressing the A experts through a device-side table of record addresses
// (recs[k] = device address of the row holding expert k of the routed group,
// wts[k] = its routing weight). grouped-v1 issues both kernels;
// fused-topk-v1 issues both from one table upload.
//
//	experts_gateup_*: act[k*F + i] = silu(G_k[i]·x) * (U_k[i]·x)   for k < A, i < F
//	experts_down_*:   out[d] = sum over k = 0..A-1 in order of wts[k] * (D_k[d]·act_k)
//
// Every dot product is int4_rows / f16_rows from common.cuh, the reduction
// ExpertMatVec uses; the activation is silu_mul (SiLUMul's function) and the
// combine is add_scaled starting from 0 (AddScaled's function on a zeroed
// output). So for the same inputs the scalar sequence, grouped-v1 and
// fused-topk-v1 give bit-identical outputs.
//
// Launch shapes (blocks of 256 threads, 8 warps):
//   gate/up: a warp task is (expert k, rows i, i+1): four rows (two gate, two
//            up) against the same x, staged once per block in shared memory.
//            Tasks are A*ceil(F/2); blocks stride over them.
//   down:    a warp task is two output rows d, d+1 over all A experts,
//            loaded in passes of 8/4/2/1 experts (up to 16 rows in flight
//            per lane); the two rows of one expert share that expert's
//            activation loads. All A activation vectors are staged in shared
//            memory (A * xs4_floats(F) floats for int4). Tasks are
//            ceil(D/2); blocks stride over them.
#include "common.cuh"

extern __shared__ __align__(16) float xs_smem[];

// Activation sources per scheme and variant.
template <bool INT4, bool SHARED>
struct XSrc;
template <>
struct XSrc<true, true> {
	typedef X4Shared T;
};
template <>
struct XSrc<true, false> {
	typedef X4Global T;
};
template <>
struct XSrc<false, true> {
	typedef XShared T;
};
template <>
struct XSrc<false, false> {
	typedef XGlobal T;
};

// stride of one staged activation vector of n values, in floats.
template <bool INT4>
__device__ __forceinline__ int xs_stride(int n) {
	return INT4 ? xs4_floats(n) : xs_floats(n);
}

// source returns the activation source of the vector at base (global,
// unstaged) or staged at smem_base.
template <bool INT4, bool SHARED>
__device__ __forceinline__ typename XSrc<INT4, SHARED>::T source(const float* base, const float* smem_base, int n);
template <>
__device__ __forceinline__ X4Shared source<true, true>(const float*, const float* smem_base, int n) {
	X4Shared s;
	s.x = smem_base;
	s.sums = smem_base + xs_floats(n);
	return s;
}
template <>
__device__ __forceinline__ X4Global source<true, false>(const float* base, const float*, int) {
	X4Global s;
	s.x = base;
	return s;
}
template <>
__device__ __forceinline__ XShared source<false, true>(const float*, const float* smem_base, int) {
	XShared s;
	s.p = smem_base;
	return s;
}
template <>
__device__ __forceinline__ XGlobal source<false, false>(const float* base, const float*, int) {
	XGlobal s;
	s.p = base;
	return s;
}

// stage copies activation vector x[0..n) to smem in the scheme's layout.
template <bool INT4>
__device__ __forceinline__ void stage(float* smem, const float* x, int n) {
	if (INT4)
		stage_x4(smem, x, n);
	else
		stage_x(smem, x, n);
}

template <bool INT4, int NR, int U, int XG, class XS>
__device__ __forceinline__ void rows_dot(const uint8_t* const (&mats)[NR], const int (&rs)[NR], int cols, int cols_padded,
                                         int scales_offset, const XS (&xs)[NR], float (&out)[NR]);

template <int NR, int U, int XG, class XS>
__device__ __forceinline__ void rows_dot_int4(const uint8_t* const (&mats)[NR], const int (&rs)[NR], int cols,
                                              int cols_padded, int scales_offset, const XS (&xs)[NR], float (&out)[NR]) {
	Int4Row rw[NR];
#pragma unroll
	for (int i = 0; i < NR; i++) rw[i] = int4_row(mats[i], rs[i], cols_padded, scales_offset);
	int4_rows<NR, U, XG>(rw, xs, cols, out);
}

template <int NR, int U, int XG, class XS>
__device__ __forceinline__ void rows_dot_f16(const uint8_t* const (&mats)[NR], const int (&rs)[NR], int cols,
                                             const XS (&xs)[NR], float (&out)[NR]) {
	const __half* rp[NR];
#pragma unroll
	for (int i = 0; i < NR; i++) rp[i] = reinterpret_cast<const __half*>(mats[i]) + (size_t)rs[i] * cols;
	f16_rows<NR, U, XG>(rp, xs, cols, out);
}

template <bool INT4, int NR, int U, int XG, class XS>
__device__ __forceinline__ void rows_dot(const uint8_t* const (&mats)[NR], const int (&rs)[NR], int cols, int cols_padded,
                                         int scales_offset, const XS (&xs)[NR], float (&out)[NR]) {
	if constexpr (INT4)
		rows_dot_int4<NR, U, XG>(mats, rs, cols, cols_padded, scales_offset, xs, out);
	else
		rows_dot_f16<NR, U, XG>(mats, rs, cols, xs, out);
}

template <bool INT4, bool SHARED>
__device__ __forceinline__ void gateup_body(float* __restrict__ act, const unsigned long long* __restrict__ recs,
                                            const float* __restrict__ x, int A, int F, int D, int gate_off,
                                            int up_off, int cols_padded, int scales_offset) {
	if (SHARED) {
		stage<INT4>(xs_smem, x, D);
		__syncthreads();
	}
	typedef typename XSrc<INT4, SHARED>::T XS;
	const XS src = source<INT4, SHARED>(x, xs_smem, D);
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	const int per = (F + 1) >> 1;  // tasks per expert
	for (int t = blockIdx.x * nw + warp; t < A * per; t += gridDim.x * nw) {
		const int k = t / per, i0 = (t - k * per) * 2;
		const int i1 = min(i0 + 1, F - 1);
		const uint8_t* rec = reinterpret_cast<const uint8_t*>(recs[k]);
		const uint8_t* mats[4] = {rec + gate_off, rec + gate_off, rec + up_off, rec + up_off};
		const int rs[4] = {i0, i1, i0, i1};
		const XS xsrc[4] = {src, src, src, src};
		float out[4];
		rows_dot<INT4, 4, 2, 4>(mats, rs, D, cols_padded, scales_offset, xsrc, out);
		if ((threadIdx.x & 31) == 0) {
			act[(size_t)k * F + i0] = silu_mul(out[0], out[2]);
			if (i0 + 1 < F) act[(size_t)k * F + i1] = silu_mul(out[1], out[3]);
		}
	}
}

// down_pass computes experts k0..k0+P-1 for rows d0 and d1 and combines
// them, in k order, into acc0 and acc1. Row order inside the pass is
// (k0,d0), (k0,d1), (k0+1,d0), ...: pairs share an expert's activations.
template <bool INT4, int P, bool SHARED>
__device__ __forceinline__ void down_pass(float& acc0, float& acc1, int k0, int d0, int d1,
                                          const unsigned long long* __restrict__ recs, const float* __restrict__ wts,
                                          const float* __restrict__ act, int F, int down_off, int cols_padded,
                                          int scales_offset) {
	typedef typename XSrc<INT4, SHARED>::T XS;
	const uint8_t* mats[2 * P];
	int rs[2 * P];
	XS xsrc[2 * P];
	float out[2 * P];
	const int stride = xs_stride<INT4>(F);
#pragma unroll
	for (int i = 0; i < P; i++) {
		const uint8_t* m = reinterpret_cast<const uint8_t*>(recs[k0 + i]) + down_off;
		mats[2 * i] = mats[2 * i + 1] = m;
		rs[2 * i] = d0;
		rs[2 * i + 1] = d1;
		xsrc[2 * i] = xsrc[2 * i + 1] =
		    source<INT4, SHARED>(act + (size_t)(k0 + i) * F, xs_smem + (size_t)(k0 + i) * stride, F);
	}
	rows_dot<INT4, 2 * P, 1, 2>(mats, rs, F, cols_padded, scales_offset, xsrc, out);
#pragma unroll
	for (int i = 0; i < P; i++) {
		const float w = wts[k0 + i];
		acc0 = add_scaled(acc0, w, out[2 * i]);
		acc1 = add_scaled(acc1, w, out[2 * i + 1]);
	}
}

template <bool INT4, bool SHARED>
__device__ __forceinline__ void down_body(float* __restrict__ out, const unsigned long long* __restrict__ recs,
                                          const float* __restrict__ wts, const float* __restrict__ act, int A, int D,
                                          int F, int down_off, int cols_padded, int scales_offset) {
	if (SHARED) {
		const int stride = xs_stride<INT4>(F);
		for (int k = 0; k < A; k++) stage<INT4>(xs_smem + (size_t)k * stride, act + (size_t)k * F, F);
		__syncthreads();
	}
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	for (int d0 = (blockIdx.x * nw + warp) * 2; d0 < D; d0 += gridDim.x * nw * 2) {
		const int d1 = min(d0 + 1, D - 1);
		float acc0 = 0.0f, acc1 = 0.0f;
		int k = 0;
		for (; k + 8 <= A; k += 8)
			down_pass<INT4, 8, SHARED>(acc0, acc1, k, d0, d1, recs, wts, act, F, down_off, cols_padded, scales_offset);
		if (k + 4 <= A) {
			down_pass<INT4, 4, SHARED>(acc0, acc1, k, d0, d1, recs, wts, act, F, down_off, cols_padded, scales_offset);
			k += 4;
		}
		if (k + 2 <= A) {
			down_pass<INT4, 2, SHARED>(acc0, acc1, k, d0, d1, recs, wts, act, F, down_off, cols_padded, scales_offset);
			k += 2;
		}
		if (k < A)
			down_pass<INT4, 1, SHARED>(acc0, acc1, k, d0, d1, recs, wts, act, F, down_off, cols_padded, scales_offset);
		if ((threadIdx.x & 31) == 0) {
			out[d0] = acc0;
			if (d0 + 1 < D) out[d1] = acc1;
		}
	}
}

#define GATEUP(NAME, INT4, SHARED)                                                                           \
	extern "C" __global__ void __launch_bounds__(256)                                                         \
	    NAME(float* act, const unsigned long long* recs, const float* x, int A, int F, int D, int gate_off,  \
	         int up_off, int cols_padded, int scales_offset) {                                               \
		gateup_body<INT4, SHARED>(act, recs, x, A, F, D, gate_off, up_off, cols_padded, scales_offset);     \
	}
#define DOWN(NAME, INT4, SHARED)                                                                              \
	extern "C" __global__ void __launch_bounds__(256)                                                         \
	    NAME(float* out, const unsigned long long* recs, const float* wts, const float* act, int A, int D,   \
	         int F, int down_off, int cols_padded, int scales_offset) {                                      \
		down_body<INT4, SHARED>(out, recs, wts, act, A, D, F, down_off, cols_padded, scales_offset);        \
	}

GATEUP(experts_gateup_int4_s, true, true)
GATEUP(experts_gateup_int4_g, true, false)
GATEUP(experts_gateup_f16_s, false, true)
GATEUP(experts_gateup_f16_g, false, false)
DOWN(experts_down_int4_s, true, true)
DOWN(experts_down_int4_g, true, false)
DOWN(experts_down_f16_s, false, true)
DOWN(experts_down_f16_g, false, false)
