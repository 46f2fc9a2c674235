// chain.cu: issue 14's probe of a persistent decode step, for benchmarks
// only (runtime/cuda BenchmarkChain, TestChainMatVec); the engine does not
// use it.
//
// chain_matvec_f16 runs a program of dependent FP16 matvecs in one launch,
// one block an SM:
//
//	y_i[rows_i] = W_i[rows_i, cols_i] · x_i[cols_i]   (FP32 x and y, FP32 sums)
//
// where x_i is usually y_dep(i): op i starts only once every block has
// finished op dep(i), a counter in device memory (done[dep]), not a kernel
// boundary. Block b owns rows [rows·b/G, rows·(b+1)/G) of every op. Its rows
// are cut into tiles of at most CHAIN_PAGE bytes, and the block walks its
// tiles of all ops in program order through a ring of CHAIN_STAGES
// shared-memory pages filled by cp.async: while it computes tile t, tiles
// t+1 .. t+CHAIN_STAGES-1 may be copying. Weights are never written by the
// program, so which tiles may be copying ahead is the strategy (mode):
//
//	CHAIN_ACROSS   2  any tile: the next op's rows stream in while the block
//	                  waits for that op's dependency (the persistent design:
//	                  a boundary costs no weight latency)
//	CHAIN_PDL      1  only the current op's tiles, issued before its
//	                  dependency wait (what a programmatic dependent launch
//	                  can do: its first loads overlap the kernel ahead)
//	CHAIN_PLAIN    0  only the current op's tiles, after its dependency wait
//	                  (a plain launch: the boundary costs a full ramp)
//
// A tile's rows are dotted one row a warp (lane j takes 8 columns from
// 8·j, step 256; x in registers for up to 2,048 columns, CHAIN_REGX) and
// reduced by shuffles, so the sums' order depends on cols only, not on the
// mode or the grid. Latency ops (ChainOp) stand for the instructions of a
// step that read no weights: across them the ring keeps streaming.
//
// The counters are never reset: a launch is passed their value before it
// (base, the same for every op) and waits for done[dep] to reach base plus
// what one launch adds (G blocks).
// Needs cols % 8 == 0, 16-byte aligned W rows, cols <= CHAIN_XMAX and
// 2·cols <= CHAIN_PAGE; runtime/cuda checks them. chain_matvec_f16_s6 is
// the same body with a sixth page (cols <= CHAIN6_XMAX),
// chain_matvec_f16_p64 with three 64 KB pages (two rows a warp), and
// chain_matvec_f16_t512 with 512 threads. With a trace
// buffer each block also records, per op, the SM cycles it waited for the
// op's dependency and the cycles its tiles took (chain_body).
#include "common.cuh"

#define CHAIN_PAGE 32768
#define CHAIN_STAGES 5
#define CHAIN_XMAX 8192
#define CHAIN_THREADS 256
#define CHAIN_SMEM (CHAIN_STAGES * CHAIN_PAGE + CHAIN_XMAX * 4)
// chain_matvec_f16_s6: a sixth page, x at most 4,096 values (208 KB).
#define CHAIN6_STAGES 6
#define CHAIN6_XMAX 4096

#define CHAIN_PLAIN 0
#define CHAIN_PDL 1
#define CHAIN_ACROSS 2

// ChainOp is runtime/cuda's chainOp (48 bytes). An op without weights
// (w == nullptr, rows 1) is a latency op: the block that owns its row
// spins spin nanoseconds after its dependency wait (a stand-in for an
// instruction that reads no weights, such as route or attention at a short
// context), and its completion counts like any op's.
struct ChainOp {
	const __half* w;  // [rows, cols] FP16, row-major; nullptr: a latency op
	const float* x;   // [cols]; nullptr for a latency op
	float* y;         // [rows]
	int rows, cols;
	int dep;   // op whose every block must finish first; -1: none
	int rpt;   // rows a tile: CHAIN_PAGE / (2 cols)
	int spin;  // a latency op's nanoseconds
	int excl;  // blocks at the grid's end that own none of this op's rows (a block kept for latency ops)
};

// ChainCur walks one block's tiles in program order: op i, next row r, the
// block's row end e (r < e while i < n).
struct ChainCur {
	int i, r, e;
};

// chain_share sets [r, e) to unit u's rows of op: rows split evenly over
// the first units - excl·per units (per units a block: 1, or its warps),
// none for the units after them.
__device__ __forceinline__ void chain_share(ChainCur& c, const ChainOp* op, int u, int units, int per) {
	const long long rows = __ldg(&op->rows);
	const int owners = max(units - __ldg(&op->excl) * per, 1);
	if (u >= owners) {
		c.r = c.e = 0;
		return;
	}
	c.r = (int)(rows * u / owners);
	c.e = (int)(rows * (u + 1) / owners);
}

// chain_seek moves c to the first op >= c.i in which this block owns rows
// (c.i == n when none is left).
__device__ __forceinline__ void chain_seek(ChainCur& c, const ChainOp* ops, int n) {
	for (; c.i < n; c.i++) {
		chain_share(c, &ops[c.i], blockIdx.x, gridDim.x, 1);
		if (c.r < c.e) return;
	}
}

// mul: the build's page over CHAIN_PAGE (its tiles hold mul·rpt rows).
__device__ __forceinline__ void chain_next(ChainCur& c, const ChainOp* ops, int n, int mul) {
	c.r += mul * __ldg(&ops[c.i].rpt);
	if (c.r < c.e) return;
	c.i++;
	chain_seek(c, ops, n);
}

// chain_issue starts copying tile c into page p: its rows are contiguous
// (a latency op's tile is an empty copy group).
__device__ __forceinline__ void chain_issue(const ChainCur& c, const ChainOp* ops, __half* page, int mul) {
	const __half* w = ops[c.i].w;
	if (w != nullptr) {
		const int cols = __ldg(&ops[c.i].cols);
		const int nr = min(mul * __ldg(&ops[c.i].rpt), c.e - c.r);
		const uint4* src = reinterpret_cast<const uint4*>(w + (size_t)c.r * cols);
		uint4* dst = reinterpret_cast<uint4*>(page);
		const int n16 = nr * cols / 8;
		for (int j = threadIdx.x; j < n16; j += blockDim.x) cp_async16z(dst + j, src + j, true);
	}
	cp_async_commit();
}

// chain_spin keeps the calling thread busy for ns nanoseconds of the global
// timer (a latency op).
__device__ __forceinline__ void chain_spin(int ns) {
#ifdef __CUDA_ARCH__
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while ((long long)(t - t0) < ns);
#endif
}

// CHAIN_REGX: a row of at most CHAIN_REGX·256 columns (and a multiple of
// 256) is dotted with x held in registers, lane j keeping columns 8j + 256k:
// its words are loaded together, and two sums alternate over k.
#define CHAIN_REGX 8

// chain_wait_tile waits until at most `pending` of this thread's copy
// groups are in flight (0 .. STAGES-1).
template <int STAGES>
__device__ __forceinline__ void chain_wait_tile(int pending) {
	switch (pending) {
	case 0: cp_async_wait<0>(); break;
	case 1: cp_async_wait<1>(); break;
	case 2: cp_async_wait<2>(); break;
	case 3: cp_async_wait<3>(); break;
	case 4: cp_async_wait<4>(); break;
	default: cp_async_wait<STAGES - 1>(); break;
	}
}

// chain_signal marks ops [from, to) done by this block: the caller
// synchronised the block after its last store to them.
__device__ __forceinline__ void chain_signal(unsigned* done, int from, int to) {
	if (threadIdx.x == 0 && from < to) {
		__threadfence();
		for (int j = from; j < to; j++) atomicAdd(&done[j], 1u);
	}
}

// With trace (else nullptr), thread 0 of each block writes per op i it owns
// rows of: trace[2(i·G + b)] = SM cycles from entering op i to the end of
// its dependency wait, trace[2(i·G + b) + 1] = cycles from there to its
// signal (its tiles' copies and dots).
// chain_dot_rows dots R rows of a page (r, r + nw, ...) with x held in
// registers (lane j's columns 8j + 256k, k < K), the rows' loads issued
// together, two sums alternating over k for each row, and writes y[row].
// The sums' order is a row's own whatever R, so the bits do not depend on
// the page.
template <int R>
__device__ __forceinline__ void chain_dot_rows(const __half* page, int cols, int K, int r, int nw, int lane,
                                               const float (&xr)[CHAIN_REGX][8], float* y) {
	uint4 q[R][CHAIN_REGX];
#pragma unroll
	for (int k = 0; k < CHAIN_REGX; k++)
		if (k < K)
#pragma unroll
			for (int i = 0; i < R; i++) q[i][k] = *reinterpret_cast<const uint4*>(page + (size_t)(r + i * nw) * cols + lane * 8 + 256 * k);
	float s[R][2];
#pragma unroll
	for (int i = 0; i < R; i++) s[i][0] = s[i][1] = 0.0f;
#pragma unroll
	for (int k = 0; k < CHAIN_REGX; k++)
		if (k < K) {
#pragma unroll
			for (int j = 0; j < 4; j++)
#pragma unroll
				for (int i = 0; i < R; i++) {
					const float2 f = __half22float2(reinterpret_cast<const __half2*>(&q[i][k])[j]);
					s[i][k & 1] = __fmaf_rn(f.x, xr[k][2 * j], s[i][k & 1]);
					s[i][k & 1] = __fmaf_rn(f.y, xr[k][2 * j + 1], s[i][k & 1]);
				}
		}
	float acc[R];
#pragma unroll
	for (int i = 0; i < R; i++) acc[i] = s[i][0] + s[i][1];
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
#pragma unroll
		for (int i = 0; i < R; i++) acc[i] += __shfl_xor_sync(FULL_MASK, acc[i], o);
	if (lane == 0)
#pragma unroll
		for (int i = 0; i < R; i++) y[r + i * nw] = acc[i];
}

template <int STAGES, int PAGE = CHAIN_PAGE>
__device__ __forceinline__ void chain_body(const ChainOp* __restrict__ ops, int n, unsigned* done, unsigned base, int mode,
                                           long long* trace) {
	extern __shared__ __align__(16) unsigned char xs_smem[];
	constexpr int mul = PAGE / CHAIN_PAGE;
	__half* ring = reinterpret_cast<__half*>(xs_smem);
	float* xs = reinterpret_cast<float*>(xs_smem + STAGES * PAGE);
	const unsigned want = base + gridDim.x;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;

	ChainCur cc{0, 0, 0}, ic;  // the tile to compute, the next tile to issue
	chain_seek(cc, ops, n);
	ic = cc;
	int t = 0, ni = 0;  // tile index of cc, tiles issued (each its own copy group)
	int xop = -1, sig = 0;  // the op whose x is staged, the first op not yet signalled
	long long t_enter = 0, t_ready = 0;
	float xr[CHAIN_REGX][8];  // the register path's x (CHAIN_REGX)
	while (cc.i < n) {
		__syncthreads();  // every warp finished tile t-1: its page and xs are free
		if (mode != CHAIN_PLAIN)
			for (; ic.i < n && ni < t + STAGES && (mode == CHAIN_ACROSS || ic.i == cc.i); ni++) {
				chain_issue(ic, ops, ring + (size_t)(ni % STAGES) * (PAGE / 2), mul);
				chain_next(ic, ops, n, mul);
			}
		const bool enter = cc.i != xop;
		if (enter) {
			if (trace != nullptr && threadIdx.x == 0) {
				t_enter = clock64();
				if (xop >= 0) trace[2 * ((size_t)xop * gridDim.x + blockIdx.x) + 1] = t_enter - t_ready;
			}
			chain_signal(done, sig, cc.i);  // every op before cc.i is done here
			sig = cc.i;
			const int dep = __ldg(&ops[cc.i].dep);
			if (dep >= 0 && threadIdx.x == 0)
				while ((int)(ld_acquire(&done[dep]) - want) < 0) __nanosleep(32);
			__syncthreads();
			if (trace != nullptr && threadIdx.x == 0) {
				t_ready = clock64();
				trace[2 * ((size_t)cc.i * gridDim.x + blockIdx.x)] = t_ready - t_enter;
			}
		}
		if (mode == CHAIN_PLAIN)
			for (; ic.i < n && ni < t + STAGES && ic.i == cc.i; ni++) {
				chain_issue(ic, ops, ring + (size_t)(ni % STAGES) * (PAGE / 2), mul);
				chain_next(ic, ops, n, mul);
			}
		const int cols = __ldg(&ops[cc.i].cols);
		const ChainOp* op = &ops[cc.i];
		if (enter) {
			const float* x = op->x;
			if (x != nullptr)
				for (int c = threadIdx.x; c < cols; c += blockDim.x) xs[c] = __ldcg(x + c);  // another block wrote it
			xop = cc.i;
		}
		chain_wait_tile<STAGES>(ni - t - 1);
		__syncthreads();  // tile t and xs visible to every thread

		const int K = cols % 256 == 0 && cols <= CHAIN_REGX * 256 ? cols / 256 : 0;  // the register path's words a lane
		if (enter && K > 0 && op->x != nullptr) {
#pragma unroll
			for (int k = 0; k < CHAIN_REGX; k++)
				if (k < K) {
					const float4 a = *reinterpret_cast<const float4*>(xs + lane * 8 + 256 * k);
					const float4 b = *reinterpret_cast<const float4*>(xs + lane * 8 + 256 * k + 4);
					xr[k][0] = a.x, xr[k][1] = a.y, xr[k][2] = a.z, xr[k][3] = a.w;
					xr[k][4] = b.x, xr[k][5] = b.y, xr[k][6] = b.z, xr[k][7] = b.w;
				}
		}
		if (op->w == nullptr) {
			if (threadIdx.x == 0) chain_spin(__ldg(&op->spin));
		} else {
			const __half* page = ring + (size_t)(t % STAGES) * (PAGE / 2);
			const int nr = min(mul * __ldg(&op->rpt), cc.e - cc.r);
			float* y = op->y;
			if (K > 0) {
				// Rows r and r + nw together (a 64 KB page's 16 rows: two a warp), each
				// with the single row's sums, so the bits do not depend on the page.
				for (int r = warp; r < nr; r += 2 * nw) {
					if (r + nw < nr) {
						chain_dot_rows<2>(page, cols, K, r, nw, lane, xr, y + cc.r);
					} else {
						chain_dot_rows<1>(page, cols, K, r, nw, lane, xr, y + cc.r);
					}
				}
			} else {
				for (int r = warp; r < nr; r += nw) {
					const __half* row = page + (size_t)r * cols;
					float acc = 0.0f;
					for (int c = lane * 8; c < cols; c += 256) {
						const uint4 q = *reinterpret_cast<const uint4*>(row + c);
						const float4 xa = *reinterpret_cast<const float4*>(xs + c);
						const float4 xb = *reinterpret_cast<const float4*>(xs + c + 4);
						const __half2* h = reinterpret_cast<const __half2*>(&q);
						const float2 h0 = __half22float2(h[0]), h1 = __half22float2(h[1]);
						const float2 h2 = __half22float2(h[2]), h3 = __half22float2(h[3]);
						acc = __fmaf_rn(h0.x, xa.x, acc);
						acc = __fmaf_rn(h0.y, xa.y, acc);
						acc = __fmaf_rn(h1.x, xa.z, acc);
						acc = __fmaf_rn(h1.y, xa.w, acc);
						acc = __fmaf_rn(h2.x, xb.x, acc);
						acc = __fmaf_rn(h2.y, xb.y, acc);
						acc = __fmaf_rn(h3.x, xb.z, acc);
						acc = __fmaf_rn(h3.y, xb.w, acc);
					}
#pragma unroll
					for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, o);
					if (lane == 0) y[cc.r + r] = acc;
				}
			}
		}
		chain_next(cc, ops, n, mul);
		t++;
	}
	__syncthreads();
	if (trace != nullptr && threadIdx.x == 0 && xop >= 0) trace[2 * ((size_t)xop * gridDim.x + blockIdx.x) + 1] = clock64() - t_ready;
	chain_signal(done, sig, n);
}

extern "C" __global__ void __launch_bounds__(CHAIN_THREADS, 1)
    chain_matvec_f16(const ChainOp* __restrict__ ops, int n, unsigned* done, unsigned base, int mode, long long* trace) {
	chain_body<CHAIN_STAGES>(ops, n, done, base, mode, trace);
}

extern "C" __global__ void __launch_bounds__(CHAIN_THREADS, 1)
    chain_matvec_f16_s6(const ChainOp* __restrict__ ops, int n, unsigned* done, unsigned base, int mode, long long* trace) {
	chain_body<CHAIN6_STAGES>(ops, n, done, base, mode, trace);
}

// chain_matvec_f16_p64: three 64 KB pages (16 rows of 2,048 columns a
// tile, two a warp), x at most 8,192 values (224 KB).
extern "C" __global__ void __launch_bounds__(CHAIN_THREADS, 1)
    chain_matvec_f16_p64(const ChainOp* __restrict__ ops, int n, unsigned* done, unsigned base, int mode, long long* trace) {
	chain_body<3, 2 * CHAIN_PAGE>(ops, n, done, base, mode, trace);
}

// chain_matvec_f16_t512: chain_matvec_f16 with 16 warps (each copies half
// as many pieces of a tile; 8 of them compute, one row each).
extern "C" __global__ void __launch_bounds__(2 * CHAIN_THREADS, 1)
    chain_matvec_f16_t512(const ChainOp* __restrict__ ops, int n, unsigned* done, unsigned base, int mode, long long* trace) {
	chain_body<CHAIN_STAGES>(ops, n, done, base, mode, trace);
}

// chain_matvec_f16_regs: the same program without shared memory, every warp
// on its own. The rows of each op are split over all G·8 warps; a warp
// keeps its next two rows' words in registers (ldg_stream), loaded before
// it waits for the next op's dependency, so a boundary costs no weight
// latency (the across strategy: mode is not read). A warp waits on and
// signals the counters itself (chainw_signal: done has n·(1 + G) counters,
// done[op] counting blocks as in the other builds), stages x in registers
// straight from global memory, and dots each row as chain_dot_rows<1> does
// (the same bits). Rows of at most CHAIN_REGX·256 columns, a multiple of
// 256 (runtime/cuda checks them). The trace holds warp 0's cycles of each
// block.
__device__ __forceinline__ void chainw_seek(ChainCur& c, const ChainOp* ops, int n, int gw, int nwarps) {
	for (; c.i < n; c.i++) {
		chain_share(c, &ops[c.i], gw, nwarps, blockDim.x >> 5);
		if (c.r < c.e) return;
	}
}

__device__ __forceinline__ void chainw_next(ChainCur& c, const ChainOp* ops, int n, int gw, int nwarps) {
	if (++c.r < c.e) return;
	c.i++;
	chainw_seek(c, ops, n, gw, nwarps);
}

// chainw_load issues the loads of lane's words of row c (nothing for a
// latency op or past the program).
__device__ __forceinline__ void chainw_load(const ChainCur& c, const ChainOp* ops, int n, int lane, uint4 (&q)[CHAIN_REGX]) {
	if (c.i >= n) return;
	const __half* w = ops[c.i].w;
	if (w == nullptr) return;
	const int cols = __ldg(&ops[c.i].cols), K = cols / 256;
	const __half* row = w + (size_t)c.r * cols + lane * 8;
#pragma unroll
	for (int k = 0; k < CHAIN_REGX; k++)
		if (k < K) q[k] = ldg_stream(row + 256 * k);
}

// chainw_signal marks ops [from, to) done by the calling warp (lane 0,
// after its last store to them): it counts the warp in the block's counter
// of each op (done[n + op·G + block]), and the block's last warp of this
// launch (a launch adds exactly one count a warp, so the old value is
// nw - 1 modulo nw) counts the block in done[op]. So done[] counts blocks,
// as the shared-memory builds' does, and only G atomics a launch meet on
// one op's counter, not G·nw. The fence before the block count releases
// this warp's stores; the one after it acquires the other warps' (their
// counts were read by this atomic) before the block is counted.
__device__ __forceinline__ void chainw_signal(unsigned* done, int n, int from, int to) {
	if (from >= to) return;
	const unsigned nw = blockDim.x >> 5;
	__threadfence();
	for (int j = from; j < to; j++) {
		const unsigned old = atomicAdd(&done[n + (size_t)j * gridDim.x + blockIdx.x], 1u);
		if (old % nw == nw - 1) {
			__threadfence();
			atomicAdd(&done[j], 1u);
		}
	}
}

struct ChainWarp {
	int xop, sig;
	long long t_enter, t_ready;
};

// chainw_row computes row cc from q: at a new op, signals the ops before
// it, waits for its dependency and stages x (XREG: in registers; else each
// row reads its x words again, plain loads that L1 keeps after the first
// row: they follow lane 0's acquire and the warp barrier, so no stale line
// of an earlier launch is read).
template <bool XREG>
__device__ __forceinline__ void chainw_row(const ChainCur& cc, const ChainOp* ops, int n, unsigned* done, unsigned want, int lane,
                                           const uint4 (&q)[CHAIN_REGX], float (&xr)[CHAIN_REGX][8], ChainWarp& st,
                                           long long* trace, bool tracer) {
	const ChainOp* op = &ops[cc.i];
	const int K = __ldg(&op->cols) / 256;
	if (cc.i != st.xop) {
		__syncwarp();
		if (tracer) {
			st.t_enter = clock64();
			if (st.xop >= 0 && lane == 0) trace[2 * ((size_t)st.xop * gridDim.x + blockIdx.x) + 1] = st.t_enter - st.t_ready;
		}
		if (lane == 0) chainw_signal(done, n, st.sig, cc.i);
		st.sig = cc.i;
		const int dep = __ldg(&op->dep);
		if (dep >= 0 && lane == 0)
			while ((int)(ld_acquire(&done[dep]) - want) < 0) __nanosleep(32);
		__syncwarp();
		const float* x = op->x;
		if (XREG && x != nullptr) {
#pragma unroll
			for (int k = 0; k < CHAIN_REGX; k++)
				if (k < K) {
					const float4 a = __ldcg(reinterpret_cast<const float4*>(x + lane * 8 + 256 * k));
					const float4 b = __ldcg(reinterpret_cast<const float4*>(x + lane * 8 + 256 * k + 4));
					xr[k][0] = a.x, xr[k][1] = a.y, xr[k][2] = a.z, xr[k][3] = a.w;
					xr[k][4] = b.x, xr[k][5] = b.y, xr[k][6] = b.z, xr[k][7] = b.w;
				}
		}
		st.xop = cc.i;
		if (tracer) {
			st.t_ready = clock64();
			if (lane == 0) trace[2 * ((size_t)cc.i * gridDim.x + blockIdx.x)] = st.t_ready - st.t_enter;
		}
	}
	if (op->w == nullptr) {
		if (lane == 0) chain_spin(__ldg(&op->spin));
		return;
	}
	float s[2] = {0.0f, 0.0f};
	const float* xg = op->x + lane * 8;
#pragma unroll
	for (int k = 0; k < CHAIN_REGX; k++)
		if (k < K) {
			float xv[8];
			if (XREG) {
#pragma unroll
				for (int j = 0; j < 8; j++) xv[j] = xr[k][j];
			} else {
				const float4 a = *reinterpret_cast<const float4*>(xg + 256 * k);
				const float4 b = *reinterpret_cast<const float4*>(xg + 256 * k + 4);
				xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w, xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
			}
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const float2 f = __half22float2(reinterpret_cast<const __half2*>(&q[k])[j]);
				s[k & 1] = __fmaf_rn(f.x, xv[2 * j], s[k & 1]);
				s[k & 1] = __fmaf_rn(f.y, xv[2 * j + 1], s[k & 1]);
			}
		}
	float acc = s[0] + s[1];
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, o);
	if (lane == 0) op->y[cc.r] = acc;
}

template <bool XREG>
__device__ __forceinline__ void chainw_body(const ChainOp* __restrict__ ops, int n, unsigned* done, unsigned base, long long* trace) {
	const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
	const int gw = blockIdx.x * nw + (threadIdx.x >> 5), nwarps = gridDim.x * nw;
	const unsigned want = base + gridDim.x;
	const bool tracer = trace != nullptr && (threadIdx.x >> 5) == 0;
	ChainCur cc{0, 0, 0};
	chainw_seek(cc, ops, n, gw, nwarps);
	ChainCur pf = cc;  // the next row to load
	uint4 qa[CHAIN_REGX], qb[CHAIN_REGX];
	float xr[CHAIN_REGX][8];
	chainw_load(pf, ops, n, lane, qa);
	if (pf.i < n) chainw_next(pf, ops, n, gw, nwarps);
	chainw_load(pf, ops, n, lane, qb);
	if (pf.i < n) chainw_next(pf, ops, n, gw, nwarps);
	ChainWarp st{-1, 0, 0, 0};
	while (cc.i < n) {
		chainw_row<XREG>(cc, ops, n, done, want, lane, qa, xr, st, trace, tracer);
		chainw_load(pf, ops, n, lane, qa);
		if (pf.i < n) chainw_next(pf, ops, n, gw, nwarps);
		chainw_next(cc, ops, n, gw, nwarps);
		if (cc.i >= n) break;
		chainw_row<XREG>(cc, ops, n, done, want, lane, qb, xr, st, trace, tracer);
		chainw_load(pf, ops, n, lane, qb);
		if (pf.i < n) chainw_next(pf, ops, n, gw, nwarps);
		chainw_next(cc, ops, n, gw, nwarps);
	}
	__syncwarp();
	if (tracer && st.xop >= 0 && lane == 0) trace[2 * ((size_t)st.xop * gridDim.x + blockIdx.x) + 1] = clock64() - st.t_ready;
	if (lane == 0) chainw_signal(done, n, st.sig, n);
}

extern "C" __global__ void __launch_bounds__(CHAIN_THREADS, 1)
    chain_matvec_f16_regs(const ChainOp* __restrict__ ops, int n, unsigned* done, unsigned base, int mode, long long* trace) {
	chainw_body<true>(ops, n, done, base, trace);
}

// chain_matvec_f16_regs16: the same with 16 warps a block and x read again
// for every row (L1) instead of held in registers, so that twice the warps
// fit an SM (the launched matvec_f16 kernels run 16 warps an SM).
extern "C" __global__ void __launch_bounds__(2 * CHAIN_THREADS, 1)
    chain_matvec_f16_regs16(const ChainOp* __restrict__ ops, int n, unsigned* done, unsigned base, int mode, long long* trace) {
	chainw_body<false>(ops, n, done, base, trace);
}
