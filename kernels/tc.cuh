// tc.cuh: the tensor-core pieces shared by the batched matmuls
// (matmul_tc.cu) and the decode experts on the tensor cores (experts_tc.cu):
// the m16n8k16 mma, the FP16 packing, a chunk's power-of-two shift and its
// hi/lo split, the int4 codes as exact FP16 integers, and cp.async.
#pragma once

#include "common.cuh"

// mma_16816: d += a·b for one m16n8k16 tile, FP16 inputs, FP32 accumulators
// (PTX ISA fragment layouts: a0..a3 rows g, g+8, g, g+8 and columns 2q,
// 2q, 2q+8, 2q+8 (+0, +1 in each register's halves); b0, b1 rows 2q, 2q+8
// (+0, +1) of column g; d0..d3 rows g, g, g+8, g+8, columns 2q, 2q+1, with
// g = lane/4, q = lane%4).
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef __CUDA_ARCH__
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
	emu_mma_16816(d, a, b);
#endif
}

// mma_16816_z: d = a·b (the accumulators start from zero), one m16n8k16.
__device__ __forceinline__ void mma_16816_z(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef __CUDA_ARCH__
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
	    : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
#else
	d[0] = d[1] = d[2] = d[3] = 0.0f;
	emu_mma_16816(d, a, b);
#endif
}

// tc_saddr is a shared-memory address as ldmatrix takes it: 32 bits on the
// device (computed once, so a loop does not redo the generic-to-shared
// conversion at every load), the pointer itself in the emulator.
#ifdef __CUDA_ARCH__
typedef unsigned tc_saddr;
__device__ __forceinline__ tc_saddr tc_shared_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
#else
typedef unsigned long long tc_saddr;
inline tc_saddr tc_shared_addr(const void* p) { return (unsigned long long)p; }
#endif

// ldmatrix_x4 loads four 8 x 8 FP16 matrices from shared memory in one
// warp instruction: lanes 8i..8i+7 give the 16-byte rows of matrix i (a,
// 16-byte aligned), and r[i] of lane (g, q) is word q of matrix i's row g.
// With lane l addressing row l % 16 and column 8 (l / 16) of an m16 x k16
// tile it is that tile's A fragment (mma_16816's a0..a3), read with one
// instruction instead of four 4-byte loads. The emulator gathers the same
// words through shuffles of the lanes' addresses.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], tc_saddr a) {
#ifdef __CUDA_ARCH__
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(a));
#else
	const int lane = threadIdx.x & 31;
	for (int i = 0; i < 4; i++) {
		const int src = 8 * i + (lane >> 2);
		const unsigned long long lo = emu_shfl((unsigned)a, src), hi = emu_shfl((unsigned)(a >> 32), src);
		r[i] = reinterpret_cast<const unsigned*>((hi << 32) | lo)[lane & 3];
	}
#endif
}

// tc_pack packs two FP16 values into one register, a in the low half.
__device__ __forceinline__ unsigned tc_pack(__half a, __half b) {
	return (unsigned)__half_as_ushort(a) | ((unsigned)__half_as_ushort(b) << 16);
}

// tc_shift is the exponent s of a chunk whose largest magnitude is mx: with
// E mx's biased exponent, mx·2^s lies in [2^14, 2^15) for E >= 15; a tiny
// (or zero) chunk takes s = 126. Both 2^s and 2^-s are normal floats.
__device__ __forceinline__ int tc_shift(float mx) {
	const int E = (int)((__float_as_uint(mx) >> 23) & 0xff);
	return E >= 15 ? 141 - E : 126;
}
__device__ __forceinline__ float tc_pow2(int s) { return __uint_as_float((unsigned)(127 + s) << 23); }

// tc_codes is the FP16 pair (u0 - 8, u1 - 8) of byte p of w, u0 its low
// nibble (the value in the low half) and u1 its high nibble, exactly: the
// byte is copied into both halves, masked to 1024 + u0 and 1024 + 16 u1 as
// FP16 bit patterns, and one FP16 FMA per half (x 1 - 1032, x 1/16 - 72)
// gives the integers u - 8, which FP16 holds exactly (3 instructions a
// byte instead of two integer-to-FP16 conversions).
__device__ __forceinline__ unsigned tc_codes(unsigned w, int p) {
	const unsigned b = __byte_perm(w, 0u, 0x4040u | (unsigned)p | ((unsigned)p << 8));
#ifdef __CUDA_ARCH__
	// (b & 0x00F0000F) | 0x64006400 in one LOP3 (0xEA: (a & b) | c); the C
	// expression compiles to two, each taking its own immediate.
	unsigned t;
	asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(t) : "r"(b), "n"(0x00F0000F), "n"(0x64006400));
	const __half2 r = __hfma2(*reinterpret_cast<const __half2*>(&t), __floats2half2_rn(1.0f, 0.0625f),
	                          __floats2half2_rn(-1032.0f, -72.0f));
	return *reinterpret_cast<const unsigned*>(&r);
#else
	// The emulator runs the same bit patterns through the same FMA (its
	// products and sums are exact in FP32), so it checks the selector and
	// the masks.
	const unsigned t = (b & 0x00F0000Fu) | 0x64006400u;
	__half h0, h1;
	h0.x = (unsigned short)(t & 0xffffu), h1.x = (unsigned short)(t >> 16);
	return tc_pack(__float2half_rn(__fmaf_rn(__half2float(h0), 1.0f, -1032.0f)),
	               __float2half_rn(__fmaf_rn(__half2float(h1), 0.0625f, -72.0f)));
#endif
}

// tc_split8 splits a thread's 8 values of a 32-value chunk (the four
// threads of the chunk are neighbouring lanes, all active): the chunk's
// shift s from its largest magnitude, then hi = fp16(v 2^s) and
// lo = fp16(v 2^s - hi) as 4 packed pairs each. It returns s. Both the
// in-kernel staging and tc_split_rows use it, so both give the same bits.
__device__ __forceinline__ int tc_split8(const float (&v)[8], unsigned (&h)[4], unsigned (&l)[4]) {
	float mx = 0.0f;
#pragma unroll
	for (int j = 0; j < 8; j++) mx = fmaxf(mx, fabsf(v[j]));
	mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
	mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
	const int s = tc_shift(mx);
	const float up = tc_pow2(s);
#pragma unroll
	for (int j = 0; j < 8; j += 2) {
		const float a = __fmul_rn(v[j], up), b = __fmul_rn(v[j + 1], up);
		const __half ha = __float2half_rn(a), hb = __float2half_rn(b);
		h[j >> 1] = tc_pack(ha, hb);
		l[j >> 1] = tc_pack(__float2half_rn(__fsub_rn(a, __half2float(ha))), __float2half_rn(__fsub_rn(b, __half2float(hb))));
	}
	return s;
}

// cp.async: 16 bytes (weights, L2 only, 256-byte L2 fetches), 8 bytes (a
// thread's codes of a chunk, matmul_tc.cu's ring) or 4 bytes (a scale's
// aligned word) from global to shared memory without registers;
// a thread's copies form groups (cp_async_commit, common.cuh), and
// cp_async_wait<N> returns once at most N of its groups are still in
// flight. The emulator copies at once.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
	             : "memory");
#else
	memcpy(dst, src, 16);
#endif
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
#else
	memcpy(dst, src, 8);
#endif
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
#else
	memcpy(dst, src, 4);
#endif
}
