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

// ---------------------------------------------------------------------------
// Activation staging.
//
// Matvec kernels stage the activation vector x in shared memory once per
// block (stage_x for fp16 rows; stage_x4, below, for int4 rows: pre-scaled,
// with per-chunk sums, in the same layout). Lanes read it in 16-byte pieces at a lane stride of 128 bytes (int4:
// 32 values per lane) or 32 bytes (fp16: 8 values per lane); stored plainly,
// the int4 pattern would put all 32 lanes on one bank. Padding 4 floats after
// every 32 makes both patterns conflict-free for 128-bit shared loads:
//
//	value i lives at xs_index(i) = i + 4*(i/32)       (36 floats per 32 values)
__device__ __forceinline__ int xs_index(int i) { return i + ((i >> 5) << 2); }

// xs_floats is the shared-memory size in floats for n staged values
// (n rounded up to a multiple of 32).
__host__ __device__ __forceinline__ int xs_floats(int n) { return ((n + 31) >> 5) * 36; }

// stage_x copies x[0..n) into the padded shared layout and zero-fills values
// n..round_up(n, 32) so whole 32-value chunks can be read without checks.
// The caller synchronises the block afterwards.
__device__ __forceinline__ void stage_x(float* xs, const float* __restrict__ x, int n) {
	int n32 = (n + 31) & ~31;
	for (int i = threadIdx.x; i < n32; i += blockDim.x) xs[xs_index(i)] = i < n ? x[i] : 0.0f;
}

// XShared / XGlobal say where an fp16 row-dot reads its activations: staged in shared memory
// (the padded layout above) or directly from global memory (plain layout,
// through L1) when the staging would not fit in shared memory. Both give the
// same values, so the arithmetic and the result are the same.
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
		return __ldg(reinterpret_cast<const float4*>(p + i));
	}
	__device__ __forceinline__ float load1(int i) const { return __ldg(p + i); }
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
//	                                  to sum j%4, combined (s0+s1)+(s2+s3))
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
// This is the one per-row reduction for int4: MatVec over an expert matrix,
// the grouped gate/up kernel and the grouped down kernel all call int4_rows,
// so every output has the same bits whichever executor computed it.

#define X_SCALE __uint_as_float(0x67800000u)  // 2^80

__device__ __forceinline__ float out_unscale(float v) { return __fmul_rn(v, __uint_as_float(0x62000000u)); }  // * 2^69
__device__ __forceinline__ float neg_2m146() { return __uint_as_float(0x80000008u); }                        // -2^-146

// nib_at is the subnormal n * 2^-149 for the nibble in byte `byte` of w
// (nibbles already isolated: w & 0x0F0F0F0F or (w >> 4) & 0x0F0F0F0F).
__device__ __forceinline__ float nib_at(uint32_t w, int byte) {
	return __uint_as_float(__byte_perm(w, 0u, 0x4440u | byte));
}

// XChunk holds 32 consecutive activations (one int4 chunk, or two fp16
// chunks' worth) in registers.
struct XChunk {
	float4 v[8];
};

// int4 activation sources: staged (scaled x in the padded layout, plus the
// per-chunk sums u) or read from global memory and scaled on the fly. Both
// produce the same x' and u bits.
struct X4Shared {
	const float* x;     // shared, padded layout, x * 2^80
	const float* sums;  // shared, u per chunk
	__device__ __forceinline__ float load(XChunk& xc, int c) const {
#pragma unroll
		for (int j = 0; j < 8; j++) xc.v[j] = *reinterpret_cast<const float4*>(x + xs_index(32 * c + 4 * j));
		return sums[c];
	}
};
struct X4Global {
	const float* x;  // global, plain, unscaled; whole chunks readable
	__device__ __forceinline__ float load(XChunk& xc, int c) const {
		float u = 0.0f;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			float4 v = __ldg(reinterpret_cast<const float4*>(x + 32 * c + 4 * j));
			v.x = __fmul_rn(v.x, X_SCALE), v.y = __fmul_rn(v.y, X_SCALE);
			v.z = __fmul_rn(v.z, X_SCALE), v.w = __fmul_rn(v.w, X_SCALE);
			u = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(u, v.x), v.y), v.z), v.w);
			xc.v[j] = v;
		}
		return u;
	}
};

// xs4_floats is the shared size (floats) of one staged int4 activation
// vector of n values: the padded values, then the chunk sums rounded up to
// a multiple of 4 floats (so consecutive vectors stay 16-byte aligned).
__host__ __device__ __forceinline__ int xs4_floats(int n) { return xs_floats(n) + ((((n + 31) >> 5) + 3) & ~3); }

// stage_x4 stages x[0..n) for the int4 kernels: x' = x * 2^80 in the padded
// layout (zeros up to a multiple of 32), then u per chunk. It synchronises
// the block internally; the caller synchronises again before reading.
__device__ __forceinline__ X4Shared stage_x4(float* smem, const float* __restrict__ x, int n) {
	const int n32 = (n + 31) & ~31;
	float* xs = smem;
	float* sums = smem + xs_floats(n);
	for (int i = threadIdx.x; i < n32; i += blockDim.x) xs[xs_index(i)] = i < n ? __fmul_rn(x[i], X_SCALE) : 0.0f;
	__syncthreads();
	for (int c = threadIdx.x; c < (n32 >> 5); c += blockDim.x) {
		float u = 0.0f;
		for (int j = 0; j < 32; j++) u = __fadd_rn(u, xs[xs_index(32 * c + j)]);
		sums[c] = u;
	}
	X4Shared s;
	s.x = xs;
	s.sums = sums;
	return s;
}

// int4_chunk_dot is t for one chunk: 16 bytes of packed nibbles (value 2j in
// the low nibble of byte j) against its 32 scaled activations.
__device__ __forceinline__ float int4_chunk_dot(uint4 w, const XChunk& xc) {
	float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
	const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
	for (int k = 0; k < 4; k++) {
		const uint32_t lo = words[k] & 0x0F0F0F0Fu;         // values 8k+0, +2, +4, +6
		const uint32_t hi = (words[k] >> 4) & 0x0F0F0F0Fu;  // values 8k+1, +3, +5, +7
		const float4 xa = xc.v[2 * k], xb = xc.v[2 * k + 1];
		// value 8k+j goes to partial sum j%4
		s0 = __fmaf_rn(nib_at(lo, 0), xa.x, s0);
		s1 = __fmaf_rn(nib_at(hi, 0), xa.y, s1);
		s2 = __fmaf_rn(nib_at(lo, 1), xa.z, s2);
		s3 = __fmaf_rn(nib_at(hi, 1), xa.w, s3);
		s0 = __fmaf_rn(nib_at(lo, 2), xb.x, s0);
		s1 = __fmaf_rn(nib_at(hi, 2), xb.y, s1);
		s2 = __fmaf_rn(nib_at(lo, 3), xb.z, s2);
		s3 = __fmaf_rn(nib_at(hi, 3), xb.w, s3);
	}
	return __fadd_rn(__fadd_rn(s0, s1), __fadd_rn(s2, s3));
}

// Int4Row locates one row of an int4 matrix.
struct Int4Row {
	const uint8_t* q;   // the row's packed bytes (16-byte aligned)
	const __half* sc;   // the row's scales
};

__device__ __forceinline__ Int4Row int4_row(const uint8_t* mat, int r, int colsPadded, int scalesOffset) {
	Int4Row row;
	row.q = mat + (size_t)r * (colsPadded >> 1);
	row.sc = reinterpret_cast<const __half*>(mat + scalesOffset) + (size_t)r * (colsPadded >> 8);
	return row;
}

// int4_rows computes NR row dots in one warp, row i against activations
// xs[i]. Rows i and i' with i/XG == i'/XG share their activations (the
// caller passes the same source for them), which are then loaded once per
// chunk: XG = NR for a matvec or gate/up (one x), XG = 2 for the down kernel
// (two output rows of one expert). Loads of all NR rows (U chunks each) are
// issued before any arithmetic so a warp keeps NR*U*512 bytes in flight.
// out[i] is the same in every lane. The per-row arithmetic does not depend
// on NR, U, XG or the source type.
template <int NR, int U, int XG, class XS>
__device__ __forceinline__ void int4_rows(const Int4Row (&rows)[NR], const XS (&xs)[NR], int cols, float (&out)[NR]) {
	const int lane = threadIdx.x & 31;
	const int nchunks = (cols + 31) >> 5;
	float acc[NR];
#pragma unroll
	for (int i = 0; i < NR; i++) acc[i] = 0.0f;
	for (int c0 = lane; c0 < nchunks; c0 += 32 * U) {
		uint4 w[U][NR];
		float s[U][NR];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int c = c0 + 32 * u;
#pragma unroll
			for (int i = 0; i < NR; i++) {
				if (c < nchunks) {
					w[u][i] = __ldg(reinterpret_cast<const uint4*>(rows[i].q) + c);
					s[u][i] = __half2float(rows[i].sc[c >> 3]);
				}
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int c = c0 + 32 * u;
			if (c < nchunks) {
				XChunk xc;
				float xsum = 0.0f;
#pragma unroll
				for (int i = 0; i < NR; i++) {
					if (i % XG == 0) xsum = xs[i].load(xc, c);
					const float t = int4_chunk_dot(w[u][i], xc);
					const float p = __fmaf_rn(neg_2m146(), xsum, t);
					acc[i] = __fmaf_rn(s[u][i], p, acc[i]);
				}
			}
		}
	}
#pragma unroll
	for (int i = 0; i < NR; i++) out[i] = out_unscale(warp_sum(acc[i]));
}

// ---------------------------------------------------------------------------
// FP16 rows (non-routed weights and fp16 expert records). Activations are
// plain FP32 (XShared / XGlobal); XG groups rows sharing them, as for int4.
//
// When cols % 8 == 0 a lane reads 16-byte chunks (8 values); lane l handles
// chunks l, l+32, ... and accumulates value j of a chunk into partial sum
// j%2; the lane result is s0+s1 and the row result warp_sum of that. Other
// widths (tiny test shapes) read one value at a time: lane l handles values
// l, l+32, ... into one sum. The path depends only on cols.

template <int NR, int U, int XG, class XS>
__device__ __forceinline__ void f16_rows(const __half* const (&rows)[NR], const XS (&xs)[NR], int cols, float (&out)[NR]) {
	const int lane = threadIdx.x & 31;
	float a0[NR], a1[NR];
#pragma unroll
	for (int i = 0; i < NR; i++) a0[i] = a1[i] = 0.0f;
	if ((cols & 7) == 0) {
		const int nchunks = cols >> 3;
		for (int c0 = lane; c0 < nchunks; c0 += 32 * U) {
			uint4 w[U][NR];
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int c = c0 + 32 * u;
#pragma unroll
				for (int i = 0; i < NR; i++)
					if (c < nchunks) w[u][i] = __ldg(reinterpret_cast<const uint4*>(rows[i]) + c);
			}
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int c = c0 + 32 * u;
				if (c < nchunks) {
					float4 xa, xb;
#pragma unroll
					for (int i = 0; i < NR; i++) {
						if (i % XG == 0) xa = xs[i].load4(8 * c), xb = xs[i].load4(8 * c + 4);
						const __half2* h = reinterpret_cast<const __half2*>(&w[u][i]);
						const float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
						const float2 f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
						a0[i] = __fmaf_rn(f0.x, xa.x, a0[i]);
						a1[i] = __fmaf_rn(f0.y, xa.y, a1[i]);
						a0[i] = __fmaf_rn(f1.x, xa.z, a0[i]);
						a1[i] = __fmaf_rn(f1.y, xa.w, a1[i]);
						a0[i] = __fmaf_rn(f2.x, xb.x, a0[i]);
						a1[i] = __fmaf_rn(f2.y, xb.y, a1[i]);
						a0[i] = __fmaf_rn(f3.x, xb.z, a0[i]);
						a1[i] = __fmaf_rn(f3.y, xb.w, a1[i]);
					}
				}
			}
		}
	} else {
		for (int v = lane; v < cols; v += 32) {
#pragma unroll
			for (int i = 0; i < NR; i++) a0[i] = __fmaf_rn(__half2float(rows[i][v]), xs[i].load1(v), a0[i]);
		}
	}
#pragma unroll
	for (int i = 0; i < NR; i++) out[i] = warp_sum(__fadd_rn(a0[i], a1[i]));
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
