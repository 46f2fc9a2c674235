// experts_fused.cu: the routed experts of one token in one launch, for the
// captured decode steps (runtime/cuda fusedMoE: grouped-v1, int4 records,
// the row table in device memory). It runs what experts_gateup_int4_p2_s_t
// and experts_down_int4_r4c1_s_t (experts_grouped.cu) run, with the same
// bodies (experts.cuh), so its outputs are bit-identical to theirs:
//
//	phase 1: block b prefetches into L2 the down rows it will need in phase
//	         3 (tile b: rows b*R .. b*R+R-1 of every routed expert's down
//	         matrix, and their scales). The table of routed rows is known
//	         (route_step wrote it before this launch), so the down bytes
//	         stream from HBM while gate/up computes, instead of after it.
//	phase 2: gate/up over the whole grid: act[k][i] = silu(G_k[i]·x)*(U_k[i]·x),
//	         x staged once per block with the fused RMSNorm.
//	grid barrier: every block's act writes are visible to every block.
//	phase 3: down for tile b (blocks b < ndown): out[d] = resid[d] + sum over
//	         k in order of wts[k]*(D_k[d]·act_k), the weights now L2 hits.
//
// The barrier needs every block resident at once: the host launches exactly
// the grid the GPU holds (the occupancy API, one wave) and nothing this
// kernel waits for can be queued behind it. Programmatic dependents may be
// scheduled once every block of this grid has started (grid_dep_enter), so
// they never take an SM a block of this grid still needs. The barrier
// counter is self-resetting (bar, one uint32 per layer, zero at
// allocation): block 0 adds 2^31 - (n-1), the others 1, so the top bit
// flips when the last block arrives and the low bits return to where they
// were; a block waits for that flip. A block that spins for about a second
// traps rather than hang the GPU.
//
// act is written in phase 2 and read in phase 3 by other blocks of this
// launch, so activations are loaded through L2 (HZ_COHERENT_ACT: act_ldg
// is __ldcg), never the non-coherent path.
#define HZ_COHERENT_ACT 1
#include "common.cuh"  // listed for the PTX source hashes (experts.cuh includes it)
#include "experts.cuh"

// moe_prefetch_tile asks L2 for rows d0 .. d0+R-1 (clamped to D) of the down
// matrix of every expert k < A of tbl, and for their scales: 128-byte lines
// spread over the block's threads.
__device__ __forceinline__ void moe_prefetch_line(const char* p) {
	asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p));
}
__device__ __forceinline__ void moe_prefetch_tile(const GroupTable& tbl, int A, int D, int down_off, int cols_padded,
                                                  int scales_offset, int d0, int R) {
	const int rows = min(R, D - d0);
	if (rows <= 0) return;
	const unsigned long long row_bytes = (unsigned long long)(cols_padded >> 1);
	const unsigned long long sc_bytes = (unsigned long long)(cols_padded >> 8) * 2;
	const unsigned long long q_len = row_bytes * rows, s_len = sc_bytes * rows;
	for (int k = 0; k < A; k++) {
		const char* mat = reinterpret_cast<const char*>(tbl.recs[k]) + down_off;
		const char* q = mat + row_bytes * d0;
		const char* s = mat + scales_offset + sc_bytes * d0;
		for (unsigned long long off = 128ull * threadIdx.x; off < q_len; off += 128ull * blockDim.x) moe_prefetch_line(q + off);
		for (unsigned long long off = 128ull * threadIdx.x; off < s_len; off += 128ull * blockDim.x) moe_prefetch_line(s + off);
		if (threadIdx.x == 0) {
			// the last line of each range, which a misaligned start leaves out
			moe_prefetch_line(q + q_len - 1);
			moe_prefetch_line(s + s_len - 1);
		}
	}
}

// moe_grid_barrier: see the top of the file. Every thread of the block
// calls it.
__device__ __forceinline__ void moe_grid_barrier(unsigned* bar) {
	__syncthreads();
	if (threadIdx.x == 0) {
		const unsigned n = gridDim.x;
		const unsigned inc = blockIdx.x == 0 ? 0x80000000u - (n - 1) : 1u;
		__threadfence();
		const unsigned old = atomicAdd(bar, inc);
		unsigned cur, spins = 0;
		do {
			asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(bar) : "memory");
			if (((old ^ cur) & 0x80000000u) != 0) break;
			__nanosleep(32);
		} while (++spins < (1u << 25));
		if (((old ^ cur) & 0x80000000u) == 0) __trap();
		__threadfence();
	}
	__syncthreads();
}

// flags (diagnostics for BenchmarkExperts; the stepper passes 0): bit 0
// no L2 prefetch, bit 1 no down phase, bit 2 no grid barrier. With bits 1
// and 2 the kernel is gate/up alone (with or without the prefetch of the
// down rows for a separate down launch).
#define MOE_NO_PREFETCH 1
#define MOE_NO_DOWN 2
#define MOE_NO_BARRIER 4

// experts_moe_int4_t: A routed experts (table tbl, entries 0..A-1), gate/up
// p2 (2 gate + 2 up rows x 2 chunks per lane) then down r4c1 (4 rows x 1
// chunk) with tiles of R output rows, ndown = ceil(D/R) <= gridDim.x tiles.
// out[d] = (resid ? resid[d] + c : c), c the k-ordered combine from 0.
// Dynamic shared memory: max(xs4 of D, A * xs4 of F + A*R floats).
extern "C" __global__ void __launch_bounds__(256, 2)
    experts_moe_int4_t(float* out, float* act, const float* x, int A, int F, int D, int gate_off, int up_off,
                       int g_cols_padded, int g_scales_offset, int down_off, int d_cols_padded, int d_scales_offset,
                       int R, int ndown, const GroupTable* tbl, const void* nw, int nw_kind, float eps,
                       const float* resid, unsigned* bar, int flags) {
	grid_dep_enter();
	const GroupTable& t = *tbl;
	const int b = blockIdx.x;
	if (b < ndown && !(flags & MOE_NO_PREFETCH)) moe_prefetch_tile(t, A, D, down_off, d_cols_padded, d_scales_offset, b * R, R);
	gateup_body<Int4Fmt, 2, 2, true>(act, x, A, F, D, gate_off, up_off, g_cols_padded, g_scales_offset, t, 0,
	                                 NormSpec{nw, nw_kind, eps}, launched_grid());
	if (!(flags & MOE_NO_BARRIER)) moe_grid_barrier(bar);
	if (b >= ndown || (flags & MOE_NO_DOWN)) return;
	down_body<Int4Fmt, 4, 1, true>(out, act, A, D, F, down_off, d_cols_padded, d_scales_offset, R, t, 0, resid, 0,
	                               VGrid{b, ndown});
}
