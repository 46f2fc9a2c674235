// bench.cu: helpers for kernel benchmarks (not used by the engine).
//
// spin_ns keeps one thread busy for ns nanoseconds of the GPU's global
// timer. A benchmark enqueues it before its timed launches so the launches
// queue up behind it and then run back to back: CUDA events then time the
// kernels, not the ~3.4 µs it takes Go to issue each launch.
#include <stdint.h>

extern "C" __global__ void spin_ns(long long ns) {
	uint64_t t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while ((long long)(t - t0) < ns);
}
