// embed_argmax.cu: embedding gather and greedy selection.
#include "common.cuh"  // listed for the PTX source hashes (step.cuh includes it)
#include "step.cuh"

// embed: dst[j] = table[tok*D + j]; table FP16 (kind 1) or FP32 (kind 2).
extern "C" __global__ void embed_gather(float* dst, const void* table, int kind, int tok, int D) { grid_dep_enter();
	for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < D; j += gridDim.x * blockDim.x) {
		const size_t at = (size_t)tok * D + j;
		dst[j] = kind == 1 ? __half2float(reinterpret_cast<const __half*>(table)[at]) : reinterpret_cast<const float*>(table)[at];
	}
}

// embed_rows: dst[t*D + j] = table[toks[t]*D + j] for t < T (embed_gather
// on each row: the same values). Op by op only (a batched prefill's
// tokens); it waits on its prerequisite grids first, as every kernel of a
// PDL module must (kernels.PDLModules; tuning.prefillPDL).
extern "C" __global__ void embed_rows(float* dst, const void* table, int kind, const int* toks, int T, int D) {
	grid_dep_enter();
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)T * D; i += (long long)gridDim.x * blockDim.x) {
		const int t = (int)(i / D), j = (int)(i - (long long)t * D);
		const size_t at = (size_t)toks[t] * D + j;
		dst[i] = kind == 1 ? __half2float(reinterpret_cast<const __half*>(table)[at]) : reinterpret_cast<const float*>(table)[at];
	}
}

// argmax_masked: *out = argmax_block (step.cuh): the index of the largest
// logit, skipping NaN and the nm ids in masked (EOS suppression); ties pick
// the lowest index; -1 when nothing is left. Launch: one block of 1024
// threads.
extern "C" __global__ void __launch_bounds__(1024) argmax_masked(const float* logits, int n, const int* masked,
                                                                int nm, int* out) { grid_dep_enter();
	const int i = argmax_block(logits, n, masked, nm);
	if (threadIdx.x == 0) *out = i;
}
