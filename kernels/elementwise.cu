// elementwise.cu: SiLUMul, Add, AddScaled, AddGated over n FP32 values.
// Launch: 256-thread blocks, one value per thread, grid-stride. silu_mul and
// add_scaled are the functions the grouped expert kernels use, so the scalar
// executor's SiLUMul/AddScaled steps produce the same bits as grouped-v1.
#include "common.cuh"

extern "C" __global__ void silu_mul_f32(float* d, const float* g, const float* u, int n) { grid_dep_enter();
	silu_mul_span(d, g, u, n, launched_grid());
}

extern "C" __global__ void add_f32(float* d, const float* a, const float* b, int n) { grid_dep_enter(); add_span(d, a, b, n, launched_grid()); }

extern "C" __global__ void add_scaled_f32(float* d, const float* x, float alpha, int n) { grid_dep_enter();
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		d[i] = add_scaled(d[i], alpha, x[i]);
}

// add_gated_f32: d += sigmoid(g[0]) * x, the sigmoid in double rounded once
// (the CPU reference's float32(1/(1+exp(-g)))).
extern "C" __global__ void add_gated_f32(float* d, const float* x, const float* g, int n) { grid_dep_enter();
	const float s = (float)(1.0 / (1.0 + exp(-(double)g[0])));
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		d[i] = add_scaled(d[i], s, x[i]);
}
