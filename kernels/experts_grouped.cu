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
//            The _t gate/up kernels load their norm weights (constants) before
//            grid_dep_enter (norm_preload), so the fused norm's staging after the wait
//            costs one round trip (the activations), not two.
//            With early (the _t kernels' default; tuning.downLate clears it) a block issues
//            its first weight loads, through the row table, before
//            grid_dep_enter: the table was written two launches back (route,
//            or await in graph-wait steps), which completed before the
//            gate/up this kernel follows could pass its own wait, so only
//            the activations and out wait for the gate/up.
#include "common.cuh"  // listed for the PTX source hashes (experts.cuh includes it)
#include "experts.cuh"

#define GATEUP(NAME, FMT, NRP, CPL, SHARED, MINB)                                                              \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                           \
	    NAME(float* act, const float* x, int A, int F, int D, int gate_off, int up_off, int cols_padded,        \
	         int scales_offset, const __grid_constant__ GroupTable tbl) { grid_dep_enter();                                        \
		gateup_body<FMT, NRP, CPL, SHARED>(act, x, A, F, D, gate_off, up_off, cols_padded, scales_offset, tbl, \
		                                   0, NormSpec{nullptr, 0, 0.0f}, launched_grid());                    \
	}                                                                                                         \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                           \
	    NAME##_t(float* act, const float* x, int A, int F, int D, int gate_off, int up_off, int cols_padded,    \
	             int scales_offset, const GroupTable* tbl, int k0, const void* nw, int nw_kind, float eps) {          \
		const NormSpec nm{nw, nw_kind, eps};                                                                  \
		NormPre pre; /* the norm weights, constants, load before the wait */                                  \
		pre.ok = false;                                                                                       \
		if (SHARED) norm_preload(pre, nm, D);                                                                 \
		grid_dep_enter();                                                                                     \
		gateup_body<FMT, NRP, CPL, SHARED>(act, x, A, F, D, gate_off, up_off, cols_padded, scales_offset, *tbl, \
		                                   k0, nm, launched_grid(), &pre);                                     \
	}
#define DOWN(NAME, FMT, NR, CPL, SHARED, MINB)                                                             \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
	    NAME(float* out, const float* act, int A, int D, int F, int down_off, int cols_padded,              \
	         int scales_offset, int tile_rows, const __grid_constant__ GroupTable tbl) { grid_dep_enter();                     \
		down_body<FMT, NR, CPL, SHARED>(out, act, A, D, F, down_off, cols_padded, scales_offset, tile_rows, \
		                                tbl, 0, nullptr, 0, launched_grid());                               \
	}                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
	    NAME##_t(float* out, const float* act, int A, int D, int F, int down_off, int cols_padded,          \
	             int scales_offset, int tile_rows, const GroupTable* tbl, int k0, const float* resid,     \
	             int accumulate, int early) { if (!early) grid_dep_enter();                                             \
		down_body<FMT, NR, CPL, SHARED>(out, act, A, D, F, down_off, cols_padded, scales_offset, tile_rows, \
		                                *tbl, k0, resid, accumulate, launched_grid(), early != 0);          \
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
