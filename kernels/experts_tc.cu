// experts_tc.cu: the routed experts of one decode token on the tensor cores
// (tuning.tcDecode, off by default: an experiment of issue 14; captured
// steps only). The same two launches and arguments as experts_grouped.cu's
// _t kernels for qpack-int4-b256-v1 records:
//
//	experts_gateup_int4_tc_t: act[k*F + i] = silu(G_k[i]·x') * (U_k[i]·x')   x' = RMSNorm(x)·w when nw is set
//	experts_down_int4_tc_t:   out[d] = (resid[d] +) sum over k in order of wts[k] * (D_k[d]·act_k)
//
// but each dot runs as mma.sync m16n8k16 (FP16 inputs, FP32 accumulators)
// instead of one FP32 FMA per weight. So the bits are not experts_grouped's:
// a build that turns this on gives other tokens than one that does not, and
// no other executor or step mode computes these bits.
//
// Arithmetic. An activation vector is split once per block, chunk by 32-value
// chunk, as matmul_tc does (tc_split8: a power-of-two shift 2^s from the
// chunk's largest magnitude, hi = fp16(v 2^s), lo = fp16(v 2^s - hi)). Weight
// codes u enter as the exact FP16 integers u - 8. A warp computes 16 matrix
// rows at once: lane (g, q), g = lane/4, q = lane%4, loads 16-byte chunks
// q, q+4, q+8, ... of rows g and g+8 (gate/up: gate row g and up row g of 8
// rows; down: 16 rows of one expert). The mma's B operand is diagonal: its
// column 2q holds the hi parts of lane-column q's chunk and column 2q+1 the
// lo parts, every other entry 0. So D[g][2q] and D[g][2q+1] are row g's hi
// and lo dots over that lane's own chunk, and they land in that lane's
// accumulators d0 and d1 (d2, d3 for row g+8): each lane keeps its chunks'
// sums apart, and scales them by the chunk's 2^-s and the 256-value block's
// scale as the FP32 path does:
//
//	acc = fma(scale, (d_hi + d_lo) * 2^-s, acc)         chunk by chunk, in order
//
// then the four lane-columns' accumulators are summed by two xor shuffles
// ((q0+q1)+(q2+q3) in every lane). A row's result depends on its own codes,
// scales and the activation vector alone, not on which rows share a warp.
//
// Dequantisation: a 32-bit word holds 8 codes (value 2j in the low nibble of
// byte j, 2j+1 in the high). w & 0x0F0F0F0F and w & 0xF0F0F0F0 (two LOP3)
// keep the even and odd codes in place; a PRMT with 0x64 bytes makes the
// FP16 pairs 1024 + u (even) and 1024 + 16u (odd), and one FP16 FMA per pair
// (x1 - 1032, x1/16 - 72) gives u - 8 exactly: 10 instructions for 8 weights,
// and one mma per 4 weights of each of two rows. The even codes (0, 2, 4, 6)
// of a word feed one mma and the odd codes the next, so the split staging
// stores each 8-value word's halves in the order 0, 2, 4, 6, 1, 3, 5, 7.
//
// Launches (blocks of 256 threads, 8 warps, 4 or 8 chunks a lane a step,
// two steps of loads in flight per warp as row_pipeline does; the tca4
// twins stream 3 steps ahead through shared memory by cp.async instead):
//   gate/up: a warp task is (expert k, rows i..i+7); tasks A*ceil(F/8),
//            blocks stride over them. x is staged (normalised when nw is set,
//            stage_one's bits), then split, in dynamic shared memory.
//   down:    a block owns 16 output rows and computes all A experts for
//            them (warp items (k, the 16 rows)), then combines them in k
//            order with add_scaled as experts_grouped does. All A act_k are
//            split into shared memory. With early the first weight loads go
//            out before grid_dep_enter (the table is two launches old).
#include "common.cuh"
#include "tc.cuh"

extern __shared__ __align__(16) float xs_smem[];

// TcdX is one split activation vector in shared memory: per 8-value word
// w (chunk w/4), its hi and lo halves in the order 0,2,4,6,1,3,5,7, and
// per chunk c its 2^-s.
struct TcdX {
	const uint4* hi;
	const uint4* lo;
	const float* inv;
};

// tcd_vec_bytes is the shared memory of one split vector of n values.
__host__ __device__ __forceinline__ int tcd_vec_bytes(int n) {
	const int nch = (n + 31) >> 5;
	return nch * 4 * 16 * 2 + ((nch * 4 + 15) & ~15);
}

__device__ __forceinline__ TcdX tcd_at(uint8_t* base, int n) {
	const int nch = (n + 31) >> 5;
	TcdX x;
	x.hi = reinterpret_cast<const uint4*>(base);
	x.lo = reinterpret_cast<const uint4*>(base + nch * 64);
	x.inv = reinterpret_cast<const float*>(base + nch * 128);
	return x;
}

// tcd_split splits nv vectors of n values into shared memory at dst
// (vector v at dst + v * tcd_vec_bytes(n)); val(v, i) is value i of vector
// v (i < n; 0 past it). Thread i of a pass takes word i: the four words of a
// chunk are neighbouring lanes, as tc_split8 needs, and every lane of the
// block runs every pass. It ends with a block barrier.
template <class Val>
__device__ __forceinline__ void tcd_split(uint8_t* dst, int nv, int n, Val val) {
	const int nch = (n + 31) >> 5, words = nch * 4, total = nv * words;
	const int vb = tcd_vec_bytes(n);
	for (int base = 0; base < total; base += blockDim.x) {
		const int i = base + threadIdx.x;
		const bool ok = i < total;
		const int v = ok ? i / words : 0, w = ok ? i - v * words : 0;
		const int k0 = 8 * w;  // value index of the word's first value (w = 4c + q)
		float raw[8];
#pragma unroll
		for (int j = 0; j < 8; j++) raw[j] = ok && k0 + j < n ? val(v, k0 + j) : 0.0f;
		const float pv[8] = {raw[0], raw[2], raw[4], raw[6], raw[1], raw[3], raw[5], raw[7]};
		unsigned h[4], l[4];
		const int s = tc_split8(pv, h, l);
		if (ok) {
			uint8_t* vbase = dst + (size_t)v * vb;
			reinterpret_cast<uint4*>(vbase)[w] = make_uint4(h[0], h[1], h[2], h[3]);
			reinterpret_cast<uint4*>(vbase + nch * 64)[w] = make_uint4(l[0], l[1], l[2], l[3]);
			if ((w & 3) == 0) reinterpret_cast<float*>(vbase + nch * 128)[w >> 2] = tc_pow2(-s);
		}
	}
	__syncthreads();
}

// tcd_codes is the FP16 pair (u_a - 8, u_b - 8) of the two nibbles of m
// (w masked to its even or odd nibbles) selected by sel (bytes a and b),
// exactly: odd nibbles sit 4 bits up, so their pair is 1024 + 16u and takes
// x1/16 - 72.
template <bool ODD>
__device__ __forceinline__ unsigned tcd_codes(unsigned m, unsigned sel) {
	const unsigned t = __byte_perm(m, 0x64646464u, sel);
#ifdef __CUDA_ARCH__
	const __half2 r = ODD ? __hfma2(*reinterpret_cast<const __half2*>(&t), __floats2half2_rn(0.0625f, 0.0625f),
	                                __floats2half2_rn(-72.0f, -72.0f))
	                      : __hsub2(*reinterpret_cast<const __half2*>(&t), __floats2half2_rn(1032.0f, 1032.0f));
	return *reinterpret_cast<const unsigned*>(&r);
#else
	__half h0, h1;
	h0.x = (unsigned short)(t & 0xffffu), h1.x = (unsigned short)(t >> 16);
	const float a = ODD ? __fmaf_rn(__half2float(h0), 0.0625f, -72.0f) : __half2float(h0) - 1032.0f;
	const float b = ODD ? __fmaf_rn(__half2float(h1), 0.0625f, -72.0f) : __half2float(h1) - 1032.0f;
	return tc_pack(__float2half_rn(a), __float2half_rn(b));
#endif
}

// TcdRows are a lane's two rows (g and g+8 of its warp's 16).
struct TcdRows {
	const uint8_t* q[2];
	const __half* sc[2];
};

__device__ __forceinline__ void tcd_row(TcdRows& r, int j, const uint8_t* mat, int row, int cols_padded, int scales_offset) {
	r.q[j] = mat + (size_t)row * (cols_padded >> 1);
	r.sc[j] = reinterpret_cast<const __half*>(mat + scales_offset) + (size_t)row * (cols_padded >> 8);
}

// TcdFrag holds a lane's loads of one step: chunks cb + q + 4u (u < U) of
// its two rows, and their block scales.
template <int U>
struct TcdFrag {
	uint4 w[U][2];
	float s[U][2];
};

template <int U>
__device__ __forceinline__ void tcd_load(TcdFrag<U>& f, const TcdRows& r, int cb, int nch) {
	const int q = threadIdx.x & 3;
#pragma unroll
	for (int u = 0; u < U; u++) {
		const int c = cb + q + 4 * u;
#pragma unroll
		for (int j = 0; j < 2; j++) {
			f.w[u][j] = make_uint4(0x88888888u, 0x88888888u, 0x88888888u, 0x88888888u);  // codes 8: zero
			f.s[u][j] = 0.0f;
			if (c < nch) {
				f.w[u][j] = ldg_stream(r.q[j] + 16 * (size_t)c);
				f.s[u][j] = __half2float(__ldg(r.sc[j] + (c >> 3)));
			}
		}
	}
}

// tcd_accum adds a step's chunks into the lane's two row accumulators. A
// chunk's 8 mma form one accumulation chain (words 0..3, even codes then
// odd); the loops issue the step's U chains side by side (word k's even mma
// of every chunk, then its odd ones), so no mma waits on the one just
// issued. Each chain keeps its order, and the chunks enter acc in order.
template <int U>
__device__ __forceinline__ void tcd_accum(float (&acc)[2], const TcdFrag<U>& f, const TcdX& x, int cb, int nch) {
	const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
	// role 0: this lane supplies B column 2q (hi), 1: column 2q+1 (lo), 2: zeros.
	const int role = g == 2 * q ? 0 : g == 2 * q + 1 ? 1 : 2;
	float d[U][4];
#pragma unroll
	for (int k = 0; k < 4; k++) {
		uint4 xv[U];
		unsigned og[U], ou[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int c = cb + q + 4 * u;
			xv[u] = make_uint4(0u, 0u, 0u, 0u);
			if (c < nch && role < 2) xv[u] = role == 0 ? x.hi[4 * c + k] : x.lo[4 * c + k];
			const unsigned wg = word_of(f.w[u][0], k), wu = word_of(f.w[u][1], k);
			og[u] = wg & 0xF0F0F0F0u, ou[u] = wu & 0xF0F0F0F0u;
			const unsigned eg = wg & 0x0F0F0F0Fu, eu = wu & 0x0F0F0F0Fu;
			// even codes: (0, 2) and (4, 6) of each row against B pairs (x0, x2), (x4, x6)
			const unsigned ae[4] = {tcd_codes<false>(eg, 0x5140u), tcd_codes<false>(eu, 0x5140u),
			                        tcd_codes<false>(eg, 0x5342u), tcd_codes<false>(eu, 0x5342u)};
			const unsigned be[2] = {xv[u].x, xv[u].y};
			if (k == 0)
				mma_16816_z(d[u], ae, be);
			else
				mma_16816(d[u], ae, be);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			// odd codes: (1, 3) and (5, 7) against (x1, x3), (x5, x7)
			const unsigned ao[4] = {tcd_codes<true>(og[u], 0x5140u), tcd_codes<true>(ou[u], 0x5140u),
			                        tcd_codes<true>(og[u], 0x5342u), tcd_codes<true>(ou[u], 0x5342u)};
			const unsigned bo[2] = {xv[u].z, xv[u].w};
			mma_16816(d[u], ao, bo);
		}
	}
#pragma unroll
	for (int u = 0; u < U; u++) {
		const int c = cb + q + 4 * u;
		const float inv = c < nch ? x.inv[c] : 0.0f;
		acc[0] = __fmaf_rn(f.s[u][0], __fmul_rn(__fadd_rn(d[u][0], d[u][1]), inv), acc[0]);
		acc[1] = __fmaf_rn(f.s[u][1], __fmul_rn(__fadd_rn(d[u][2], d[u][3]), inv), acc[1]);
	}
}

// tcd_finish ends task t: the four lane-columns' sums of each of the lane's
// two rows, (q0+q1)+(q2+q3) in every lane (two xor shuffles), go to
// tasks.emit, and the accumulators restart from zero.
template <class Tasks>
__device__ __forceinline__ void tcd_finish(const Tasks& tasks, int t, float (&acc)[2]) {
	float r0 = acc[0], r1 = acc[1];
	r0 = __fadd_rn(r0, __shfl_xor_sync(FULL_MASK, r0, 1));
	r1 = __fadd_rn(r1, __shfl_xor_sync(FULL_MASK, r1, 1));
	r0 = __fadd_rn(r0, __shfl_xor_sync(FULL_MASK, r0, 2));
	r1 = __fadd_rn(r1, __shfl_xor_sync(FULL_MASK, r1, 2));
	tasks.emit(t, r0, r1);
	acc[0] = acc[1] = 0.0f;
}

// tcd_pipeline is row_pipeline for 16-row warp tasks: a warp takes tasks
// t0, t0 + tstride, ...; each task's rows (tasks.rows(t)) against
// tasks.xs(t), in steps of 4U chunks, the loads of step s+1 issued before
// the mma of step s. The first step's loads go out before stage() (which
// every thread calls once). tasks.emit(t, r0, r1) gets the lane's two row
// results (every lane of a lane-row g holds the same).
template <int U, class Tasks, class Stage>
__device__ __forceinline__ void tcd_pipeline(const Tasks& tasks, int t0, int tstride, int nch, Stage stage) {
	constexpr int SPAN = 4 * U;
	const int nseg = (nch + SPAN - 1) / SPAN, ntasks = tasks.count();
	TcdFrag<U> cur, nxt;
	int t = t0, g = 0;
	TcdRows rw;
	if (t < ntasks) {
		rw = tasks.rows(t);
		tcd_load<U>(cur, rw, 0, nch);
	}
	stage();
	if (t >= ntasks) return;
	TcdX xs = tasks.xs(t);
	float acc[2] = {0.0f, 0.0f};
	auto step = [&](const TcdFrag<U>& comp, TcdFrag<U>& pre) -> bool {
		int tn = t, gn = g + 1;
		if (gn == nseg) gn = 0, tn += tstride;
		const bool more = tn < ntasks;
		const TcdRows rn = gn == 0 && more ? tasks.rows(tn) : rw;
		if (more) tcd_load<U>(pre, rn, gn * SPAN, nch);
		tcd_accum<U>(acc, comp, xs, g * SPAN, nch);
		if (g == nseg - 1) tcd_finish(tasks, t, acc);
		if (more) {
			t = tn, g = gn, rw = rn;
			if (g == 0) xs = tasks.xs(t);
		}
		return more;
	};
	while (step(cur, nxt) && step(nxt, cur)) {
	}
}

// tcq_stage_bytes is one step of one warp in tcq_pipeline's ring: the codes
// [U][2 rows][32 lanes] x 16 bytes, then the scale words [U][2][32] x 4.
template <int U>
__host__ __device__ constexpr int tcq_stage_bytes() {
	return U * 2 * 32 * 20;
}

// tcq_pipeline is tcd_pipeline with the weights streamed through a ring of S
// steps per warp in shared memory (ring: the warp's S * tcq_stage_bytes<U>()
// bytes) by cp.async, so S - 1 steps of every lane are in flight without
// holding registers. A lane reads back only what it copied itself, so the
// ring needs no barrier. A scale is copied as its aligned 4-byte word; par
// keeps which half each in-flight scale is (bit (slot, u, row)). The
// arithmetic is tcd_accum's: the same bits as tcd_pipeline.
template <int U, int S, class Tasks, class Stage>
__device__ __forceinline__ void tcq_pipeline(const Tasks& tasks, int t0, int tstride, int nch, uint8_t* ring, Stage stage) {
	static_assert(S * U * 2 <= 32, "par holds one bit per in-flight scale");
	constexpr int SPAN = 4 * U, SB = tcq_stage_bytes<U>();
	const int lane = threadIdx.x & 31, q = lane & 3;
	const int nseg = (nch + SPAN - 1) / SPAN, ntasks = tasks.count();
	const int mine = t0 < ntasks ? ((ntasks - 1 - t0) / tstride + 1) * nseg : 0;  // this warp's steps
	unsigned par = 0;
	auto issue = [&](int i) {
		if (i < mine) {
			const int t = t0 + (i / nseg) * tstride, cb = (i % nseg) * SPAN, slot = i % S;
			const TcdRows r = tasks.rows(t);
			uint8_t* st = ring + slot * SB;
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int c = cb + q + 4 * u;
				if (c < nch) {
#pragma unroll
					for (int j = 0; j < 2; j++) {
						const int e = (u * 2 + j) * 32 + lane;
						cp_async16(st + 16 * e, r.q[j] + 16 * (size_t)c);
						const uintptr_t a = reinterpret_cast<uintptr_t>(r.sc[j] + (c >> 3));
						cp_async4(st + U * 2 * 32 * 16 + 4 * e, reinterpret_cast<const void*>(a & ~(uintptr_t)3));
						const unsigned bit = 1u << (slot * U * 2 + u * 2 + j);
						par = (a & 2) ? (par | bit) : (par & ~bit);
					}
				}
			}
		}
		cp_async_commit();
	};
#pragma unroll
	for (int i = 0; i < S - 1; i++) issue(i);
	stage();
	float acc[2] = {0.0f, 0.0f};
	for (int i = 0; i < mine; i++) {
		issue(i + S - 1);
		cp_async_wait<S - 1>();
		const int t = t0 + (i / nseg) * tstride, g = i % nseg, slot = i % S;
		const uint8_t* st = ring + slot * SB;
		TcdFrag<U> f;
#pragma unroll
		for (int u = 0; u < U; u++) {
			const bool real = g * SPAN + q + 4 * u < nch;
#pragma unroll
			for (int j = 0; j < 2; j++) {
				const int e = (u * 2 + j) * 32 + lane;
				f.w[u][j] = *reinterpret_cast<const uint4*>(st + 16 * e);
				const unsigned wd = *reinterpret_cast<const unsigned*>(st + U * 2 * 32 * 16 + 4 * e);
				const unsigned short h = (par >> (slot * U * 2 + u * 2 + j)) & 1u ? (unsigned short)(wd >> 16) : (unsigned short)(wd & 0xffffu);
				__half hs;
				memcpy(&hs, &h, 2);
				f.s[u][j] = real ? __half2float(hs) : 0.0f;
			}
		}
		tcd_accum<U>(acc, f, tasks.xs(t), g * SPAN, nch);
		if (g == nseg - 1) tcd_finish(tasks, t, acc);
	}
	cp_async_wait<0>();
}

struct TcdGateUp {
	const GroupTable* tbl;
	float* act;
	TcdX x;
	int A, F, gate_off, up_off, cols_padded, scales_offset, per, k0;
	__device__ __forceinline__ int count() const { return A * per; }
	__device__ __forceinline__ TcdRows rows(int t) const {
		const int k = t / per, i = min((t - k * per) * 8 + (int)((threadIdx.x & 31) >> 2), F - 1);
		const uint8_t* rec = reinterpret_cast<const uint8_t*>(tbl->recs[k0 + k]);
		TcdRows r;
		tcd_row(r, 0, rec + gate_off, i, cols_padded, scales_offset);
		tcd_row(r, 1, rec + up_off, i, cols_padded, scales_offset);
		return r;
	}
	__device__ __forceinline__ TcdX xs(int) const { return x; }
	__device__ __forceinline__ void emit(int t, float gate, float up) const {
		if ((threadIdx.x & 3) != 0) return;
		const int k = t / per, i = (t - k * per) * 8 + ((threadIdx.x & 31) >> 2);
		if (i < F) act[(size_t)k * F + i] = silu_mul(gate, up);
	}
};

struct TcdDown {
	const GroupTable* tbl;
	uint8_t* xs_base;
	float* p;  // shared p[A][16]
	int A, D, F, down_off, cols_padded, scales_offset, d0, k0;
	__device__ __forceinline__ int count() const { return A; }
	__device__ __forceinline__ TcdRows rows(int k) const {
		const int g = (int)((threadIdx.x & 31) >> 2);
		const uint8_t* rec = reinterpret_cast<const uint8_t*>(tbl->recs[k0 + k]) + down_off;
		TcdRows r;
		tcd_row(r, 0, rec, min(d0 + g, D - 1), cols_padded, scales_offset);
		tcd_row(r, 1, rec, min(d0 + g + 8, D - 1), cols_padded, scales_offset);
		return r;
	}
	__device__ __forceinline__ TcdX xs(int k) const { return tcd_at(xs_base + (size_t)k * tcd_vec_bytes(F), F); }
	__device__ __forceinline__ void emit(int k, float r0, float r1) const {
		if ((threadIdx.x & 3) != 0) return;
		const int g = (int)((threadIdx.x & 31) >> 2);
		p[k * 16 + g] = r0;
		p[k * 16 + g + 8] = r1;
	}
};

// Dynamic shared memory: gate/up xs_floats(D) floats, then tcd_vec_bytes(D);
// down A * tcd_vec_bytes(F), then A*16 floats.
#define GATEUP_TC(U)                                                                                                    \
	extern "C" __global__ void __launch_bounds__(256, 1)                                                                \
	    experts_gateup_int4_tc##U##_t(float* act, const float* x, int A, int F, int D, int gate_off, int up_off,      \
	                                  int cols_padded, int scales_offset, const GroupTable* tbl, int k0, const void* nw, \
	                                  int nw_kind, float eps) {                                                         \
		const NormSpec nm{nw, nw_kind, eps};                                                                          \
		NormPre pre;                                                                                                  \
		pre.ok = false;                                                                                               \
		norm_preload(pre, nm, D);                                                                                     \
		grid_dep_enter();                                                                                             \
		uint8_t* split = reinterpret_cast<uint8_t*>(xs_smem + xs_floats(D));                                          \
		TcdGateUp tk;                                                                                                 \
		tk.tbl = tbl, tk.k0 = k0, tk.act = act, tk.A = A, tk.F = F, tk.gate_off = gate_off, tk.up_off = up_off;       \
		tk.cols_padded = cols_padded, tk.scales_offset = scales_offset, tk.per = (F + 7) / 8;                         \
		tk.x = tcd_at(split, D);                                                                                      \
		const int nw8 = blockDim.x >> 5, warp = threadIdx.x >> 5;                                                     \
		tcd_pipeline<U>(tk, blockIdx.x * nw8 + warp, gridDim.x * nw8, (D + 31) >> 5, [&] {                            \
			stage_one<false>(xs_smem, x, D, nm, &pre);                                                                \
			tcd_split(split, 1, D, [&](int, int i) { return xs_smem[xs_index(i)]; });                                 \
		});                                                                                                           \
	}

#define DOWN_TC(U)                                                                                                      \
	extern "C" __global__ void __launch_bounds__(256, 1)                                                                \
	    experts_down_int4_tc##U##_t(float* out, const float* act, int A, int D, int F, int down_off, int cols_padded, \
	                                int scales_offset, int tile_rows, const GroupTable* tbl, int k0, const float* resid,\
	                                int accumulate, int early) {                                                        \
		(void)tile_rows; /* always 16 */                                                                              \
		if (!early) grid_dep_enter();                                                                                 \
		uint8_t* split = reinterpret_cast<uint8_t*>(xs_smem);                                                         \
		TcdDown tk;                                                                                                   \
		tk.tbl = tbl, tk.k0 = k0, tk.xs_base = split, tk.A = A, tk.D = D, tk.F = F, tk.down_off = down_off;           \
		tk.cols_padded = cols_padded, tk.scales_offset = scales_offset, tk.d0 = blockIdx.x * 16;                      \
		tk.p = reinterpret_cast<float*>(split + (size_t)A * tcd_vec_bytes(F));                                        \
		const int warp = threadIdx.x >> 5;                                                                            \
		tcd_pipeline<U>(tk, warp, blockDim.x >> 5, (F + 31) >> 5, [&] {                                               \
			if (early) grid_dep_enter();                                                                              \
			tcd_split(split, A, F, [&](int v, int i) { return act_ldg(act + (size_t)v * F + i); });                  \
		});                                                                                                           \
		__syncthreads();                                                                                              \
		if (threadIdx.x < 16) {                                                                                       \
			const int d = tk.d0 + threadIdx.x;                                                                        \
			if (d < D) {                                                                                              \
				float acc = accumulate ? out[d] : 0.0f;                                                               \
				for (int k = 0; k < A; k++) acc = add_scaled(acc, tbl->wts[k0 + k], tk.p[k * 16 + threadIdx.x]);      \
				out[d] = resid != nullptr ? __fadd_rn(resid[d], acc) : acc;                                           \
			}                                                                                                         \
		}                                                                                                             \
	}

GATEUP_TC(4)
GATEUP_TC(8)
DOWN_TC(4)
DOWN_TC(8)

// The cp.async twins (tuning.tcDecode "tca4"): 4 chunks a lane a step, a ring
// of TCQ_S steps a warp after the split activations (dynamic shared memory:
// the _t kernel's, rounded up to 16 bytes, then 8 * TCQ_S *
// tcq_stage_bytes<4>()).
#define TCQ_S 4
extern "C" __global__ void __launch_bounds__(256, 1)
    experts_gateup_int4_tca4_t(float* act, const float* x, int A, int F, int D, int gate_off, int up_off, int cols_padded,
                               int scales_offset, const GroupTable* tbl, int k0, const void* nw, int nw_kind, float eps) {
	const NormSpec nm{nw, nw_kind, eps};
	NormPre pre;
	pre.ok = false;
	norm_preload(pre, nm, D);
	grid_dep_enter();
	uint8_t* split = reinterpret_cast<uint8_t*>(xs_smem + xs_floats(D));
	const int nw8 = blockDim.x >> 5, warp = threadIdx.x >> 5;
	uint8_t* ring = split + ((tcd_vec_bytes(D) + 15) & ~15) + (size_t)warp * TCQ_S * tcq_stage_bytes<4>();
	TcdGateUp tk;
	tk.tbl = tbl, tk.k0 = k0, tk.act = act, tk.A = A, tk.F = F, tk.gate_off = gate_off, tk.up_off = up_off;
	tk.cols_padded = cols_padded, tk.scales_offset = scales_offset, tk.per = (F + 7) / 8;
	tk.x = tcd_at(split, D);
	tcq_pipeline<4, TCQ_S>(tk, blockIdx.x * nw8 + warp, gridDim.x * nw8, (D + 31) >> 5, ring, [&] {
		stage_one<false>(xs_smem, x, D, nm, &pre);
		tcd_split(split, 1, D, [&](int, int i) { return xs_smem[xs_index(i)]; });
	});
}

extern "C" __global__ void __launch_bounds__(256, 1)
    experts_down_int4_tca4_t(float* out, const float* act, int A, int D, int F, int down_off, int cols_padded,
                             int scales_offset, int tile_rows, const GroupTable* tbl, int k0, const float* resid,
                             int accumulate, int early) {
	(void)tile_rows;  // always 16
	if (!early) grid_dep_enter();
	uint8_t* split = reinterpret_cast<uint8_t*>(xs_smem);
	const int warp = threadIdx.x >> 5;
	TcdDown tk;
	tk.tbl = tbl, tk.k0 = k0, tk.xs_base = split, tk.A = A, tk.D = D, tk.F = F, tk.down_off = down_off;
	tk.cols_padded = cols_padded, tk.scales_offset = scales_offset, tk.d0 = blockIdx.x * 16;
	tk.p = reinterpret_cast<float*>(split + (size_t)A * tcd_vec_bytes(F));
	uint8_t* ring = split + (((size_t)A * tcd_vec_bytes(F) + (size_t)A * 64 + 15) & ~(size_t)15) +
	                (size_t)warp * TCQ_S * tcq_stage_bytes<4>();
	tcq_pipeline<4, TCQ_S>(tk, warp, blockDim.x >> 5, (F + 31) >> 5, ring, [&] {
		if (early) grid_dep_enter();
		tcd_split(split, A, F, [&](int v, int i) { return act_ldg(act + (size_t)v * F + i); });
	});
	__syncthreads();
	if (threadIdx.x < 16) {
		const int d = tk.d0 + threadIdx.x;
		if (d < D) {
			float acc = accumulate ? out[d] : 0.0f;
			for (int k = 0; k < A; k++) acc = add_scaled(acc, tbl->wts[k0 + k], tk.p[k * 16 + threadIdx.x]);
			out[d] = resid != nullptr ? __fadd_rn(resid[d], acc) : acc;
		}
	}
}
