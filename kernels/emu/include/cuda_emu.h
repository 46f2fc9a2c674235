// cuda_emu.h: just enough of CUDA to run Horizon's row kernels on the CPU,
// one fiber per CUDA thread (ucontext), switching only at __syncthreads,
// __syncwarp and warp shuffles, so warp-synchronous code behaves as on a GPU.
// Blocks run one after another. Not a performance tool: a correctness oracle.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <algorithm>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__
#define __align__(n)
#define __launch_bounds__(...)
#define __grid_constant__

struct dim3_ { unsigned x, y, z; };
extern dim3_ threadIdx, blockIdx, blockDim, gridDim;

struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
inline float2 make_float2(float a, float b) { return float2{a, b}; }

struct __half { unsigned short x; };
struct alignas(4) __half2 { __half x, y; };
inline float __half2float(__half h) {
	const unsigned s = (h.x >> 15) & 1, e = (h.x >> 10) & 31, m = h.x & 1023;
	float v;
	if (e == 0) v = std::ldexp((float)m, -24);
	else if (e == 31) v = m ? NAN : INFINITY;
	else v = std::ldexp((float)(m | 1024), (int)e - 25);
	return s ? -v : v;
}
inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
// __float2half_rn: round to nearest even, with overflow to infinity at
// 65520 and gradual underflow, as the GPU's conversion.
inline __half __float2half_rn(float f) {
	unsigned x;
	std::memcpy(&x, &f, 4);
	const unsigned sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
	unsigned h;
	if (ax >= 0x7f800000u) h = ax > 0x7f800000u ? 0x7e00u : 0x7c00u;
	else if (ax >= 0x477ff000u) h = 0x7c00u;
	else if (ax >= 0x38800000u) h = (ax + 0xfffu + ((ax >> 13) & 1u) - 0x38000000u) >> 13;
	else {
		float af;
		std::memcpy(&af, &ax, 4);
		h = (unsigned)std::nearbyint(af * 16777216.0f);  // units of 2^-24, ties to even
	}
	return __half{(unsigned short)(sign | h)};
}
inline __half __int2half_rn(int i) { return __float2half_rn((float)i); }
inline unsigned short __half_as_ushort(__half h) { return h.x; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }

template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }  // a streaming load: the same value
// __threadfence orders a thread's global writes; fibers share one memory and switch only at collectives.
inline void __threadfence() {}
inline void __threadfence_system() {}
// __nanosleep: a spin's pause; it lets the block's other fibers run (a warp
// may wait for another warp's counter). The emulator runs blocks one after
// another, so a wait for another block still spins for ever.
void emu_yield();
inline void __nanosleep(unsigned) { emu_yield(); }
// clock64: an SM's cycle counter; the emulator does not model time.
inline long long clock64() { return 0; }

inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
	const uint64_t v = ((uint64_t)y << 32) | x;
	unsigned r = 0;
	for (int i = 0; i < 4; i++) {
		const unsigned sel = (s >> (4 * i)) & 7;
		r |= (unsigned)((v >> (8 * sel)) & 0xff) << (8 * i);
	}
	return r;
}
using std::min;
using std::max;

// Synchronisation (emu.cpp).
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);
unsigned emu_shfl_xor(unsigned v, int o);
// emu_mma_16816 is mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 as a
// warp collective: every lane's fragments in, d += a·b with the PTX ISA's
// fragment layouts, each output a float FMA chain over k in order (the
// tensor cores' order and rounding differ: compare with a tolerance).
void emu_mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]);
// emu_ballot is __ballot_sync over the whole warp (a collective, like the
// shuffles). atomicAdd needs no lock: fibers switch only at collectives.
unsigned emu_ballot(int p);
inline unsigned __ballot_sync(unsigned, int p) { return emu_ballot(p); }
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
inline int __all_sync(unsigned m, int p) { return __ballot_sync(m, p) == 0xffffffffu; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
// An atomic add counts as progress for the deadlock check: a warp spinning
// on a counter (__nanosleep yields) waits for exactly such adds.
void emu_progress();
inline int atomicAdd(int* p, int v) {
	const int old = *p;
	*p = old + v;
	emu_progress();
	return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
	const unsigned old = *p;
	*p = old + v;
	emu_progress();
	return old;
}
unsigned emu_shfl(unsigned v, int src);
inline float __shfl_sync(unsigned, float v, int src) { return __uint_as_float(emu_shfl(__float_as_uint(v), src)); }
inline float __shfl_xor_sync(unsigned, float v, int o) { return __uint_as_float(emu_shfl_xor(__float_as_uint(v), o)); }
inline int __shfl_xor_sync(unsigned, int v, int o) { return (int)emu_shfl_xor((unsigned)v, o); }

// Launch (emu.cpp): runs kernel(args...) over grid x block threads with smem
// bytes of dynamic shared memory (xs_smem).
#include <functional>
void emu_launch(unsigned grid, unsigned block, size_t smem, std::function<void()> body);
