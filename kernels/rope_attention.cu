// rope_attention.cu: RoPE, KV-cache append and single-query attention. The
// bodies are in step.cuh (rope_pair, attention_split), shared with decode.cu.
#include "common.cuh"  // listed for the PTX source hashes (step.cuh includes it)
#include "step.cuh"

// rope: rotate x[nHeads*hd] in place at position pos, HF rotate_half pairs
// (i, i+hd/2). One thread per pair, grid-stride.
extern "C" __global__ void rope_f32(float* x, int n_heads, int hd, int pos, double theta) { grid_dep_enter();
	const int half = hd >> 1;
	for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < n_heads * half; idx += gridDim.x * blockDim.x) {
		const int h = idx / half, i = idx - h * half;
		rope_pair(x + (size_t)h * hd, i, hd, pos, theta);
	}
}

// kv_append: kc[pos*n + j] = k[j], vc[pos*n + j] = v[j] for j < n.
extern "C" __global__ void kv_append_f32(float* kc, float* vc, const float* k, const float* v, int n, int pos) { grid_dep_enter();
	for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
		kc[(size_t)pos * n + j] = k[j];
		vc[(size_t)pos * n + j] = v[j];
	}
}

// kv_append_f16: the FP16 cache's append, kc[off + j] = k[j] and
// vc[off + j] = v[j] rounded to nearest even, for j < n: one position
// (off = pos*n) or a batch's T rows at once (n = T*rows, off = pos0*rows).
extern "C" __global__ void kv_append_f16(__half* kc, __half* vc, const float* k, const float* v, int n, long long off) { grid_dep_enter();
	for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
		kv_st(kc + off + j, k[j]);
		kv_st(vc + off + j, v[j]);
	}
}

// attention: dst[h*hd..] = softmax(q_h·K^T/sqrt(hd)) · V over positions
// 0..n-1 (attention_split, split over positions). Launch: n_heads*ATT_SPLIT
// blocks of 256 threads; part[n_heads][ATT_SPLIT][hd+2] scratch, cnt[n_heads]
// zero between launches. attention_f32_kv16: the same over an FP16 cache.
#define ATTENTION(NAME, KV)                                                                                         \
	extern "C" __global__ void __launch_bounds__(256) NAME(float* dst, float* part, unsigned* cnt, const float* q,   \
	                                                       const KV* kc, const KV* vc, int n, int n_heads, int n_kv, \
	                                                       int hd) {                                                 \
		grid_dep_enter();                                                                                          \
		attention_split(dst, part, cnt, q, kc, vc, n, n_heads, n_kv, hd, blockIdx.x);                              \
	}
ATTENTION(attention_f32, float)
ATTENTION(attention_f32_kv16, __half)
