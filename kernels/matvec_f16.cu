// matvec_f16.cu: y[R] = W[R, C] · x[C] (+ bias[R]), W FP16 row-major, x and y
// FP32, FP32 accumulation. Used for every non-routed projection (attention,
// router, shared expert, lm_head) and for fp16 expert records.
//
// Launch: blocks of 256 threads (8 warps); a warp task is NR consecutive
// rows, warps stride over the tasks, and row_pipeline with F16Fmt
// (common.cuh: 16-byte coalesced loads, lane l takes chunks l, l+32, ...,
// butterfly reduction) computes them; a step loads NR rows x CPL chunks per
// lane (NR*CPL = 8: 4 KB per warp), the next step's loads in flight while a
// step computes. x is staged once per block in shared memory (variant _s,
// dynamic shared size xs_floats(C)*4 bytes) or read through L1 when C is too
// wide for that (variant _g). The row's result does not depend on NR, CPL or
// the variant.
//
// With nw set (shared variants only), x is staged as RMSNorm(x)·nw
// (stage_block_norm: the rmsnorm kernel's bits), so a captured step fuses a
// norm into the projection that consumes it.
#include "common.cuh"

extern __shared__ __align__(16) float xs_smem[];

// hz_wait_prefetch is the bytes of weight rows each warp asks L2 for before
// its dependency wait (matvec_body's pf; 0, the default, none). The host
// sets it (runtime/cuda tuning.waitPrefetch); it only moves where the loads
// find their bytes.
__device__ unsigned hz_wait_prefetch;

#define MATVEC_F16(NAME, NR, CPL, SHARED)                                                                  \
	extern "C" __global__ void __launch_bounds__(256, 2) NAME(float* y, const __half* W, const float* x,     \
	                                                       const void* bias, int bias_kind, int rows,       \
	                                                       int cols, const void* nw, int nw_kind,           \
	                                                       float eps) {                                      \
		matvec_body<F16Fmt, NR, CPL, SHARED, true>(xs_smem, y, reinterpret_cast<const uint8_t*>(W), x, bias,    \
		                                     bias_kind, rows, cols, 0, 0, NormSpec{nw, nw_kind, eps},       \
		                                     launched_grid(), hz_wait_prefetch);                            \
	}

MATVEC_F16(matvec_f16_r1_s, 1, 8, true)
MATVEC_F16(matvec_f16_r2_s, 2, 4, true)
MATVEC_F16(matvec_f16_r4_s, 4, 2, true)
MATVEC_F16(matvec_f16_r1_g, 1, 8, false)
MATVEC_F16(matvec_f16_r2_g, 2, 4, false)
MATVEC_F16(matvec_f16_r4_g, 4, 2, false)
