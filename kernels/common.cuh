// common.cuh: device functions shared by several kernel files.
//
// Determinism rules every kernel follows:
//   - fixed reduction trees (warp butterflies, then warps in index order);
//     no float atomics, no order that depends on scheduling;
//   - every float operation whose rounding matters is written with an
//     explicit round-to-nearest intrinsic (__fmaf_rn, __fmul_rn, __fadd_rn,
//     __fdiv_rn) so that nvcc cannot contract a multiply and an add
//     differently in two kernels that must agree bit for bit (the scalar,
//     grouped and fused expert executors).
//
// Activations are FP32 everywhere; weights are FP16 or qpack-int4-b256-v1.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu
#define WARP 32

// act_ldg loads an activation a kernel reads many times (staging). In the
// kernels that run one op per launch the read-only path (__ldg) is safe: no
// kernel reads what it writes. The persistent decode kernel (persistent.cu)
// and the fused routed-experts kernel (experts_fused.cu) read activations
// that other blocks of the same launch wrote, which the non-coherent path
// may hold stale, so they define HZ_COHERENT_ACT and load them through L2
// (__ldcg). The values are the same either way.
#ifdef HZ_COHERENT_ACT
#define act_ldg(p) __ldcg(p)
#else
#define act_ldg(p) __ldg(p)
#endif

// Programmatic dependent launch (sm_90; runtime/cuda launches a captured
// step's kernels with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION).
// Such a kernel may start while the kernel before it in the stream is still
// running, so it must not read that kernel's outputs, nor write what that
// kernel reads, before grid_dep_wait returns: the wait returns once every
// prerequisite grid has completed and its writes are visible (at once for a
// launch without the attribute). grid_dep_launch lets the next kernel's
// blocks be scheduled as this grid's blocks leave the SMs. Every kernel of
// a captured step calls grid_dep_enter (both, in that order) in every block
// before any dependent access; that each grid completes only after its
// predecessor also orders it after every earlier kernel of the stream. A
// matvec issues its first weight loads (which no kernel writes) before it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "kernels/*.cu need compute_90 or later: griddepcontrol (programmatic dependent launch) is sm_90 PTX"
#endif
// Outside device code (the CPU kernel emulator, kernels/emu) both are no-ops:
// the emulator runs one launch at a time.
__device__ __forceinline__ void grid_dep_wait() {
#ifdef __CUDA_ARCH__
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_launch() {
#ifdef __CUDA_ARCH__
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_enter() {
	grid_dep_wait();
	grid_dep_launch();
}

// GroupTable is a routed group's row table: recs[k] = device address of the
// row holding expert k of the group, wts[k] = its routing weight. Its layout
// is encodeTable's in runtime/cuda/experts.go (maxGroup there is 64).
struct GroupTable {
	unsigned long long recs[64];
	float wts[64];
};

// VGrid is the block a kernel body runs as: bid of nblk. A launched kernel
// passes VGrid{blockIdx.x, gridDim.x}; the persistent decode kernel passes
// the virtual block (unit) it took from an instruction of nblk units, so a
// body does exactly what block bid of an nblk-block launch does.
struct VGrid {
	int bid, nblk;
};
__device__ __forceinline__ VGrid launched_grid() { return VGrid{(int)blockIdx.x, (int)gridDim.x}; }

// ld_acquire reads a counter another block released (atomicAdd after
// __threadfence): the persistent kernels' dependency waits.
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
#ifdef __CUDA_ARCH__
	unsigned v;
	asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
#else
	return *reinterpret_cast<const volatile unsigned*>(p);
#endif
}

// cp.async groups (tc.cuh's copies, the decode attention's ring): a
// thread's copies issued since its last commit form a group, and
// cp_async_wait<N> returns once at most N of its groups are still in
// flight. The emulator copies at once, so both are no-ops there.
__device__ __forceinline__ void cp_async_commit() {
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
// cp_async16z copies the 16 bytes at src to dst (shared memory, 16-byte
// aligned) through L2 only when ok, and writes 16 zero bytes otherwise
// (src-size 0: src is not read, but must still be a valid address).
__device__ __forceinline__ void cp_async16z(void* dst, const void* src, bool ok) {
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src),
	             "r"(ok ? 16 : 0)
	             : "memory");
#else
	if (ok)
		memcpy(dst, src, 16);
	else
		memset(dst, 0, 16);
#endif
}

// warp_sum is a butterfly over the 32 lanes: at each step lane i adds the
// value of lane i^o. Float addition is commutative, so both lanes of a pair
// compute the same bits and every lane ends with the same, fixed-tree sum.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

// silu_mul is silu(g)*u = g/(1+exp(-g)) * u, the expression order of the CPU
// reference. SiLUMul and the grouped gate/up kernel both call it.
__device__ __forceinline__ float silu_mul(float g, float u) {
	float s = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
	return __fmul_rn(s, u);
}

// add_scaled is d + a*v with two roundings (no FMA), the CPU reference's
// `d += a*v`. AddScaled and the expert combine both call it, so combining
// experts in k order gives the same bits in every executor.
__device__ __forceinline__ float add_scaled(float d, float a, float v) {
	return __fadd_rn(d, __fmul_rn(a, v));
}

// silu_mul_span and add_span are SiLUMul (d = silu_mul(g, u)) and Add
// (d = a + b) over n values for the block vg: one value per thread,
// grid-stride (elementwise.cu, and the persistent decode kernel).
__device__ __forceinline__ void silu_mul_span(float* d, const float* g, const float* u, int n, VGrid vg) {
	for (int i = vg.bid * blockDim.x + threadIdx.x; i < n; i += vg.nblk * blockDim.x) d[i] = silu_mul(g[i], u[i]);
}
__device__ __forceinline__ void add_span(float* d, const float* a, const float* b, int n, VGrid vg) {
	for (int i = vg.bid * blockDim.x + threadIdx.x; i < n; i += vg.nblk * blockDim.x) d[i] = __fadd_rn(a[i], b[i]);
}

// ---------------------------------------------------------------------------
// Block reductions with a fixed order: warp butterflies, then warp results
// combined by warp 0 in warp order. red must hold 32 floats.
__device__ __forceinline__ float block_sum(float v, float* red) {
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_sum(v);
	__syncthreads();  // red may still be read by a previous call
	if (lane == 0) red[warp] = v;
	__syncthreads();
	if (warp == 0) {
		float t = lane < nw ? red[lane] : 0.0f;
		t = warp_sum(t);
		if (lane == 0) red[0] = t;
	}
	__syncthreads();
	return red[0];
}

// NORM_REGS: how many of a thread's values a norm loads at once into
// registers (n <= NORM_REGS * blockDim: 2048 with 256 threads).
#define NORM_REGS 8

// norm_load puts x[t + j*blockDim] (j < NORM_REGS, 0 past n) into xv with
// every load issued before the first use: one memory round trip instead of
// one per value. Only when n <= NORM_REGS * blockDim.
__device__ __forceinline__ void norm_load(float* xv, const float* __restrict__ x, int n) {
#pragma unroll
	for (int j = 0; j < NORM_REGS; j++) {
		const int i = threadIdx.x + j * blockDim.x;
		xv[j] = i < n ? x[i] : 0.0f;
	}
}

// sumsq_block is the block's sum of x[i]^2 in the rmsnorm order: each
// thread sums its values t, t+blockDim, ... in order (FMA), then block_sum.
// With xv (norm_load's registers, n <= NORM_REGS * blockDim) the values
// come from registers, otherwise from x one by one; the sums are the same.
__device__ __forceinline__ float sumsq_block(const float* __restrict__ x, const float* xv, int n, float* red) {
	float ss = 0.0f;
	if (xv != nullptr) {
#pragma unroll
		for (int j = 0; j < NORM_REGS; j++)
			if (threadIdx.x + j * blockDim.x < n) ss = __fmaf_rn(xv[j], xv[j], ss);
	} else {
		for (int i = threadIdx.x; i < n; i += blockDim.x) ss = __fmaf_rn(x[i], x[i], ss);
	}
	return block_sum(ss, red);
}

__device__ __forceinline__ float block_max(float v, float* red) {
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	__syncthreads();
	if (lane == 0) red[warp] = v;
	__syncthreads();
	if (warp == 0) {
		float t = lane < nw ? red[lane] : -INFINITY;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(FULL_MASK, t, o));
		if (lane == 0) red[0] = t;
	}
	__syncthreads();
	return red[0];
}

// ---------------------------------------------------------------------------
// Loads.

// ldg_stream loads 16 bytes of weights: read-only, used once, so it skips
// L1 allocation (L1 keeps the activations) and asks L2 for 256-byte fetches
// (a warp reads 512 contiguous bytes of a row per load instruction).
__device__ __forceinline__ uint4 ldg_stream(const void* p) {
#ifdef __CUDA_ARCH__
	uint4 v;
	asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
	    : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
	    : "l"(p));
	return v;
#else
	return *reinterpret_cast<const uint4*>(p);
#endif
}

// ---------------------------------------------------------------------------
// Activation staging.
//
// Row kernels stage their activation vectors in shared memory once per block
// (fp16 rows: plain values; int4 rows: pre-scaled, with per-chunk sums, in
// the same layout). Lanes read them in 16-byte pieces at a lane stride of
// 128 bytes (int4: 32 values per lane) or 32 bytes (fp16: 8 values per lane);
// stored plainly, the int4 pattern would put all 32 lanes on one bank.
// Padding 4 floats after every 32 makes both patterns conflict-free for
// 128-bit shared loads:
//
//	value i lives at xs_index(i) = i + 4*(i/32)       (36 floats per 32 values)
__device__ __forceinline__ int xs_index(int i) { return i + ((i >> 5) << 2); }

// xs_floats is the shared-memory size in floats for n staged values
// (n rounded up to a multiple of 32).
__host__ __device__ __forceinline__ int xs_floats(int n) { return ((n + 31) >> 5) * 36; }

// xs4_floats is the shared size (floats) of one staged int4 activation
// vector of n values: the padded values, then the chunk sums rounded up to
// a multiple of 4 floats (so consecutive vectors stay 16-byte aligned).
__host__ __device__ __forceinline__ int xs4_floats(int n) { return xs_floats(n) + ((((n + 31) >> 5) + 3) & ~3); }

#define X_SCALE __uint_as_float(0x67800000u)  // 2^80, see the int4 rows below

// stage_values copies nv activation vectors of n values (vector v at
// src + v*n) into shared memory at dst + v*stride in the padded layout,
// multiplied by X_SCALE when SCALE (int4 rows), zero-filled up to a multiple
// of 32 values so whole 32-value chunks can be read without checks. Each
// thread issues all its global loads (8 float4 per pass) before its first
// shared store: staging costs about one L2 round trip, not one per value.
template <bool SCALE>
__device__ __forceinline__ void stage_values(float* dst, int stride, const float* __restrict__ src, int nv, int n) {
	const int n32 = (n + 31) & ~31;
	const int nt = blockDim.x;
	if ((n & 3) == 0 && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
		const int q = n32 >> 2;  // float4 slots per staged vector, padding included
		const int total = nv * q;
		constexpr int V = 8;
		for (int base = threadIdx.x; base < total; base += V * nt) {
			float4 v[V];
#pragma unroll
			for (int j = 0; j < V; j++) {
				const int s = base + j * nt;
				const int vi = s / q, i = (s - vi * q) << 2;
				v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
				if (s < total && i < n) v[j] = act_ldg(reinterpret_cast<const float4*>(src + (size_t)vi * n + i));
			}
#pragma unroll
			for (int j = 0; j < V; j++) {
				const int s = base + j * nt;
				if (s < total) {
					const int vi = s / q, i = (s - vi * q) << 2;
					float4 w = v[j];
					if (SCALE) {
						w.x = __fmul_rn(w.x, X_SCALE), w.y = __fmul_rn(w.y, X_SCALE);
						w.z = __fmul_rn(w.z, X_SCALE), w.w = __fmul_rn(w.w, X_SCALE);
					}
					*reinterpret_cast<float4*>(dst + (size_t)vi * stride + xs_index(i)) = w;
				}
			}
		}
	} else {
		for (int s = threadIdx.x; s < nv * n32; s += nt) {
			const int vi = s / n32, i = s - vi * n32;
			float v = i < n ? src[(size_t)vi * n + i] : 0.0f;
			if (SCALE) v = __fmul_rn(v, X_SCALE);
			dst[(size_t)vi * stride + xs_index(i)] = v;
		}
	}
}

// stage_sums writes, after the staged int4 values of nv vectors, the sum u
// of each 32-value chunk's scaled values in order.
__device__ __forceinline__ void stage_sums(float* dst, int stride, int nv, int n) {
	const int nch = (n + 31) >> 5;
	for (int s = threadIdx.x; s < nv * nch; s += blockDim.x) {
		const int vi = s / nch, c = s - vi * nch;
		const float* xs = dst + (size_t)vi * stride;
		float u = 0.0f;
		for (int j = 0; j < 32; j++) u = __fadd_rn(u, xs[xs_index(32 * c + j)]);
		dst[(size_t)vi * stride + xs_floats(n) + c] = u;
	}
}

// stage_block stages nv vectors for fp16 rows (INT4 false; stride
// xs_floats(n)) or int4 rows (stride xs4_floats(n): the scaled values, then
// u per 32-value chunk, the sum of its 32 scaled values in order) and
// synchronises the block, after which every thread may read them.
template <bool INT4>
__device__ __forceinline__ void stage_block(float* dst, const float* __restrict__ src, int nv, int n) {
	const int stride = INT4 ? xs4_floats(n) : xs_floats(n);
	stage_values<INT4>(dst, stride, src, nv, n);
	if (INT4) {
		__syncthreads();
		stage_sums(dst, stride, nv, n);
	}
	__syncthreads();
}

// NormSpec asks a row kernel to stage RMSNorm(x)·w instead of x (w == null:
// stage x as is). w_kind: 1 FP16 weights, 2 FP32.
struct NormSpec {
	const void* w;
	int w_kind;
	float eps;
};

// NormPre holds a thread's norm weights w[t + j*blockDim] (j < NORM_REGS,
// 0 past n) as floats, loaded before the kernel's dependency wait: norm
// weights are constants no kernel writes, so a kernel may read them while
// the kernel ahead of it still runs (grid_dep_wait), and the staging after
// the wait then costs the activations' round trip alone, not a second one
// for the weights. ok is false when nothing was preloaded (no norm, or n
// too wide for NORM_REGS values a thread).
struct NormPre {
	float w[NORM_REGS];
	bool ok;
};

// norm_preload fills pre for a norm over n values with weights nm.w.
__device__ __forceinline__ void norm_preload(NormPre& pre, NormSpec nm, int n) {
	pre.ok = nm.w != nullptr && ((n + 31) & ~31) <= NORM_REGS * (int)blockDim.x;
	if (!pre.ok) return;
#pragma unroll
	for (int j = 0; j < NORM_REGS; j++) {
		const int i = threadIdx.x + j * blockDim.x;
		pre.w[j] = i >= n ? 0.0f
		           : nm.w_kind == 1 ? __half2float(reinterpret_cast<const __half*>(nm.w)[i])
		                            : reinterpret_cast<const float*>(nm.w)[i];
	}
}

// stage_block_norm stages one vector like stage_block, normalised on the
// way: x'[i] = w[i] * (x[i] * inv), inv = 1/sqrt(mean(x^2) + eps), with the
// rmsnorm kernel's reduction (each thread sums the squares of values t,
// t+blockDim, ... in order, then block_sum) and roundings: with 256-thread
// blocks on both sides the staged values are the bits the rmsnorm kernel
// writes, so a captured step can skip that launch. A thread's values and
// weights are loaded together into registers (norm_load) when they fit;
// the weights come from pre when the caller loaded them already
// (norm_preload, before its dependency wait), and are loaded here
// otherwise. The values are the same either way.
template <bool INT4>
__device__ __forceinline__ void stage_block_norm(float* dst, const float* __restrict__ x, int n, NormSpec nm, const NormPre* pre) {
	__shared__ float red[32];
	const int n32 = (n + 31) & ~31;
	float xv[NORM_REGS];
	const bool regs = n32 <= NORM_REGS * (int)blockDim.x;
	if (regs) norm_load(xv, x, n);
	const float ss = sumsq_block(x, regs ? xv : nullptr, n, red);
	const float mean = __fadd_rn(__fdiv_rn(ss, (float)n), nm.eps);
	const float inv = (float)(1.0 / sqrt((double)mean));
	if (regs) {
		float wv[NORM_REGS];
		if (pre != nullptr && pre->ok) {
#pragma unroll
			for (int j = 0; j < NORM_REGS; j++) wv[j] = pre->w[j];
		} else {
			NormPre local;
			norm_preload(local, nm, n);
#pragma unroll
			for (int j = 0; j < NORM_REGS; j++) wv[j] = local.w[j];
		}
#pragma unroll
		for (int j = 0; j < NORM_REGS; j++) {
			const int i = threadIdx.x + j * blockDim.x;
			if (i >= n32) break;
			float v = i < n ? __fmul_rn(wv[j], __fmul_rn(xv[j], inv)) : 0.0f;
			if (INT4) v = __fmul_rn(v, X_SCALE);
			dst[xs_index(i)] = v;
		}
	} else {
		for (int i = threadIdx.x; i < n32; i += blockDim.x) {
			float v = 0.0f;
			if (i < n) {
				const float wv = nm.w_kind == 1 ? __half2float(reinterpret_cast<const __half*>(nm.w)[i])
				                                : reinterpret_cast<const float*>(nm.w)[i];
				v = __fmul_rn(wv, __fmul_rn(x[i], inv));
			}
			if (INT4) v = __fmul_rn(v, X_SCALE);
			dst[xs_index(i)] = v;
		}
	}
	if (INT4) {
		__syncthreads();
		stage_sums(dst, xs4_floats(n), 1, n);
	}
	__syncthreads();
}

// stage_one stages one vector, normalised when nm.w is set (with the
// weights of pre when it holds them).
template <bool INT4>
__device__ __forceinline__ void stage_one(float* dst, const float* __restrict__ x, int n, NormSpec nm, const NormPre* pre = nullptr) {
	if (nm.w != nullptr)
		stage_block_norm<INT4>(dst, x, n, nm, pre);
	else
		stage_block<INT4>(dst, x, 1, n);
}

// XShared / XGlobal say where an fp16 row-dot reads its activations: staged
// in shared memory (the padded layout above) or directly from global memory
// (plain layout, through L1) when the staging would not fit in shared
// memory. Both give the same values, so the arithmetic and the result are
// the same.
struct XShared {
	const float* p;  // shared, padded layout
	__device__ __forceinline__ float4 load4(int i) const {  // values i..i+3, i % 4 == 0
		return *reinterpret_cast<const float4*>(p + xs_index(i));
	}
	__device__ __forceinline__ float load1(int i) const { return p[xs_index(i)]; }
};
struct XGlobal {
	const float* p;  // global, plain layout; fp16 rows never read past cols
	__device__ __forceinline__ float4 load4(int i) const {
		return act_ldg(reinterpret_cast<const float4*>(p + i));
	}
	__device__ __forceinline__ float load1(int i) const { return act_ldg(p + i); }
};

// ---------------------------------------------------------------------------
// qpack-int4-b256-v1 rows.
//
// A row of an int4 matrix is ColsPadded/2 packed bytes; its FP16 scales live
// at ScalesOffset + r*Blocks*2. A warp reads a row in 16-byte *chunks*: chunk
// c holds values 32c..32c+31 of block c/8. Lane l handles chunks l, l+32,
// l+64, ... in that order.
//
// Arithmetic (decode is bound by instruction issue as much as by HBM here,
// so every instruction per weight counts). For value j of a chunk, nibble
// n_j = q_j + 8 becomes a float with one byte permute: the bit pattern
// 0x000000nn is the subnormal n * 2^-149, exact. Activations are staged
// pre-scaled, x' = x * 2^80 (exact for |x| < 2^48), so one FMA per weight
// accumulates n_j * x_j * 2^-69, a normal number for any |x| above ~1e-17.
// Per chunk:
//
//	t  = sum of n_j * x'_j * 2^-149  (four interleaved partial sums, value j
//	                                  to sum j%4, combined (s0+s1)+(s2+s3);
//	                                  see int4_quarter_dot)
//	u  = sum of x'_j, j = 0..31 in order (computed once per chunk of x, at
//	     staging)
//	p' = fma(-2^-146, u, t)          = sum of q_j * x_j * 2^-69
//	acc = fma(scale, p', acc)
//
// and the row result is warp_sum(acc) * 2^69 (exact). Powers of two only
// shift exponents, so this is the plain FP32 sum of q*x*scale up to the
// rounding of the -8*sum(x) correction. Chunks past the last real value
// (padding, q = 0) are skipped; a chunk straddling Cols reads zero
// activations for its padding.
//
// This is the one per-row reduction for int4 (Int4Fmt below, driven by
// row_pipeline): MatVec over an expert matrix, the grouped gate/up kernel
// and the grouped down kernel all use it, so every output has the same bits
// whichever executor computed it.

__device__ __forceinline__ float out_unscale(float v) { return __fmul_rn(v, __uint_as_float(0x62000000u)); }  // * 2^69
__device__ __forceinline__ float neg_2m146() { return __uint_as_float(0x80000008u); }                        // -2^-146

// nib_at is the subnormal b * 2^-149 for byte `byte` of w, b being a nibble
// isolated in place: n (w & 0x0F0F0F0F) or 16*n (w & 0xF0F0F0F0).
__device__ __forceinline__ float nib_at(uint32_t w, int byte) {
	return __uint_as_float(__byte_perm(w, 0u, 0x4440u | byte));
}

// int4 activation sources: staged (scaled x in the padded layout, plus the
// per-chunk sums u) or read from global memory and scaled on the fly. Both
// produce the same x' and u bits. A chunk's 32 activations are read in four
// quarters of 8 (quarter k pairs with word k of the chunk's 16 bytes), so
// only 8 of them are live at a time; XSum carries u through the quarters.
struct XSum {
	float u;
};
struct X4Shared {
	const float* x;     // shared, padded layout, x * 2^80
	const float* sums;  // shared, u per chunk
	__device__ __forceinline__ void quarter(int c, int k, float4& xa, float4& xb, XSum&) const {
		const float* p = x + xs_index(32 * c + 8 * k);
		xa = *reinterpret_cast<const float4*>(p);
		xb = *reinterpret_cast<const float4*>(p + 4);
	}
	__device__ __forceinline__ float sum(int c, const XSum&) const { return sums[c]; }
};
struct X4Global {
	const float* x;  // global, plain, unscaled; whole chunks readable
	__device__ __forceinline__ void quarter(int c, int k, float4& xa, float4& xb, XSum& s) const {
		const float* p = x + 32 * c + 8 * k;
		xa = act_ldg(reinterpret_cast<const float4*>(p));
		xb = act_ldg(reinterpret_cast<const float4*>(p + 4));
		xa.x = __fmul_rn(xa.x, X_SCALE), xa.y = __fmul_rn(xa.y, X_SCALE);
		xa.z = __fmul_rn(xa.z, X_SCALE), xa.w = __fmul_rn(xa.w, X_SCALE);
		xb.x = __fmul_rn(xb.x, X_SCALE), xb.y = __fmul_rn(xb.y, X_SCALE);
		xb.z = __fmul_rn(xb.z, X_SCALE), xb.w = __fmul_rn(xb.w, X_SCALE);
		float u = k == 0 ? 0.0f : s.u;
		u = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(u, xa.x), xa.y), xa.z), xa.w);
		u = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(u, xb.x), xb.y), xb.z), xb.w);
		s.u = u;
	}
	__device__ __forceinline__ float sum(int, const XSum& s) const { return s.u; }
};

// int4_quarter_dot adds word k of a chunk (values 8k..8k+7: value 8k+2j in
// the low nibble of byte j, 8k+2j+1 in its high nibble) against their scaled
// activations xa (8k..8k+3), xb (8k+4..8k+7) into the chunk's four partial
// sums: value 8k+j goes to sum j%4. The odd values (sums 1 and 3) are high
// nibbles; they are taken in place, w & 0xF0F0F0F0, as the subnormal
// 16*n * 2^-149 (saving a shift per word), so sums 1 and 3 hold exactly 16
// times the sum of their n*x'*2^-149 terms (a power of two commutes with
// every rounding while the sums are normal numbers) and are scaled back by
// 1/16 inside the FMAs that combine them. Over k = 0..3 the chunk's
//
//	t = (s0 + s1/16) + (s2 + s3/16)   (int4_chunk_t)
//
// is the plain interleaved sum of n_j * x'_j * 2^-149.
__device__ __forceinline__ void int4_quarter_dot(uint32_t word, float4 xa, float4 xb, float (&s)[4]) {
	const uint32_t lo = word & 0x0F0F0F0Fu;  // values 8k+0, +2, +4, +6
	const uint32_t hi = word & 0xF0F0F0F0u;  // 16 x values 8k+1, +3, +5, +7
	s[0] = __fmaf_rn(nib_at(lo, 0), xa.x, s[0]);
	s[1] = __fmaf_rn(nib_at(hi, 0), xa.y, s[1]);
	s[2] = __fmaf_rn(nib_at(lo, 1), xa.z, s[2]);
	s[3] = __fmaf_rn(nib_at(hi, 1), xa.w, s[3]);
	s[0] = __fmaf_rn(nib_at(lo, 2), xb.x, s[0]);
	s[1] = __fmaf_rn(nib_at(hi, 2), xb.y, s[1]);
	s[2] = __fmaf_rn(nib_at(lo, 3), xb.z, s[2]);
	s[3] = __fmaf_rn(nib_at(hi, 3), xb.w, s[3]);
}
__device__ __forceinline__ float int4_chunk_t(const float (&s)[4]) {
	const float sixteenth = 0.0625f;
	return __fadd_rn(__fmaf_rn(s[1], sixteenth, s[0]), __fmaf_rn(s[3], sixteenth, s[2]));
}

__device__ __forceinline__ uint32_t word_of(uint4 w, int k) { return k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w; }

// Int4Row locates one row of an int4 matrix.
struct Int4Row {
	const uint8_t* q;   // the row's packed bytes (16-byte aligned)
	const __half* sc;   // the row's scales
};

// Int4Frag holds what a warp loaded for NR rows and CPL chunks per lane:
// chunk cb + lane + 32u of row i in w[u][i], its scale in s[u][i].
template <int NR, int CPL>
struct Int4Frag {
	uint4 w[CPL][NR];
	__half s[CPL][NR];
};

// Int4Fmt is the int4 row format for row_pipeline.
struct Int4Fmt {
	typedef Int4Row Row;
	typedef X4Shared XS_shared;
	typedef X4Global XS_global;
	struct Acc {
		float a;
	};
	template <int NR, int CPL>
	using Frag = Int4Frag<NR, CPL>;

	static __device__ __forceinline__ bool chunked(int) { return true; }
	static __device__ __forceinline__ int nchunks(int cols) { return (cols + 31) >> 5; }
	static __device__ __forceinline__ Row row(const uint8_t* mat, int r, int, int cols_padded, int scales_offset) {
		Row rw;
		rw.q = mat + (size_t)r * (cols_padded >> 1);
		rw.sc = reinterpret_cast<const __half*>(mat + scales_offset) + (size_t)r * (cols_padded >> 8);
		return rw;
	}
	static __device__ __forceinline__ void zero(Acc& a) { a.a = 0.0f; }
	// load issues the loads of chunks cb + lane + 32u (u < CPL) of rows
	// row_of(0..NR-1).
	template <int NR, int CPL, class RowOf>
	static __device__ __forceinline__ void load(Frag<NR, CPL>& f, RowOf row_of, int cb, int nch) {
		const int lane = threadIdx.x & 31;
#pragma unroll
		for (int i = 0; i < NR; i++) {
			const Row rw = row_of(i);
#pragma unroll
			for (int u = 0; u < CPL; u++) {
				const int c = cb + lane + 32 * u;
				if (c < nch) {
					f.w[u][i] = ldg_stream(rw.q + 16 * (size_t)c);
					f.s[u][i] = __ldg(rw.sc + (c >> 3));
				}
			}
		}
	}
	template <int NR, int CPL, class XS>
	static __device__ __forceinline__ void accum(Acc (&acc)[NR], const Frag<NR, CPL>& f, const XS& xs, int cb, int nch) {
		const int lane = threadIdx.x & 31;
#pragma unroll
		for (int u = 0; u < CPL; u++) {
			const int c = cb + lane + 32 * u;
			if (c < nch) {
				// Rows in groups of up to 4, each group reading the chunk's
				// activations once, a quarter at a time: 8 activations and 4
				// partial sums per row live (registers bound the occupancy).
				constexpr int RG = NR < 4 ? NR : 4;
#pragma unroll
				for (int i0 = 0; i0 < NR; i0 += RG) {
					float s[RG][4];
#pragma unroll
					for (int i = 0; i < RG; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
					XSum xsum;
#pragma unroll
					for (int k = 0; k < 4; k++) {
						float4 xa, xb;
						xs.quarter(c, k, xa, xb, xsum);
#pragma unroll
						for (int i = 0; i < RG; i++) int4_quarter_dot(word_of(f.w[u][i0 + i], k), xa, xb, s[i]);
					}
					const float usum = xs.sum(c, xsum);
#pragma unroll
					for (int i = 0; i < RG; i++) {
						const float p = __fmaf_rn(neg_2m146(), usum, int4_chunk_t(s[i]));
						acc[i0 + i].a = __fmaf_rn(__half2float(f.s[u][i0 + i]), p, acc[i0 + i].a);
					}
				}
			}
		}
	}
	static __device__ __forceinline__ float finish(const Acc& a) { return out_unscale(warp_sum(a.a)); }
	template <int NR, class XS>
	static __device__ __forceinline__ void narrow(const Row (&)[NR], const XS&, int, float (&out)[NR]) {
#pragma unroll
		for (int i = 0; i < NR; i++) out[i] = 0.0f;  // never called: chunked() is always true
	}
};

// ---------------------------------------------------------------------------
// FP16 rows (non-routed weights and fp16 expert records). Activations are
// plain FP32 (XShared / XGlobal).
//
// When cols % 8 == 0 a lane reads 16-byte chunks (8 values); lane l handles
// chunks l, l+32, ... and accumulates value j of a chunk into partial sum
// j%2; the lane result is s0+s1 and the row result warp_sum of that. Other
// widths (tiny test shapes) read one value at a time: lane l handles values
// l, l+32, ... into one sum. The path depends only on cols. As for int4,
// F16Fmt driven by row_pipeline is the one per-row reduction of every fp16
// kernel.

template <int NR, int CPL>
struct F16Frag {
	uint4 w[CPL][NR];
};

struct F16Fmt {
	typedef const __half* Row;
	typedef XShared XS_shared;
	typedef XGlobal XS_global;
	struct Acc {
		float a0, a1;
	};
	template <int NR, int CPL>
	using Frag = F16Frag<NR, CPL>;

	static __device__ __forceinline__ bool chunked(int cols) { return (cols & 7) == 0; }
	static __device__ __forceinline__ int nchunks(int cols) { return cols >> 3; }
	static __device__ __forceinline__ Row row(const uint8_t* mat, int r, int cols, int, int) {
		return reinterpret_cast<const __half*>(mat) + (size_t)r * cols;
	}
	static __device__ __forceinline__ void zero(Acc& a) { a.a0 = a.a1 = 0.0f; }
	template <int NR, int CPL, class RowOf>
	static __device__ __forceinline__ void load(Frag<NR, CPL>& f, RowOf row_of, int cb, int nch) {
		const int lane = threadIdx.x & 31;
#pragma unroll
		for (int i = 0; i < NR; i++) {
			const Row rw = row_of(i);
#pragma unroll
			for (int u = 0; u < CPL; u++) {
				const int c = cb + lane + 32 * u;
				if (c < nch) f.w[u][i] = ldg_stream(rw + 8 * (size_t)c);
			}
		}
	}
	template <int NR, int CPL, class XS>
	static __device__ __forceinline__ void accum(Acc (&acc)[NR], const Frag<NR, CPL>& f, const XS& xs, int cb, int nch) {
		const int lane = threadIdx.x & 31;
#pragma unroll
		for (int u = 0; u < CPL; u++) {
			const int c = cb + lane + 32 * u;
			if (c < nch) {
				const float4 xa = xs.load4(8 * c), xb = xs.load4(8 * c + 4);
#pragma unroll
				for (int i = 0; i < NR; i++) {
					const __half2* h = reinterpret_cast<const __half2*>(&f.w[u][i]);
					const float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
					const float2 f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
					float a0 = acc[i].a0, a1 = acc[i].a1;
					a0 = __fmaf_rn(f0.x, xa.x, a0);
					a1 = __fmaf_rn(f0.y, xa.y, a1);
					a0 = __fmaf_rn(f1.x, xa.z, a0);
					a1 = __fmaf_rn(f1.y, xa.w, a1);
					a0 = __fmaf_rn(f2.x, xb.x, a0);
					a1 = __fmaf_rn(f2.y, xb.y, a1);
					a0 = __fmaf_rn(f3.x, xb.z, a0);
					a1 = __fmaf_rn(f3.y, xb.w, a1);
					acc[i].a0 = a0, acc[i].a1 = a1;
				}
			}
		}
	}
	static __device__ __forceinline__ float finish(const Acc& a) { return warp_sum(__fadd_rn(a.a0, a.a1)); }
	// narrow is the one-value-per-lane path for cols % 8 != 0.
	template <int NR, class XS>
	static __device__ __forceinline__ void narrow(const Row (&rw)[NR], const XS& xs, int cols, float (&out)[NR]) {
		const int lane = threadIdx.x & 31;
		float a0[NR];
#pragma unroll
		for (int i = 0; i < NR; i++) a0[i] = 0.0f;
		for (int v = lane; v < cols; v += 32) {
			const float xv = xs.load1(v);
#pragma unroll
			for (int i = 0; i < NR; i++) a0[i] = __fmaf_rn(__half2float(rw[i][v]), xv, a0[i]);
		}
#pragma unroll
		for (int i = 0; i < NR; i++) out[i] = warp_sum(__fadd_rn(a0[i], 0.0f));
	}
};

// ---------------------------------------------------------------------------
// row_pipeline: the warp loop every row kernel runs.
//
// A warp takes tasks t0, t0+tstride, ... of tasks.count(); a task is NR
// rows (tasks.row(t, i), i < NR) against one activation source
// (tasks.xs(t)), and its NR results go to tasks.emit (every lane holds
// them). A task's row is read in
// segments of CPL chunks per lane (32*CPL chunks); each (task, segment) is
// one step, and the loads of step s+1 are issued before the arithmetic of
// step s, so a warp always has a step of weights in flight while it
// computes. The first step's loads are issued before stage() (the block's
// activation staging, which every thread calls exactly once), so the
// staging's L2 round trip overlaps the first HBM round trip.
//
// Per row, every lane accumulates its chunks in increasing order into one
// accumulator, then warp_sum: the result does not depend on NR, CPL, the
// task order or the grid, only on the format and cols.
template <class Fmt, int NR, int CPL, class Tasks, class Stage>
__device__ __forceinline__ void row_pipeline(const Tasks& tasks, int t0, int tstride, int cols, Stage stage) {
	typedef typename Fmt::Row Row;
	typedef typename Fmt::template Frag<NR, CPL> Frag;
	typedef typename Fmt::Acc Acc;
	typedef typename Tasks::XS XS;
	const int ntasks = tasks.count();
	if (!Fmt::chunked(cols)) {
		stage();
		for (int t = t0; t < ntasks; t += tstride) {
			Row rw[NR];
#pragma unroll
			for (int i = 0; i < NR; i++) rw[i] = tasks.row(t, i);
			float out[NR];
			Fmt::template narrow<NR>(rw, tasks.xs(t), cols, out);
			tasks.emit(t, out);
		}
		return;
	}
	const int nch = Fmt::nchunks(cols);
	constexpr int SPAN = 32 * CPL;
	const int nseg = max(1, (nch + SPAN - 1) / SPAN);
	Frag cur;
	int t = t0, g = 0;
	if (t < ntasks) Fmt::load(cur, [&](int i) { return tasks.row(t, i); }, 0, nch);
	stage();
	if (t >= ntasks) return;
	XS xs = tasks.xs(t);
	Acc acc[NR];
#pragma unroll
	for (int i = 0; i < NR; i++) Fmt::zero(acc[i]);
	// One step: issue the next step's loads into pre, compute comp. The loop
	// is unrolled twice so the two buffers swap roles without copies.
	auto step = [&](const Frag& comp, Frag& pre) -> bool {
		int tn = t, gn = g + 1;
		if (gn == nseg) gn = 0, tn += tstride;
		const bool more = tn < ntasks;
		if (more) Fmt::load(pre, [&](int i) { return tasks.row(tn, i); }, gn * SPAN, nch);
		Fmt::accum(acc, comp, xs, g * SPAN, nch);
		if (g == nseg - 1) {
			float out[NR];
#pragma unroll
			for (int i = 0; i < NR; i++) {
				out[i] = Fmt::finish(acc[i]);
				Fmt::zero(acc[i]);
			}
			tasks.emit(t, out);
		}
		if (more) {
			t = tn, g = gn;
			if (g == 0) xs = tasks.xs(t);
		}
		return more;
	};
	Frag nxt;
	while (step(cur, nxt) && step(nxt, cur)) {
	}
}

// XSource<Fmt, SHARED>::make returns the activation source of Fmt for a
// vector staged at sbase (SHARED, by stage_block) or read from global memory
// at gbase.
template <class Fmt, bool SHARED>
struct XSource;
template <>
struct XSource<Int4Fmt, true> {
	typedef X4Shared T;
	static __device__ __forceinline__ T make(const float*, const float* sbase, int n) {
		T s;
		s.x = sbase;
		s.sums = sbase + xs_floats(n);
		return s;
	}
};
template <>
struct XSource<Int4Fmt, false> {
	typedef X4Global T;
	static __device__ __forceinline__ T make(const float* gbase, const float*, int) {
		T s;
		s.x = gbase;
		return s;
	}
};
template <>
struct XSource<F16Fmt, true> {
	typedef XShared T;
	static __device__ __forceinline__ T make(const float*, const float* sbase, int) {
		T s;
		s.p = sbase;
		return s;
	}
};
template <>
struct XSource<F16Fmt, false> {
	typedef XGlobal T;
	static __device__ __forceinline__ T make(const float* gbase, const float*, int) {
		T s;
		s.p = gbase;
		return s;
	}
};

// FmtInfo: whether a format stages int4-style (scaled, with chunk sums) and
// its staged stride in floats.
template <class Fmt>
struct FmtInfo;
template <>
struct FmtInfo<Int4Fmt> {
	static constexpr bool int4 = true;
	static __device__ __forceinline__ int stride(int n) { return xs4_floats(n); }
};
template <>
struct FmtInfo<F16Fmt> {
	static constexpr bool int4 = false;
	static __device__ __forceinline__ int stride(int n) { return xs_floats(n); }
};

// ---------------------------------------------------------------------------
// Matvec: y[r] = row r · x (+ bias[r]) for every row of one matrix, a warp
// task being NR consecutive rows (the last task clamps to the last row and
// writes only real rows). Shared by matvec_f16 and matvec_w4a16.

// bias_kind: 0 none, 1 FP16, 2 FP32.
__device__ __forceinline__ float bias_at(const void* bias, int kind, int r) {
	if (kind == 1) return __half2float(reinterpret_cast<const __half*>(bias)[r]);
	return reinterpret_cast<const float*>(bias)[r];
}

template <class Fmt, int NR, bool SHARED>
struct MatvecTasks {
	typedef typename XSource<Fmt, SHARED>::T XS;
	float* y;
	const uint8_t* mat;
	const void* bias;
	XS x;
	int bias_kind, rows, cols, cols_padded, scales_offset;

	__device__ __forceinline__ int count() const { return (rows + NR - 1) / NR; }
	__device__ __forceinline__ typename Fmt::Row row(int t, int i) const {
		return Fmt::row(mat, min(t * NR + i, rows - 1), cols, cols_padded, scales_offset);
	}
	__device__ __forceinline__ XS xs(int) const { return x; }
	__device__ __forceinline__ void emit(int t, const float (&out)[NR]) const {
		if ((threadIdx.x & 31) != 0) return;
#pragma unroll
		for (int i = 0; i < NR; i++) {
			const int r = t * NR + i;
			if (r < rows) {
				float v = out[i];
				if (bias_kind != 0) v = __fadd_rn(v, bias_at(bias, bias_kind, r));
				y[r] = v;
			}
		}
	}
};

// prefetch_tasks_l2 asks L2 for the weight rows of a warp's tasks t0, t0 + tstride, ... in order,
// up to budget bytes a warp (whole 128-byte lines, each lane every 32nd line of a row): it loads
// nothing into registers and writes nothing, so no value can change. rowbytes is the bytes of a row
// that the row reduction reads.
template <int NR, class Tasks>
__device__ __forceinline__ void prefetch_tasks_l2(const Tasks& tasks, int t0, int tstride, int rowbytes, unsigned budget) {
#ifdef __CUDA_ARCH__
	const int lane = threadIdx.x & 31;
	unsigned done = 0;
	for (int t = t0; t < tasks.count() && done < budget; t += tstride) {
#pragma unroll
		for (int i = 0; i < NR; i++) {
			const char* p = reinterpret_cast<const char*>(tasks.row(t, i));
			for (int off = 128 * lane; off < rowbytes; off += 32 * 128)
				asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + off));
		}
		done += (unsigned)(NR * rowbytes);
	}
#endif
}

// matvec_body: blocks of 8 warps (block vg.bid of vg.nblk) striding over the row tasks; x staged in
// smem (dynamic, FmtInfo<Fmt>::stride(cols) floats) when SHARED. With ENTER (the launched kernels)
// every thread calls grid_dep_enter after its first weight loads and its norm weights' loads
// (norm_preload) are issued, before the staging: the weights' HBM round trips overlap the previous
// kernel's tail. With pf > 0 (FP16 rows only; runtime/cuda tuning.waitPrefetch) each warp also asks
// L2 for up to pf bytes of its tasks' rows before the wait (prefetch_tasks_l2), so that more of
// its weights arrive while the kernel ahead still runs; the same values.
template <class Fmt, int NR, int CPL, bool SHARED, bool ENTER = false>
__device__ __forceinline__ void matvec_body(float* smem, float* __restrict__ y, const uint8_t* __restrict__ mat,
                                            const float* __restrict__ x, const void* __restrict__ bias, int bias_kind,
                                            int rows, int cols, int cols_padded, int scales_offset,
                                            NormSpec nm, VGrid vg, unsigned pf = 0) {
	MatvecTasks<Fmt, NR, SHARED> tk;
	tk.y = y, tk.mat = mat, tk.bias = bias, tk.bias_kind = bias_kind;
	tk.rows = rows, tk.cols = cols, tk.cols_padded = cols_padded, tk.scales_offset = scales_offset;
	tk.x = XSource<Fmt, SHARED>::make(x, smem, cols);
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	row_pipeline<Fmt, NR, CPL>(tk, vg.bid * nw + warp, vg.nblk * nw, cols, [&] {
		// The norm weights (constants) are loaded before the wait too.
		NormPre pre;
		pre.ok = false;
		if (ENTER && SHARED) norm_preload(pre, nm, cols);
		if constexpr (ENTER && !FmtInfo<Fmt>::int4) {
			if (pf > 0) prefetch_tasks_l2<NR>(tk, vg.bid * nw + warp, vg.nblk * nw, 2 * cols, pf);
		}
		if (ENTER) grid_dep_enter();
		if (SHARED) stage_one<FmtInfo<Fmt>::int4>(smem, x, cols, nm, &pre);
	});
}


// tc_group is one entry of a grouped tensor-core launch's table
// (matmul_tc.cu's grouped kernels): up to 64 (token, slot) pairs of one
// expert, pairs [pair0, pair0 + count) of the launch's xrows/yrows, and
// that expert's matrix (16 bytes; runtime/cuda batched.go writes it, or
// matmul_tc.cu's tc_route_groups on the device).
struct tc_group {
	const uint8_t* mat;
	int pair0, count;
};
