// matvec_f16.cu: y[R] = W[R, C] · x[C] (+ bias[R]), W FP16 row-major, x and y
// FP32, FP32 accumulation. Used for every non-routed projection (attention,
// router, shared expert, lm_head) and for fp16 expert records.
//
// Launch: blocks of 256 threads (8 warps); each warp computes NR consecutive
// rows at a time (f16_rows in common.cuh: 16-byte coalesced loads, lane l
// takes chunks l, l+32, ..., butterfly reduction), blocks stride over the
// rows. x is staged once per block in shared memory (variant _s, dynamic
// shared size xs_floats(C)*4 bytes) or read through L1 when C is too wide
// for that (variant _g). The row's result does not depend on NR, U or the
// variant.
#include "common.cuh"

// bias_kind: 0 none, 1 FP16, 2 FP32.
__device__ __forceinline__ float bias_at(const void* bias, int kind, int r) {
	if (kind == 1) return __half2float(reinterpret_cast<const __half*>(bias)[r]);
	return reinterpret_cast<const float*>(bias)[r];
}

template <int NR, int U, bool SHARED>
__device__ __forceinline__ void matvec_f16_body(float* __restrict__ y, const __half* __restrict__ W,
                                                const float* __restrict__ x, const void* __restrict__ bias,
                                                int bias_kind, int rows, int cols) {
	extern __shared__ __align__(16) float xs_smem[];
	if (SHARED) {
		stage_x(xs_smem, x, cols);
		__syncthreads();
	}
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	for (int r0 = (blockIdx.x * nw + warp) * NR; r0 < rows; r0 += gridDim.x * nw * NR) {
		const __half* rp[NR];
		float out[NR];
#pragma unroll
		for (int i = 0; i < NR; i++) rp[i] = W + (size_t)min(r0 + i, rows - 1) * cols;
		if (SHARED) {
			XShared xsrc[NR];
#pragma unroll
			for (int i = 0; i < NR; i++) xsrc[i].p = xs_smem;
			f16_rows<NR, U, NR>(rp, xsrc, cols, out);
		} else {
			XGlobal xsrc[NR];
#pragma unroll
			for (int i = 0; i < NR; i++) xsrc[i].p = x;
			f16_rows<NR, U, NR>(rp, xsrc, cols, out);
		}
		if ((threadIdx.x & 31) == 0) {
#pragma unroll
			for (int i = 0; i < NR; i++) {
				if (r0 + i < rows) {
					float v = out[i];
					if (bias_kind != 0) v = __fadd_rn(v, bias_at(bias, bias_kind, r0 + i));
					y[r0 + i] = v;
				}
			}
		}
	}
}

#define MATVEC_F16(NAME, NR, U, SHARED)                                                                  \
	extern "C" __global__ void __launch_bounds__(256) NAME(float* y, const __half* W, const float* x,   \
	                                                       const void* bias, int bias_kind, int rows,     \
	                                                       int cols) {                                     \
		matvec_f16_body<NR, U, SHARED>(y, W, x, bias, bias_kind, rows, cols);                           \
	}

MATVEC_F16(matvec_f16_r1_s, 1, 4, true)
MATVEC_F16(matvec_f16_r2_s, 2, 2, true)
MATVEC_F16(matvec_f16_r4_s, 4, 2, true)
MATVEC_F16(matvec_f16_r1_g, 1, 4, false)
MATVEC_F16(matvec_f16_r2_g, 2, 2, false)
MATVEC_F16(matvec_f16_r4_g, 4, 2, false)
