// router.cu: softmax over the router logits and top-k selection
// (router_topk_block in step.cuh). Writes ids[k] and the un-renormalised p
// of each; the host renormalises.
//
// Launch: one block of 256 threads; dynamic shared memory E floats + E bytes.
#include "common.cuh"  // listed for the PTX source hashes (step.cuh includes it)
#include "step.cuh"

extern "C" __global__ void __launch_bounds__(256) router_topk(const float* logits, int E, int k, int* ids_out,
                                                             float* w_out) { grid_dep_enter();
	extern __shared__ float p[];  // [E] probabilities, then E taken flags
	router_topk_block(logits, E, k, ids_out, w_out, p);
}
