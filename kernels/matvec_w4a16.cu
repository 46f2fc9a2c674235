// matvec_w4a16.cu: y[R] = M · x[C] for a qpack-int4-b256-v1 matrix M (an
// expert's gate, up or down projection) read packed, never expanded; x and y
// FP32 (W4A16 in name, A32 in fact: the activations stay FP32 so the CUDA
// backend matches the CPU reference to FP32 rounding).
//
// Launch: blocks of 256 threads (8 warps); a warp task is NR consecutive
// rows, warps stride over the tasks, and row_pipeline (common.cuh) computes
// them with Int4Fmt, the same per-row reduction the grouped expert kernels
// use, so scalar-v1 on the GPU gives the same bits as grouped-v1 and
// fused-topk-v1. A step loads NR rows x CPL 16-byte chunks per lane; the
// next step's loads are in flight while a step computes. x is staged in
// shared memory, scaled, with its chunk sums (_s: xs4_floats(C)*4 bytes of
// dynamic shared memory) or read through L1 (_g, only when C % 32 == 0).
#include "common.cuh"

extern __shared__ __align__(16) float xs_smem[];

#define MATVEC_W4(NAME, NR, CPL, SHARED, MINB)                                                               \
	extern "C" __global__ void __launch_bounds__(256, MINB) NAME(float* y, const uint8_t* mat, const float* x,    \
	                                                       int rows, int cols, int cols_padded,              \
	                                                       int scales_offset) {                              \
		matvec_body<Int4Fmt, NR, CPL, SHARED, true>(xs_smem, y, mat, x, nullptr, 0, rows, cols, cols_padded,     \
		                                      scales_offset, NormSpec{nullptr, 0, 0.0f},    \
		                                      launched_grid());                                            \
	}

// rN: N rows per task; 8 chunks (4 KB) per warp-step except r1, r2. MINB 2
// caps registers at 128 so two blocks (16 warps) fit an SM; r8 needs more
// and runs one block per SM.
MATVEC_W4(matvec_w4a16_r1_s, 1, 2, true, 2)
MATVEC_W4(matvec_w4a16_r2_s, 2, 2, true, 2)
MATVEC_W4(matvec_w4a16_r4_s, 4, 2, true, 2)
MATVEC_W4(matvec_w4a16_r8_s, 8, 1, true, 1)
MATVEC_W4(matvec_w4a16_r1_g, 1, 2, false, 2)
MATVEC_W4(matvec_w4a16_r2_g, 2, 2, false, 2)
MATVEC_W4(matvec_w4a16_r4_g, 4, 2, false, 2)
MATVEC_W4(matvec_w4a16_r8_g, 8, 1, false, 1)
