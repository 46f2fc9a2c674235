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

// shared_down_f16_r{1,2,4}: a Qwen shared expert's down projection with the
// SiLU·up before it and the gated residual after it, in one launch:
//
//	a[i] = silu_mul(gum[i], gum[S+i])                    (i < S = cols)
//	x[r] = x[r] + (moe[r] + sigmoid(gum[2S]) * (W[r] · a))  (r < rows)
//
// gum is the gate|up|mix matvec's output (2S+1 values), W the FP16 down
// matrix [rows = D, cols = S], moe the routed experts' combined output and
// x the residual stream. It replaces silu_mul_f32, matvec_f16_r*_s and
// add_gated_resid_step with the same bits: a[i] is silu_mul_f32's value,
// staged where the matvec would have staged it, every row's dot is
// row_pipeline's, and the epilogue is add_gated_resid_step_body's
// expression (sigmoid in FP64, add_scaled, then the residual add). Dynamic
// shared memory: xs_floats(cols) + 4 floats (the gate sigmoid after the
// staged vector).
__device__ __forceinline__ void stage_silu_mul(float* dst, const float* __restrict__ gum, int n) {
	const int n32 = (n + 31) & ~31;
	constexpr int V = 8;
	for (int base = threadIdx.x; base < n32; base += V * blockDim.x) {
		float g[V], u[V];
#pragma unroll
		for (int j = 0; j < V; j++) {
			const int i = base + j * blockDim.x;
			g[j] = u[j] = 0.0f;
			if (i < n) g[j] = act_ldg(gum + i), u[j] = act_ldg(gum + n + i);
		}
#pragma unroll
		for (int j = 0; j < V; j++) {
			const int i = base + j * blockDim.x;
			if (i < n32) dst[xs_index(i)] = i < n ? silu_mul(g[j], u[j]) : 0.0f;
		}
	}
	if (threadIdx.x == 0) dst[xs_floats(n)] = (float)(1.0 / (1.0 + exp(-(double)act_ldg(gum + 2 * n))));
	__syncthreads();
}

template <int NR>
struct SharedDownTasks {
	typedef XShared XS;
	float* x;
	const float* moe;
	const uint8_t* mat;
	const float* sg;  // shared: sigmoid(mix)
	XS xs_;
	int rows, cols;
	__device__ __forceinline__ int count() const { return (rows + NR - 1) / NR; }
	__device__ __forceinline__ F16Fmt::Row row(int t, int i) const { return F16Fmt::row(mat, min(t * NR + i, rows - 1), cols, 0, 0); }
	__device__ __forceinline__ XS xs(int) const { return xs_; }
	__device__ __forceinline__ void emit(int t, const float (&out)[NR]) const {
		if ((threadIdx.x & 31) != 0) return;
		const float g = *sg;
#pragma unroll
		for (int i = 0; i < NR; i++) {
			const int r = t * NR + i;
			if (r < rows) x[r] = __fadd_rn(x[r], add_scaled(moe[r], g, out[i]));
		}
	}
};

#define SHARED_DOWN_F16(NAME, NR, CPL)                                                                             \
	extern "C" __global__ void __launch_bounds__(256, 2) NAME(float* x, const __half* W, const float* gum,           \
	                                                       const float* moe, int rows, int cols) {                  \
		SharedDownTasks<NR> tk;                                                                                      \
		tk.x = x, tk.moe = moe, tk.mat = reinterpret_cast<const uint8_t*>(W), tk.sg = xs_smem + xs_floats(cols);    \
		tk.xs_ = XShared{xs_smem}, tk.rows = rows, tk.cols = cols;                                                   \
		const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;                                                     \
		row_pipeline<F16Fmt, NR, CPL>(tk, blockIdx.x * nw + warp, gridDim.x * nw, cols, [&] {                       \
			grid_dep_enter();                                                                                        \
			stage_silu_mul(xs_smem, gum, cols);                                                                      \
		});                                                                                                          \
	}

SHARED_DOWN_F16(shared_down_f16_r1, 1, 8)
SHARED_DOWN_F16(shared_down_f16_r2, 2, 4)
SHARED_DOWN_F16(shared_down_f16_r4, 4, 2)
