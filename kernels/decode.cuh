// decode.cuh: the bodies of the captured decode step's kernels (decode.cu
// launches each as its own kernel; the persistent decode kernel,
// persistent.cu, runs them as instructions of one launch). A body that
// depends on its block runs as block vg.bid of vg.nblk (VGrid), so the
// persistent kernel's virtual blocks do exactly what a launch's blocks do
// and give the same bits. What the bodies read and write is described in
// decode.cu.
#pragma once

#include "common.cuh"
#include "step.cuh"

// argmax_step_body masks at most ARGMAX_MAX_MASKED ids.
#define ARGMAX_MAX_MASKED 8

// embed_step: dst[j] = table[st[0]*D + j]; table FP16 (kind 1) or FP32 (2).
__device__ __forceinline__ void embed_step_body(float* dst, const void* table, int kind, const int* st, int D, VGrid vg) {
	const int tok = st[0];
	for (int j = vg.bid * blockDim.x + threadIdx.x; j < D; j += vg.nblk * blockDim.x) {
		const size_t at = (size_t)tok * D + j;
		dst[j] = kind == 1 ? __half2float(reinterpret_cast<const __half*>(table)[at]) : reinterpret_cast<const float*>(table)[at];
	}
}

// qk_norm_step: RMSNorm of q (nq/gq groups of gq values, weights qw) and k
// (nk/gk groups, weights kw) in place, one block per group: blocks
// 0..nq/gq-1 take q, the rest k. Each block is rmsnorm's block.
__device__ __forceinline__ void qk_norm_step_body(float* q, float* k, const void* qw, const void* kw,
                                                              int w_kind, int nq, int gq, int gk, float eps, VGrid vg) {
	__shared__ float red[32];
	const int qb = nq / gq;
	if ((int)vg.bid < qb) {
		float* g = q + (size_t)vg.bid * gq;
		rmsnorm_group(g, g, qw, w_kind, gq, eps, red);
	} else {
		float* g = k + (size_t)(vg.bid - qb) * gk;
		rmsnorm_group(g, g, kw, w_kind, gk, eps, red);
	}
}

// attention_step: attention over positions 0..st[1] (attention_split in
// step.cuh, the op-by-op kernel's bits). Launch: heads*ATT_SPLIT blocks of
// 256 threads; part[heads][ATT_SPLIT][hd+2] scratch, cnt[heads] zero
// between launches. attention_pf_step: the same after att_prefetch_l2 of
// the block's first rows, before its dependency wait (tuning.attPrefetch).
// attention_pipe_step: the pipelined loop over an FP16 cache (an FP32 one
// runs the plain loop), after att_prefetch_l2 when rows > 0
// (tuning.attPipe); the same bits.
// attention_in_step: attention_in at pos = st[1] (the q/k norm, RoPE and
// KV append of qk_norm_rope_kv_step or rope_kv_step, then attention_step's
// attention, in one launch; tuning.attnIn, off by default: slower on the
// H200). Launch as attention_step.
template <typename KV>
__device__ __forceinline__ void attention_in_step_body(float* dst, float* part, unsigned* cnt, const float* q,
                                                       const float* k, const float* v, KV* kc, KV* vc,
                                                       const void* qw, const void* kw, int w_kind, int n_heads,
                                                       int n_kv, int hd, int gq, int gk, const int* st, double theta,
                                                       float eps, VGrid vg) {
	attention_in(dst, part, cnt, q, k, v, kc, vc, qw, kw, w_kind, st[1] + 1, n_heads, n_kv, hd, gq, gk, theta, eps, vg.bid);
}

// att_prefetch_l2 asks L2 for the first `rows` positions of block bid's
// range of attention_split (its K and V rows, the head's hd values each),
// for a launch that does it before its dependency wait: under programmatic
// dependent launch the attention's blocks are resident while the kernel
// before it (rope_kv_step or qk_norm_rope_kv_step: a few µs, almost no
// bytes) runs, and HBM is idle then. The positions are those of st[1] (the
// step's position, written at least two launches back, so final before
// the wait), without st[1] itself, whose rows the kernel before is writing.
// A prefetch is a hint: it moves no data a thread reads and changes no bit.
template <typename KV>
__device__ __forceinline__ void att_prefetch_l2(const KV* kc, const KV* vc, const int* st, int n_heads, int n_kv,
                                                int hd, int rows, int bid) {
	const int n = st[1] + 1, h = bid / ATT_SPLIT, s = bid % ATT_SPLIT;
	const int per = (n + ATT_SPLIT - 1) / ATT_SPLIT, t0 = s * per;
	const int t1 = min(min(n - 1, t0 + per), t0 + rows);
	const int kv_dim = n_kv * hd, off = (h / (n_heads / n_kv)) * hd;
	const int lines = (hd * (int)sizeof(KV) + 127) / 128;  // 128-byte lines a row spans from its start
	for (int i = threadIdx.x; i < 2 * lines * (t1 - t0); i += blockDim.x) {
		const int j = i >> 1, t = t0 + j / lines, c = j % lines;
		const char* p = reinterpret_cast<const char*>(((i & 1) ? vc : kc) + (size_t)t * kv_dim + off) + 128 * c;
		asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
	}
}

template <typename KV, bool PIPE = false, bool RING = false, bool CS = false>
__device__ __forceinline__ void attention_step_body(float* dst, float* part, unsigned* cnt, const float* q,
                                                    const KV* kc, const KV* vc, const int* st, int n_heads,
                                                    int n_kv, int hd, VGrid vg) {
	attention_split<KV, PIPE, RING, CS>(dst, part, cnt, q, kc, vc, st[1] + 1, n_heads, n_kv, hd, vg.bid);
}

// route_step: softmax over logits[E] and top-k with one warp (E <= 256):
// the same values as router_topk_block (max is exact in any order; p_i =
// exp(l_i - max) in double rounded once; the sum in index order by lane 0;
// one division each; selection by (p desc, index asc), a total order, so
// the winner of each round does not depend on the reduction order). Then
// lane 0 renormalises the weights when norm is set (sum in k order, one
// division each: the host's order in Backend.TopK) into tbl->wts and, when
// table is not null (full residency: table[e] is the device address of
// expert e's row; in graph-wait mode a table in mapped host memory with 0
// for experts not resident), gathers tbl->recs[r] = table[ids[r]] and, when
// need is not null, gives the layer a miss ticket when some rec is 0
// (await_step then waits for the host). The
// ids go to ids_out unless it is null (the route-in expert kernels'
// blocks other than 0, experts_routed.cu); with a flag, copy_n ints are then copied from
// copy_src to copy_dst (graph-full publishes every layer's ids, kept in
// device memory, from the last layer's routing: one system fence per step
// instead of one per layer), then a system fence and *flag = 1. Without a
// flag nothing is fenced. The selection is one rank pass (a value's rank =
// how many values beat it; the k sequential rounds only when a NaN is
// present); the tail runs on lanes 0..k-1 at once. Launch: 1 block of 32
// threads.
__device__ __forceinline__ void route_step_body(const float* logits, int E, int k, int norm,
                                                           const volatile unsigned long long* table, GroupTable* tbl,
                                                           int* need, int* ids_out, volatile int* flag,
                                                           const int* copy_src, int* copy_dst, int copy_n) {
	__shared__ float p[32 * ROUTE_MAX_PER_LANE];
	__shared__ int ids[64];
	__shared__ float w[64];
	const int lane = threadIdx.x;
	route_topk_warp(logits, E, k, p, ids, w, lane);
	__syncwarp();
	// The tail runs on lanes r < k in parallel (it used to run on lane 0
	// alone: k dependent table reads and mapped writes in series). Only
	// the renormalising sum stays serial on lane 0, in k order.
	if (norm) {
		float s = 0.0f;
		if (lane == 0)
			for (int r = 0; r < k; r++) s = __fadd_rn(s, w[r]);
		s = __shfl_sync(FULL_MASK, s, 0);
		for (int r = lane; r < k; r += 32) w[r] = __fdiv_rn(w[r], s);
		__syncwarp();
	}
	int missing = 0;
	for (int r = lane; r < k; r += 32) {
		tbl->wts[r] = w[r];
		if (table != nullptr) {
			const unsigned long long rec = table[ids[r]];
			tbl->recs[r] = rec;
			missing |= rec == 0;
		}
		if (ids_out != nullptr) ids_out[r] = ids[r];
	}
	missing = __any_sync(FULL_MASK, missing);
	if (need != nullptr && lane == 0) {
		// need[0]: 0, or the layer's miss ticket (need[1] counts the steps
		// this layer missed); the host answers ticket T with ready >= T.
		int t = 0;
		if (missing) need[1] = t = need[1] + 1;
		need[0] = t;
	}
	if (flag == nullptr) return;
	if (copy_n > 0) {
		__syncwarp();  // this warp's ids_out writes are visible to the copy
		for (int i = lane; i < copy_n; i += 32) copy_dst[i] = copy_src[i];
	}
	// Every lane's writes, then the flag: each writer fences, the warp
	// synchronises, lane 0 raises the flag.
	__threadfence_system();
	__syncwarp();
	if (lane == 0) *flag = 1;
}


__device__ __forceinline__ void argmax_step_body(const float* logits, int n, const int* masked, int nm,
                                                              int* st, int* part, unsigned* ticket, int* tok_host,
                                                              volatile int* flag, VGrid vg) {
	__shared__ int local_masked[ARGMAX_MAX_MASKED];
	__shared__ int nl;
	__shared__ bool last;
	const int chunk = (n + vg.nblk - 1) / vg.nblk;
	const int lo = min(n, (int)vg.bid * chunk), hi = min(n, lo + chunk);
	if (threadIdx.x == 0) {
		// the masked ids inside this chunk, as chunk-local indices
		int c = 0;
		for (int j = 0; j < nm && j < ARGMAX_MAX_MASKED; j++)
			if (masked[j] >= lo && masked[j] < hi) local_masked[c++] = masked[j] - lo;
		nl = c;
	}
	__syncthreads();
	const int i = argmax_block(logits + lo, hi - lo, local_masked, nl);
	if (threadIdx.x == 0) {
		part[vg.bid] = i < 0 ? -1 : lo + i;
		__threadfence();
		last = atomicAdd(ticket, 1u) == vg.nblk - 1;
	}
	__syncthreads();
	if (!last) return;
	__threadfence();
	float bv = 0.0f;
	int bi = -1;
	for (int b = threadIdx.x; b < (int)vg.nblk; b += blockDim.x) {
		const int c = __ldcg(&part[b]);
		if (c >= 0) {
			const float v = __ldcg(&logits[c]);
			if (beats(v, c, bv, bi)) bv = v, bi = c;
		}
	}
	bi = block_best(bv, bi);
	if (threadIdx.x != 0) return;
	*ticket = 0;
	st[0] = bi;
	st[1] = st[1] + 1;
	*tok_host = bi;
	__threadfence_system();
	*flag = 1;
}

// add_gated_resid_step: x += d + sigmoid(g[0]) * s, i.e. Qwen's
// AddGated(d, s, g) followed by Add(x, x, d), with both roundings in the
// same order (add_gated_f32 then add_f32).
__device__ __forceinline__ void add_gated_resid_step_body(float* x, const float* d, const float* s, const float* g, int n, VGrid vg) {
	const float sg = (float)(1.0 / (1.0 + exp(-(double)g[0])));
	for (int i = vg.bid * blockDim.x + threadIdx.x; i < n; i += vg.nblk * blockDim.x)
		x[i] = __fadd_rn(x[i], add_scaled(d[i], sg, s[i]));
}
