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

// attention: dst[h*hd..] = softmax(q_h·K^T/sqrt(hd)) · V over positions
// 0..n-1 (attention_split, split over positions). Launch: n_heads*ATT_SPLIT
// blocks of 256 threads; part[n_heads][ATT_SPLIT][hd+2] scratch, cnt[n_heads]
// zero between launches.
extern "C" __global__ void __launch_bounds__(256) attention_f32(float* dst, float* part, unsigned* cnt, const float* q,
                                                               const float* kc, const float* vc, int n, int n_heads,
                                                               int n_kv, int hd) { grid_dep_enter();
	attention_split(dst, part, cnt, q, kc, vc, n, n_heads, n_kv, hd, blockIdx.x);
}
