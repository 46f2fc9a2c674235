// prefill_rows.cu: a batched prefill's per-token ops over all T rows of a
// batch in one launch each (backend.RowOps, runtime/cuda/rowops.go). Row t
// runs the per-token kernel's body at position pos0+t, so it gets that
// kernel's bits:
//
//	rope_rows_f32       rope_pair (rope_f32's body) on row t at pos0+t;
//	attention_rows_f32  attention_split (attention_f32's body) for query row
//	                    t over positions 0..pos0+t: blocks t*H*ATT_SPLIT ..
//	                    are row t's, with row t's own partials and tickets
//	                    (attention_rows_f32_kv16: over an FP16 cache);
//	router_topk_rows    router_topk_block (router_topk's body) on row t, one
//	                    block a row (router_topk_rows_warp: route_topk_warp,
//	                    the same values, a warp a row);
//	combine_rows_f32    row t of dst = the k weighted source rows of token t
//	                    added in order from zero with add_scaled (a clear and
//	                    k add_scaled_f32 launches' bits);
//	add_gated_rows_f32  add_gated_f32's body on row t with gate g[t].
//
// Op by op only (never captured). Each kernel calls grid_dep_enter first,
// so it may be launched with programmatic dependent launch
// (tuning.prefillPDL).
#include "common.cuh"  // listed for the PTX source hashes (step.cuh includes it)
#include "step.cuh"

extern __shared__ __align__(16) float xs_smem[];  // the dynamic shared memory (also the emulator's)

extern "C" __global__ void rope_rows_f32(float* x, int T, int n_heads, int hd, int pos0, double theta) {
	grid_dep_enter();
	const int half = hd >> 1, per = n_heads * half;
	for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < T * per; idx += gridDim.x * blockDim.x) {
		const int t = idx / per, r = idx - t * per, h = r / half, i = r - h * half;
		rope_pair(x + (size_t)t * n_heads * hd + (size_t)h * hd, i, hd, pos0 + t, theta);
	}
}

// attention_rows_f32 (and attention_rows_f32_kv16, over an FP16 cache the
// batch's rows were appended to by kv_append_f16). part:
// [T][n_heads][ATT_SPLIT][hd+2]; cnt: [T][n_heads], zero between launches
// (each head's last block resets its ticket).
#define ATTENTION_ROWS(NAME, KV)                                                                                        \
	extern "C" __global__ void __launch_bounds__(256) NAME(float* dst, float* part, unsigned* cnt, const float* q,       \
	                                                       const KV* kc, const KV* vc, int pos0, int n_heads, int n_kv,  \
	                                                       int hd) {                                                     \
		grid_dep_enter();                                                                                              \
		const int per = n_heads * ATT_SPLIT, t = blockIdx.x / per, bid = blockIdx.x - t * per;                          \
		const size_t Q = (size_t)n_heads * hd;                                                                         \
		attention_split(dst + t * Q, part + (size_t)t * per * (hd + 2), cnt + (size_t)t * n_heads, q + t * Q, kc, vc,  \
		                pos0 + t + 1, n_heads, n_kv, hd, bid);                                                         \
	}
ATTENTION_ROWS(attention_rows_f32, float)
ATTENTION_ROWS(attention_rows_f32_kv16, __half)

// ids_out, w_out: [T][k]; dynamic shared memory E floats + E bytes.
extern "C" __global__ void __launch_bounds__(256) router_topk_rows(const float* logits, int E, int k, int* ids_out,
                                                                  float* w_out) {
	grid_dep_enter();
	const int t = blockIdx.x;
	router_topk_block(logits + (size_t)t * E, E, k, ids_out + (size_t)t * k, w_out + (size_t)t * k, xs_smem);
}

// router_topk_rows_warp: router_topk_rows' ids and weights with a warp a
// row (route_topk_warp, route_step's selection: the same values), 8 rows a
// block of 256 threads, for E <= 32 * ROUTE_MAX_PER_LANE and k <= 64. The
// block-wide build takes k rounds of two block barriers each; a warp needs
// none. Dynamic shared memory TOPK_WARP_SMEM: a warp's p, ids and w.
#define TOPK_WARP_FLOATS (32 * ROUTE_MAX_PER_LANE + 2 * 64)
#define TOPK_WARP_SMEM (8 * TOPK_WARP_FLOATS * 4)
extern "C" __global__ void __launch_bounds__(256) router_topk_rows_warp(const float* logits, int T, int E, int k, int* ids_out,
                                                                       float* w_out) {
	grid_dep_enter();
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = blockIdx.x * 8 + warp;
	if (t >= T) return;  // warp-uniform
	float* wp = xs_smem + warp * TOPK_WARP_FLOATS;
	int* ids = reinterpret_cast<int*>(wp + 32 * ROUTE_MAX_PER_LANE);
	float* w = wp + 32 * ROUTE_MAX_PER_LANE + 64;
	route_topk_warp(logits + (size_t)t * E, E, k, wp, ids, w, lane);
	__syncwarp();
	for (int r = lane; r < k; r += 32) {
		ids_out[(size_t)t * k + r] = ids[r];
		w_out[(size_t)t * k + r] = w[r];
	}
}

// rope_kv_rows (+_kv16): rope_kv_step's body on row t of q, k and v [T][..]
// at position pos0 + t: q's heads rotated in place, k's rotated into the
// cache row, v copied there; nb blocks a row (block b: row b / nb). The
// bits of RoPERows on q and k, then KVAppendRows (k itself is left as
// projected). qk_norm_rope_kv_rows (+_kv16): qk_norm_rope_kv_step's body on
// row t, nh + nkv blocks a row (a head each): q's RMSNorm (groups of gq)
// and rotation into qo (qo must not alias q), k's into the cache row, v
// copied; the bits of RMSNorm on q and k, RoPERows, then KVAppendRows.
#define ATTN_IN_ROWS(SUF, KV)                                                                                           \
	extern "C" __global__ void rope_kv_rows##SUF(float* q, const float* k, const float* v, KV* kc, KV* vc, int nh, int nkv, \
	                                             int hd, int pos0, double theta, int nb) {                                \
		const int t = blockIdx.x / nb;                                                                                 \
		const size_t Q = (size_t)nh * hd, KVN = (size_t)nkv * hd;                                                      \
		rope_kv_step_body<KV, true>(q + t * Q, k + t * KVN, v + t * KVN, kc, vc, nh, nkv, hd, nullptr, theta,          \
		                            VGrid{(int)blockIdx.x - t * nb, nb}, true, pos0 + t);                               \
	}                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(256)                                                                  \
	    qk_norm_rope_kv_rows##SUF(float* qo, const float* q, const float* k, const float* v, KV* kc, KV* vc,            \
	                              const void* qw, const void* kw, int w_kind, int nh, int nkv, int hd, int gq, int gk,  \
	                              int pos0, double theta, float eps) {                                                 \
		const int per = nh + nkv, t = blockIdx.x / per;                                                                \
		const size_t Q = (size_t)nh * hd, KVN = (size_t)nkv * hd;                                                      \
		qk_norm_rope_kv_step_body<KV, true>(qo + t * Q, q + t * Q, k + t * KVN, v + t * KVN, kc, vc, qw, kw, w_kind,   \
		                                    nh, nkv, hd, gq, gk, nullptr, theta, eps,                                  \
		                                    VGrid{(int)blockIdx.x - t * per, per}, true, pos0 + t);                    \
	}
ATTN_IN_ROWS(, float)
ATTN_IN_ROWS(_kv16, __half)

// combine_rows_f32: dst[t][i] = sum over j < k, in order from 0, of
// add_scaled(., w[t*k+j], src[t*k+j][i]), for t < T, i < n. One thread an
// element, grid-stride.
extern "C" __global__ void combine_rows_f32(float* dst, const float* src, const float* w, int T, int k, int n) {
	grid_dep_enter();
	for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < (long long)T * n; idx += (long long)gridDim.x * blockDim.x) {
		const int t = (int)(idx / n), i = (int)(idx - (long long)t * n);
		float acc = 0.0f;
		for (int j = 0; j < k; j++) acc = add_scaled(acc, w[t * k + j], src[((size_t)t * k + j) * n + i]);
		dst[idx] = acc;
	}
}

// add_gated_rows_f32: d[t][i] += sigmoid(g[t]) * x[t][i] (add_gated_f32's
// arithmetic, the sigmoid in double rounded once), for t < T, i < n.
extern "C" __global__ void add_gated_rows_f32(float* d, const float* x, const float* g, int T, int n) {
	grid_dep_enter();
	for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < (long long)T * n; idx += (long long)gridDim.x * blockDim.x) {
		const int t = (int)(idx / n);
		const float s = (float)(1.0 / (1.0 + exp(-(double)g[t])));
		d[idx] = add_scaled(d[idx], s, x[idx]);
	}
}

