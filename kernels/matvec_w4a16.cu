// matvec_w4a16.cu: y[R] = M · x[C] for a qpack-int4-b256-v1 matrix M (an
// expert's gate, up or down projection) read packed, never expanded; x and y
// FP32 (W4A16 in name, A32 in fact: the activations stay FP32 so the CUDA
// backend matches the CPU reference to FP32 rounding).
//
// Launch: blocks of 256 threads (8 warps); each warp computes NR rows at a
// time with int4_rows (common.cuh), the same per-row reduction the grouped
// expert kernels use, so scalar-v1 on the GPU gives the same bits as
// grouped-v1 and fused-topk-v1. x is staged in shared memory, scaled, with
// its chunk sums (_s: xs4_floats(C)*4 bytes of dynamic shared memory) or
// read through L1 (_g, only when C % 32 == 0).
#include "common.cuh"

template <int NR, int U, bool SHARED>
__device__ __forceinline__ void matvec_w4a16_body(float* __restrict__ y, const uint8_t* __restrict__ mat,
                                                  const float* __restrict__ x, int rows, int cols,
                                                  int cols_padded, int scales_offset) {
	extern __shared__ __align__(16) float xs_smem[];
	X4Shared staged;
	if (SHARED) {
		staged = stage_x4(xs_smem, x, cols);
		__syncthreads();
	}
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	for (int r0 = (blockIdx.x * nw + warp) * NR; r0 < rows; r0 += gridDim.x * nw * NR) {
		Int4Row rw[NR];
		float out[NR];
#pragma unroll
		for (int i = 0; i < NR; i++) rw[i] = int4_row(mat, min(r0 + i, rows - 1), cols_padded, scales_offset);
		if (SHARED) {
			X4Shared xsrc[NR];
#pragma unroll
			for (int i = 0; i < NR; i++) xsrc[i] = staged;
			int4_rows<NR, U, NR>(rw, xsrc, cols, out);
		} else {
			X4Global xsrc[NR];
#pragma unroll
			for (int i = 0; i < NR; i++) xsrc[i].x = x;
			int4_rows<NR, U, NR>(rw, xsrc, cols, out);
		}
		if ((threadIdx.x & 31) == 0) {
#pragma unroll
			for (int i = 0; i < NR; i++)
				if (r0 + i < rows) y[r0 + i] = out[i];
		}
	}
}

#define MATVEC_W4(NAME, NR, U, SHARED)                                                                      \
	extern "C" __global__ void __launch_bounds__(256) NAME(float* y, const uint8_t* mat, const float* x,   \
	                                                       int rows, int cols, int cols_padded,             \
	                                                       int scales_offset) {                             \
		matvec_w4a16_body<NR, U, SHARED>(y, mat, x, rows, cols, cols_padded, scales_offset);              \
	}

MATVEC_W4(matvec_w4a16_r1_s, 1, 2, true)
MATVEC_W4(matvec_w4a16_r2_s, 2, 2, true)
MATVEC_W4(matvec_w4a16_r4_s, 4, 2, true)
MATVEC_W4(matvec_w4a16_r1_g, 1, 2, false)
MATVEC_W4(matvec_w4a16_r2_g, 2, 2, false)
MATVEC_W4(matvec_w4a16_r4_g, 4, 2, false)
