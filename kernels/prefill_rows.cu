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
//	                    block a row;
//	combine_rows_f32    row t of dst = the k weighted source rows of token t
//	                    added in order from zero with add_scaled (a clear and
//	                    k add_scaled_f32 launches' bits);
//	add_gated_rows_f32  add_gated_f32's body on row t with gate g[t];
//	tc_route_groups     the rows' routing grouped by expert into the
//	                    grouped tensor-core matmuls' tables, on the device.
//
// Op by op only (never captured). Each kernel calls grid_dep_enter first,
// so it may be launched with programmatic dependent launch
// (tuning.prefillPDL).
#include "common.cuh"  // listed for the PTX source hashes (step.cuh includes it)
#include "step.cuh"

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
	extern __shared__ float p[];
	const int t = blockIdx.x;
	router_topk_block(logits + (size_t)t * E, E, k, ids_out + (size_t)t * k, w_out + (size_t)t * k, p);
}

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

// tc_route_groups groups a batched prefill's routing by expert on the
// device (backend.DeviceRouting; runtime/cuda routed.go), so that the host
// need not read each layer's top-k back before the expert matmuls: ids
// [P] (router_topk_rows's) are the P = T x k routed experts of slots
// s = t x k + j. Pair p of
// the grouped order (experts in id order, each expert's slots increasing)
// gets tok[p] = s / k and slot[p] = s; iden[p] = p. The three tables
// [3][max_entries] (the gate, up and down matrices: the expert's record
// base bases[e] plus off0, off1, off2) hold an entry per tile pairs of
// each expert (tile: matmul_tc.cu's TC_BM), as runtime/cuda
// matmulTCGrouped writes them, then entries of count 0 up to max_entries
// (>= floor(P / tile) + min(E, P) covers any routing). A pair's products do not depend on which pairs share its
// entry, so the grouped kernels give it the bits of the host-built table.
// An id outside 0..E-1 is left out (the host's read back of the ids fails
// on it). One block of 1024 threads; E <= TC_ROUTE_EMAX.
#define TC_ROUTE_EMAX 256
extern "C" __global__ void __launch_bounds__(1024)
    tc_route_groups(const int* __restrict__ ids, int P, int k, int E, const unsigned long long* __restrict__ bases,
                    long long off0, long long off1, long long off2, int tile, int max_entries, int* tok, int* slot, int* iden,
                    tc_group* tab) {
	__shared__ int cnt[TC_ROUTE_EMAX], base[TC_ROUTE_EMAX + 1], ebase[TC_ROUTE_EMAX + 1];
	grid_dep_enter();
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
	for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
	__syncthreads();
	for (int s = tid; s < P; s += blockDim.x) {
		const int e = ids[s];
		if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
	}
	__syncthreads();
	if (tid == 0) {
		int p = 0, n = 0;
		for (int e = 0; e < E; e++) {
			base[e] = p, ebase[e] = n;
			p += cnt[e], n += (cnt[e] + tile - 1) / tile;
		}
		base[E] = p, ebase[E] = min(n, max_entries);
	}
	__syncthreads();
	const long long offs[3] = {off0, off1, off2};
	for (int e = warp; e < E; e += nw) {
		// Expert e's pairs in slot order: a ballot over each 32 slots.
		int run = base[e];
		for (int s0 = 0; s0 < P; s0 += 32) {
			const int s = s0 + lane;
			const bool m = s < P && ids[s] == e;
			const unsigned bal = __ballot_sync(0xffffffffu, m);
			if (m) {
				const int p = run + __popc(bal & ((1u << lane) - 1u));
				tok[p] = s / k;
				slot[p] = s;
			}
			run += __popc(bal);
		}
		// Its entries, a lane each.
		for (int c = lane; ebase[e] + c < ebase[e + 1] && c * tile < cnt[e]; c += 32) {
			const int n = ebase[e] + c;
			for (int w = 0; w < 3; w++)
				tab[w * max_entries + n] = tc_group{reinterpret_cast<const uint8_t*>(bases[e] + offs[w]), base[e] + c * tile,
				                                     min(tile, cnt[e] - c * tile)};
		}
	}
	for (int n = ebase[E] + tid; n < max_entries; n += blockDim.x)
		for (int w = 0; w < 3; w++) tab[w * max_entries + n] = tc_group{nullptr, 0, 0};
	for (int p = tid; p < P; p += blockDim.x) iden[p] = p;
}
