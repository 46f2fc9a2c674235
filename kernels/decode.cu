// decode.cu: the kernels of a captured decode step (runtime/cuda/step.go).
//
// A CUDA graph replays fixed kernel parameters, so what changes from one
// step to the next is read from device memory instead: the step state
// st[0] = token, st[1] = position (written by step_set before a prefill
// step, advanced by argmax_step after a decode step), and the routed group
// of each layer (written by route_step: ids, renormalised weights and, at
// full residency, the rows' addresses gathered from the layer's device
// table). The arithmetic is step.cuh's and experts_grouped.cu's, shared
// with the op-by-op kernels, so a captured step gives the same bits. The
// bodies are in decode.cuh, shared with the persistent decode kernel
// (persistent.cu); each kernel here runs its body as a launched block.
//
// Results the host needs (the routed ids of each layer, the next token) go
// to mapped pinned memory followed by a system-scope fence and a flag the
// host polls.
#include "common.cuh"  // listed for the PTX source hashes (decode.cuh includes them)
#include "step.cuh"
#include "decode.cuh"

// step_set: st[0] = tok, st[1] = pos. One thread.
extern "C" __global__ void step_set(int* st, int tok, int pos) { grid_dep_enter();
	st[0] = tok;
	st[1] = pos;
}

extern "C" __global__ void embed_step(float* dst, const void* table, int kind, const int* st, int D) { grid_dep_enter(); embed_step_body(dst, table, kind, st, D, launched_grid()); }

extern "C" __global__ void __launch_bounds__(256) qk_norm_step(float* q, float* k, const void* qw, const void* kw,
                                                              int w_kind, int nq, int gq, int gk, float eps) { grid_dep_enter(); qk_norm_step_body(q, k, qw, kw, w_kind, nq, gq, gk, eps, launched_grid()); }

// attention_b3_step (tuning.attB3) is attention_step compiled for three
// blocks an SM (at most 85 registers a thread) instead of two, so that an
// SM holding something else still takes two of a launch's blocks: the
// same code, so the same bits.
//
// attention_cs_step (the captured steps' attention since session 29;
// tuning.noAttStream: attention_step) is attention_step with its K/V loads
// streaming (ld.global.cs: evict-first in L1 and L2), so that a deep
// cache's one-pass read does not push the lines the rest of the layer
// reuses out of L2: the same arithmetic, so the same bits.
//
// attention_trace_step (tuning.attTrace, a measuring aid) is
// attention_cs_step (the default's streaming loads) that also records, per block, four values at trace[4·bid]: %globaltimer
// (ns) at its entry and after its dependency wait, %globaltimer at its end,
// and (%smid << 32) | the SM cycles from the wait to the end. So a step's
// attention launches show on the device's clock when each block became
// resident, started, ended and where it ran, without an event node in the
// graph. The arithmetic is attention_step's: the same bits. (Before
// session 29 it mirrored attention_step's loads.)
__device__ __forceinline__ unsigned long long att_trace_now() {
	unsigned long long t = 0;
#ifdef __CUDA_ARCH__
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
#endif
	return t;
}
__device__ __forceinline__ void att_trace_block(unsigned long long* trace, unsigned long long t_in, unsigned long long t_go,
                                                long long c0) {
	unsigned sm = 0;
#ifdef __CUDA_ARCH__
	asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
#endif
	const unsigned long long cyc = (unsigned long long)(clock64() - c0) & 0xffffffffull;
	unsigned long long* t = trace + 4 * (size_t)blockIdx.x;
	t[0] = t_in;
	t[1] = t_go;
	t[2] = att_trace_now();
	t[3] = ((unsigned long long)sm << 32) | cyc;
}

// The kernels that store or read the KV cache, once per cache element type
// KV: over an FP32 cache (no suffix) and over an FP16 one (_kv16: what they
// store is rounded to binary16 by kv_st, what they read is converted back
// exactly by kv_ld4; the rest is the FP32 kernels' arithmetic, so they give
// the op-by-op FP16 path's bits: kv_append_f16, attention_f32_kv16).
#define DECODE_KV_KERNELS(SUF, KV)                                                                                          \
	extern "C" __global__ void rope_kv_step##SUF(float* q, const float* k, const float* v, KV* kc, KV* vc, int nh, int nkv, \
	                                             int hd, const int* st, double theta) {                                    \
		rope_kv_step_body(q, k, v, kc, vc, nh, nkv, hd, st, theta, launched_grid(), true);                                   \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256)                                                                      \
	    qk_norm_rope_kv_step##SUF(float* qo, const float* q, const float* k, const float* v, KV* kc, KV* vc, const void* qw, \
	                              const void* kw, int w_kind, int nh, int nkv, int hd, int gq, int gk, const int* st,       \
	                              double theta, float eps) {                                                               \
		qk_norm_rope_kv_step_body(qo, q, k, v, kc, vc, qw, kw, w_kind, nh, nkv, hd, gq, gk, st, theta, eps, launched_grid(),  \
		                          true);                                                                                   \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256) attention_step##SUF(float* dst, float* part, unsigned* cnt,           \
	                                                                      const float* q, const KV* kc, const KV* vc,     \
	                                                                      const int* st, int n_heads, int n_kv, int hd) { \
		grid_dep_enter();                                                                                                  \
		attention_step_body(dst, part, cnt, q, kc, vc, st, n_heads, n_kv, hd, launched_grid());                            \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256)                                                                      \
	    attention_pf_step##SUF(float* dst, float* part, unsigned* cnt, const float* q, const KV* kc, const KV* vc,          \
	                           const int* st, int n_heads, int n_kv, int hd, int rows) {                                   \
		att_prefetch_l2(kc, vc, st, n_heads, n_kv, hd, rows, launched_grid().bid);                                         \
		grid_dep_enter();                                                                                                  \
		attention_step_body(dst, part, cnt, q, kc, vc, st, n_heads, n_kv, hd, launched_grid());                            \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256)                                                                      \
	    attention_pipe_step##SUF(float* dst, float* part, unsigned* cnt, const float* q, const KV* kc, const KV* vc,        \
	                             const int* st, int n_heads, int n_kv, int hd, int rows) {                                 \
		if (rows > 0) att_prefetch_l2(kc, vc, st, n_heads, n_kv, hd, rows, launched_grid().bid);                            \
		grid_dep_enter();                                                                                                  \
		attention_step_body<KV, true>(dst, part, cnt, q, kc, vc, st, n_heads, n_kv, hd, launched_grid());                  \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256, 3)                                                                   \
	    attention_b3_step##SUF(float* dst, float* part, unsigned* cnt, const float* q, const KV* kc, const KV* vc,          \
	                           const int* st, int n_heads, int n_kv, int hd) {                                             \
		grid_dep_enter();                                                                                                  \
		attention_step_body(dst, part, cnt, q, kc, vc, st, n_heads, n_kv, hd, launched_grid());                            \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256)                                                                      \
	    attention_trace_step##SUF(float* dst, float* part, unsigned* cnt, const float* q, const KV* kc, const KV* vc,       \
	                              const int* st, int n_heads, int n_kv, int hd, unsigned long long* trace) {               \
		const unsigned long long t_in = att_trace_now();                                                                  \
		grid_dep_enter();                                                                                                  \
		const unsigned long long t_go = att_trace_now();                                                                  \
		const long long c0 = clock64();                                                                                    \
		attention_step_body<KV, false, false, true>(dst, part, cnt, q, kc, vc, st, n_heads, n_kv, hd, launched_grid());    \
		if (threadIdx.x == 0) att_trace_block(trace, t_in, t_go, c0);                                                      \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256)                                                                      \
	    attention_cs_step##SUF(float* dst, float* part, unsigned* cnt, const float* q, const KV* kc, const KV* vc,          \
	                           const int* st, int n_heads, int n_kv, int hd) {                                             \
		grid_dep_enter();                                                                                                  \
		attention_step_body<KV, false, false, true>(dst, part, cnt, q, kc, vc, st, n_heads, n_kv, hd, launched_grid());    \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256)                                                                      \
	    attention_ring_step##SUF(float* dst, float* part, unsigned* cnt, const float* q, const KV* kc, const KV* vc,        \
	                             const int* st, int n_heads, int n_kv, int hd) {                                           \
		grid_dep_enter();                                                                                                  \
		attention_step_body<KV, false, true>(dst, part, cnt, q, kc, vc, st, n_heads, n_kv, hd, launched_grid());           \
	}                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256)                                                                      \
	    attention_in_step##SUF(float* dst, float* part, unsigned* cnt, const float* q, const float* k, const float* v,      \
	                           KV* kc, KV* vc, const void* qw, const void* kw, int w_kind, int n_heads, int n_kv, int hd,  \
	                           int gq, int gk, const int* st, double theta, float eps) {                                   \
		grid_dep_enter();                                                                                                  \
		attention_in_step_body(dst, part, cnt, q, k, v, kc, vc, qw, kw, w_kind, n_heads, n_kv, hd, gq, gk, st, theta, eps,  \
		                       launched_grid());                                                                           \
	}

DECODE_KV_KERNELS(, float)
DECODE_KV_KERNELS(_kv16, __half)

extern "C" __global__ void __launch_bounds__(32) route_step(const float* logits, int E, int k, int norm,
                                                           const volatile unsigned long long* table, GroupTable* tbl,
                                                           int* need, int* ids_out, volatile int* flag,
                                                           const int* copy_src, int* copy_dst, int copy_n) { grid_dep_enter(); route_step_body(logits, E, k, norm, table, tbl, need, ids_out, flag, copy_src, copy_dst, copy_n); }

// router_route_step: the router matvec (matvec_f16_r1_s's body: logits =
// W[E, D] · RMSNorm(x)·nw, staged) and route_step in one launch. Each block
// computes its rows; the last block to finish (ticket, reset by that block)
// runs route_step's body on its first warp, so the routing starts without
// a kernel boundary. The bits are the two launches'. Dynamic shared memory:
// xs_floats(D)*4 bytes.
extern "C" __global__ void __launch_bounds__(256, 2)
    router_route_step(float* logits, const __half* W, const float* x, int E, int D, const void* nw, int nw_kind,
                      float eps, unsigned* ticket, int k, int norm, const volatile unsigned long long* table,
                      GroupTable* tbl, int* need, int* ids_out, volatile int* flag, const int* copy_src,
                      int* copy_dst, int copy_n) {
	extern __shared__ __align__(16) float rsm[];
	__shared__ int last;
	matvec_body<F16Fmt, 1, 8, true, true>(rsm, logits, reinterpret_cast<const uint8_t*>(W), x, nullptr, 0, E, D, 0, 0,
	                                      NormSpec{nw, nw_kind, eps}, launched_grid());
	__threadfence();  // this block's logits, before its ticket
	__syncthreads();
	if (threadIdx.x == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
	__syncthreads();
	if (!last || threadIdx.x >= 32) return;
	__threadfence();
	if (threadIdx.x == 0) *ticket = 0;
	route_step_body(logits, E, k, norm, table, tbl, need, ids_out, flag, copy_src, copy_dst, copy_n);
}

extern "C" __global__ void __launch_bounds__(1024) argmax_step(const float* logits, int n, const int* masked, int nm,
                                                              int* st, int* part, unsigned* ticket, int* tok_host,
                                                              volatile int* flag) { grid_dep_enter(); argmax_step_body(logits, n, masked, nm, st, part, ticket, tok_host, flag, launched_grid()); }

extern "C" __global__ void add_gated_resid_step(float* x, const float* d, const float* s, const float* g, int n) { grid_dep_enter(); add_gated_resid_step_body(x, d, s, g, n, launched_grid()); }

// await_step is how a graph-wait step gets rows the cache had to load
// (runtime/cuda/step.go). route_step gave the layer a miss ticket T =
// need[0] > 0 when some routed expert was not resident; then lane 0 polls
// the host's answer ready[0] (mapped host memory) until it reaches T, which
// the host writes after publishing the missing rows and writing the group's
// row addresses to fix (mapped), and the lanes copy fix[0..A) into
// tbl->recs, where the layer's expert kernels read them. One lane polls,
// with a pause between reads, so the polling adds almost no PCIe traffic
// to the copies it waits for. ready[1] (abort, set by the host) or no
// answer within AWAIT_TIMEOUT_NS traps: the step fails rather than reading
// a row that is not there. With T = 0 it returns at once. Launch: 1 block
// of 32 threads.
#define AWAIT_TIMEOUT_NS 30000000000ull
extern "C" __global__ void __launch_bounds__(32) await_step(const int* need, const volatile int* ready,
                                                           const volatile unsigned long long* fix, GroupTable* tbl,
                                                           int A) { grid_dep_enter();
	const int ticket = need[0];
	if (ticket == 0) return;
	if (threadIdx.x == 0) {
		unsigned long long t0, t;
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
		while (ready[1] == 0 && ready[0] - ticket < 0) {
			__nanosleep(1000);
			asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
			if (t - t0 > AWAIT_TIMEOUT_NS) __trap();
		}
		if (ready[1] != 0) __trap();
	}
	__syncwarp();
	for (int k = threadIdx.x; k < A; k += blockDim.x) tbl->recs[k] = fix[k];
}

// argmax_step: the argmax of logits[n] with the masked ids excluded, in
// two levels: each block finds its chunk's best (argmax_block's scan and
// combine), the last block to finish (a fenced atomic ticket) combines the
// blocks' results. (value desc, index asc) is a total order, so the result
// is argmax_block's over the whole vector. The last block sets st[0] = the
// token, advances st[1], writes the token to tok_host (mapped), then a
// system fence and *flag = 1, and resets the ticket. part holds one int per
// block; ticket starts at 0; at most ARGMAX_MAX_MASKED masked ids. Launch:
// G blocks of 1024 threads.
