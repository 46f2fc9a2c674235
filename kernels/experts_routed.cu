// experts_routed.cu: the grouped expert kernels of a captured graph-full
// step with the layer's routing done inside them ("route in"), so a layer
// launches router -> gate/up -> down instead of router -> route_step ->
// gate/up -> down (tuning.routeIn, runtime/cuda/step_plan.go).
//
// Each block's first warp runs route_step_body (decode.cuh) on the router's
// logits into a GroupTable in the block's shared memory: the same softmax,
// top-k, renormalisation and gather of rows from the layer's device table
// of pinned rows as route_step, so the ids, weights and rows are the same
// values and the dot products, done by the same bodies (experts.cuh) as the
// _t kernels of experts_grouped.cu, the same bits.
//
//	experts_gateup_*_r: after grid_dep_enter (the router ahead of it wrote
//	    the logits). Block 0 alone publishes what route_step would: the ids
//	    (ids_out), the group table in device memory (tbl, when not null: the
//	    down kernel that follows reads it after its own wait) and, on the
//	    step's last layer, the copy of every layer's ids to the host and the
//	    flag, after a system fence.
//	experts_down_*_r: routes before grid_dep_enter. The logits were written
//	    two launches back (the router), which completed before the gate/up
//	    this kernel follows could pass its own wait, and the device table
//	    is constant, so the routing and the first weight loads overlap the
//	    gate/up's tail; only the activations and out wait.
//
// The shared GroupTable and route_step_body's own arrays are static shared
// memory (2.3 KB) beside the dynamic staging (xs_smem).
#include "common.cuh"  // listed for the PTX source hashes (the headers below include them)
#include "step.cuh"
#include "decode.cuh"
#include "experts.cuh"

// route_in: block-wide. Warp 0 routes into g (shared); with publish (block
// 0 of the gate/up) also writes ids_out, the flag and copy, and then tbl.
__device__ __forceinline__ void route_in(GroupTable* g, const float* logits, int E, int k, int norm,
                                         const unsigned long long* table, GroupTable* tbl, int* ids_out, int* flag,
                                         const int* copy_src, int* copy_dst, int copy_n, bool publish) {
	if (threadIdx.x < 32)
		route_step_body(logits, E, k, norm, table, g, nullptr, publish ? ids_out : nullptr, publish ? flag : nullptr,
		                copy_src, copy_dst, copy_n);
	__syncthreads();
	if (publish && tbl != nullptr && (int)threadIdx.x < k) {
		tbl->recs[threadIdx.x] = g->recs[threadIdx.x];
		tbl->wts[threadIdx.x] = g->wts[threadIdx.x];
	}
}

#define GATEUP_R(NAME, FMT, NRP, CPL, MINB)                                                                        \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
	    NAME(float* act, const float* x, int A, int F, int D, int gate_off, int up_off, int cols_padded,          \
	         int scales_offset, const void* nw, int nw_kind, float eps, const float* logits, int E, int norm,     \
	         const unsigned long long* table, GroupTable* tbl, int* ids_out, int* flag, const int* copy_src,     \
	         int* copy_dst, int copy_n) {                                                                         \
		__shared__ GroupTable g;                                                                              \
		const NormSpec nm{nw, nw_kind, eps};                                                                  \
		NormPre pre; /* the norm weights, constants, load before the wait */                                  \
		norm_preload(pre, nm, D);                                                                             \
		grid_dep_enter();                                                                                     \
		route_in(&g, logits, E, A, norm, table, tbl, ids_out, flag, copy_src, copy_dst, copy_n, blockIdx.x == 0); \
		gateup_body<FMT, NRP, CPL, true>(act, x, A, F, D, gate_off, up_off, cols_padded, scales_offset, g, 0, nm, \
		                                 launched_grid(), &pre);                                               \
	}
#define DOWN_R(NAME, FMT, NR, CPL, MINB)                                                                    \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                 \
	    NAME(float* out, const float* act, int A, int D, int F, int down_off, int cols_padded, int scales_offset, \
	         int tile_rows, const float* resid, int accumulate, const float* logits, int E, int norm,           \
	         const unsigned long long* table) {                                                            \
		__shared__ GroupTable g;                                                                        \
		route_in(&g, logits, E, A, norm, table, nullptr, nullptr, nullptr, nullptr, nullptr, 0, false);     \
		down_body<FMT, NR, CPL, true>(out, act, A, D, F, down_off, cols_padded, scales_offset, tile_rows, g, 0, \
		                              resid, accumulate, launched_grid(), true);                         \
	}

// The staged (_s) variants of experts_grouped.cu's _t kernels, same
// register caps.
GATEUP_R(experts_gateup_int4_p2_s_r, Int4Fmt, 2, 2, 2)
GATEUP_R(experts_gateup_int4_p4_s_r, Int4Fmt, 4, 1, 1)
GATEUP_R(experts_gateup_f16_p2_s_r, F16Fmt, 2, 2, 2)
GATEUP_R(experts_gateup_f16_p4_s_r, F16Fmt, 4, 1, 1)
DOWN_R(experts_down_int4_r4_s_r, Int4Fmt, 4, 2, 1)
DOWN_R(experts_down_int4_r8_s_r, Int4Fmt, 8, 1, 1)
DOWN_R(experts_down_int4_r4c1_s_r, Int4Fmt, 4, 1, 2)
DOWN_R(experts_down_f16_r4_s_r, F16Fmt, 4, 2, 2)
DOWN_R(experts_down_f16_r8_s_r, F16Fmt, 8, 1, 2)
DOWN_R(experts_down_f16_r4c1_s_r, F16Fmt, 4, 1, 2)
