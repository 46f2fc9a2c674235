// decode.cu: the kernels of a captured decode step (runtime/cuda/step.go).
//
// A CUDA graph replays fixed kernel parameters, so what changes from one
// step to the next is read from device memory instead: the step state
// st[0] = token, st[1] = position (written by step_set before a prefill
// step, advanced by argmax_step after a decode step), and the routed group
// of each layer (written by route_step: ids, renormalised weights and, at
// full residency, the rows' addresses gathered from the layer's device
// table). The arithmetic is step.cuh's and experts_grouped.cu's, shared
// with the op-by-op kernels, so a captured step gives the same bits.
//
// Results the host needs (the routed ids of each layer, the next token) go
// to mapped pinned memory followed by a system-scope fence and a flag the
// host polls.
#include "common.cuh"  // listed for the PTX source hashes (step.cuh includes it)
#include "step.cuh"

// GroupTable as in experts_grouped.cu (runtime/cuda/experts.go encodes it).
struct GroupTable {
	unsigned long long recs[64];
	float wts[64];
};

// step_set: st[0] = tok, st[1] = pos. One thread.
extern "C" __global__ void step_set(int* st, int tok, int pos) {
	st[0] = tok;
	st[1] = pos;
}

// embed_step: dst[j] = table[st[0]*D + j]; table FP16 (kind 1) or FP32 (2).
extern "C" __global__ void embed_step(float* dst, const void* table, int kind, const int* st, int D) {
	const int tok = st[0];
	for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < D; j += gridDim.x * blockDim.x) {
		const size_t at = (size_t)tok * D + j;
		dst[j] = kind == 1 ? __half2float(reinterpret_cast<const __half*>(table)[at]) : reinterpret_cast<const float*>(table)[at];
	}
}

// qk_norm_step: RMSNorm of q (nq/gq groups of gq values, weights qw) and k
// (nk/gk groups, weights kw) in place, one block per group: blocks
// 0..nq/gq-1 take q, the rest k. Each block is rmsnorm's block.
extern "C" __global__ void __launch_bounds__(256) qk_norm_step(float* q, float* k, const void* qw, const void* kw,
                                                              int w_kind, int nq, int gq, int gk, float eps) {
	__shared__ float red[32];
	const int qb = nq / gq;
	if ((int)blockIdx.x < qb) {
		float* g = q + (size_t)blockIdx.x * gq;
		rmsnorm_group(g, g, qw, w_kind, gq, eps, red);
	} else {
		float* g = k + (size_t)(blockIdx.x - qb) * gk;
		rmsnorm_group(g, g, kw, w_kind, gk, eps, red);
	}
}

// rope_kv_step: at position pos = st[1], rotate the nh query heads of q in
// place, rotate the nkv key heads of k and store them at kc[pos], and store
// v at vc[pos] (rows of kvn = nkv*hd values). One thread per work item:
// nh*hd/2 query pairs, then nkv*hd/2 key pairs, then kvn value copies.
extern "C" __global__ void rope_kv_step(float* q, const float* k, const float* v, float* kc, float* vc, int nh,
                                        int nkv, int hd, const int* st, double theta) {
	const int pos = st[1], half = hd >> 1, kvn = nkv * hd;
	const int nqp = nh * half, nkp = nkv * half, total = nqp + nkp + kvn;
	for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
		if (idx < nqp) {
			const int h = idx / half, i = idx - h * half;
			rope_pair(q + (size_t)h * hd, i, hd, pos, theta);
		} else if (idx < nqp + nkp) {
			const int j = idx - nqp, h = j / half, i = j - h * half;
			// The pair is copied into the cache row and rotated there: k
			// itself stays as projected (only the cache holds the rotated
			// key, as after RoPE + KVAppend).
			const float* kh = k + (size_t)h * hd;
			float* row = kc + (size_t)pos * kvn + (size_t)h * hd;
			row[i] = kh[i];
			row[i + half] = kh[i + half];
			rope_pair(row, i, hd, pos, theta);
		} else {
			const int j = idx - nqp - nkp;
			vc[(size_t)pos * kvn + j] = v[j];
		}
	}
}

// attention_step: attention_head over positions 0..st[1]. Launch: one block
// per query head, dynamic shared memory (maxSeq + 8*hd) floats.
extern "C" __global__ void __launch_bounds__(256) attention_step(float* dst, const float* q, const float* kc,
                                                                const float* vc, const int* st, int n_heads, int n_kv,
                                                                int hd) {
	extern __shared__ float smem[];
	__shared__ float red[32];
	attention_head(dst, q, kc, vc, st[1] + 1, n_heads, n_kv, hd, smem, red);
}

// route_step: router_topk_block over logits[E], then (thread 0) the
// weights renormalised to sum 1 when norm is set (sum in k order, then one
// division each: the host's order in Backend.TopK), written to tbl->wts;
// when table is not null (full residency: table[e] is the device address
// of expert e's row), tbl->recs[r] = table[ids[r]]. The ids go to ids_host
// (mapped), then a system fence and *flag = 1.
extern "C" __global__ void __launch_bounds__(256) route_step(const float* logits, int E, int k, int norm,
                                                            const unsigned long long* table, GroupTable* tbl,
                                                            int* ids_host, volatile int* flag) {
	extern __shared__ float p[];  // [E] probabilities, then E taken flags
	__shared__ int ids[64];
	__shared__ float w[64];
	router_topk_block(logits, E, k, ids, w, p);
	if (threadIdx.x != 0) return;
	if (norm) {
		float s = 0.0f;
		for (int r = 0; r < k; r++) s = __fadd_rn(s, w[r]);
		for (int r = 0; r < k; r++) w[r] = __fdiv_rn(w[r], s);
	}
	for (int r = 0; r < k; r++) {
		tbl->wts[r] = w[r];
		if (table != nullptr) tbl->recs[r] = table[ids[r]];
		ids_host[r] = ids[r];
	}
	__threadfence_system();
	*flag = 1;
}

// argmax_step: argmax_block of logits[n] (masked ids excluded); thread 0
// sets st[0] = the token, advances st[1], writes the token to tok_host
// (mapped), then a system fence and *flag = 1. One block of 1024 threads.
extern "C" __global__ void __launch_bounds__(1024) argmax_step(const float* logits, int n, const int* masked, int nm,
                                                              int* st, int* tok_host, volatile int* flag) {
	const int i = argmax_block(logits, n, masked, nm);
	if (threadIdx.x != 0) return;
	st[0] = i;
	st[1] = st[1] + 1;
	*tok_host = i;
	__threadfence_system();
	*flag = 1;
}

// add_gated_resid_step: x += d + sigmoid(g[0]) * s, i.e. Qwen's
// AddGated(d, s, g) followed by Add(x, x, d), with both roundings in the
// same order (add_gated_f32 then add_f32).
extern "C" __global__ void add_gated_resid_step(float* x, const float* d, const float* s, const float* g, int n) {
	const float sg = (float)(1.0 / (1.0 + exp(-(double)g[0])));
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] = __fadd_rn(x[i], add_scaled(d[i], sg, s[i]));
}
