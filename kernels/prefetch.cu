// prefetch.cu: L2 prefetch of weight bytes, for the side branch of a
// captured decode step (runtime/cuda/step_prefetch.go, plan.L2Prefetches).
//
// A decode step's latency-bound instructions (attention, routing) read
// almost nothing from HBM while they run. prefetch_l2 brings the dense
// weights of the instructions after them into L2 in that time, so the
// matvecs that follow read them from L2. It loads nothing into registers
// and writes nothing: it cannot change any value a step computes, only
// where the step's loads find their bytes.
//
// Lines are 128 bytes. With keep set the lines get the evict_last priority,
// so that the routed experts' rows streaming through L2 between the
// prefetch and its consumer do not push them out first.
//
// It is launched plainly (never as a programmatic dependent launch: it is
// not in runtime/cuda's pdlModules) on the stepper's side stream, which
// forks from the compute stream inside the capture and joins it at the end.

// prefetch_l2: lines [0, bytes) of p, line i by thread i mod (grid x
// block). Launch: any grid of 1-D blocks.
extern "C" __global__ void __launch_bounds__(256) prefetch_l2(const char* p, unsigned long long bytes, int keep) {
	const unsigned long long stride = 128ull * blockDim.x * gridDim.x;
	unsigned long long off = 128ull * (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x);
	if (keep) {
		for (; off < bytes; off += stride) asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + off));
	} else {
		for (; off < bytes; off += stride) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
	}
}
