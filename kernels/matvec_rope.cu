// matvec_rope.cu: the q|k|v projection with RoPE and the KV append in its
// epilogue (runtime/cuda tuning.ropeInQKV), matvec_f16.cu's row pipeline
// with step.cuh's rotation. Its own module: step.cuh's attention code does
// not build in the CPU emulator (kernels/emu), which compiles matvec_f16.cu.
#include "common.cuh"
#include "step.cuh"

extern __shared__ __align__(16) float xs_smem[];

// matvec_f16_rope_kv{,_kv16}: the q|k|v projection of a layer without q/k
// norms (Qwen) with RoPE and the KV append in its epilogue, replacing
// matvec_f16_r*_s followed by rope_kv_step{,_kv16} with the same bits. A
// warp task is two rows that RoPE pairs: rows (h·hd + i, h·hd + i + hd/2)
// of the query heads, then of the key heads, then two neighbouring value
// rows. Each row's dot is row_pipeline's (the result does not depend on
// which rows share a task) plus its bias; then, at pos = st[1]:
//
//	query pair: rotated (rope_rot, rope_kv_step's arithmetic) into q
//	key pair:   kept as projected in k, rotated into kc[pos]
//	value rows: kept in v and stored at vc[pos]
//
// y is the q|k|v vector (nh·hd, then nkv·hd twice). Dynamic shared memory:
// xs_floats(cols) + 4 floats (pos after the staged vector).
template <typename KV>
struct RopeKVTasks {
	typedef XShared XS;
	float* y;
	KV *kc, *vc;
	const uint8_t* mat;
	const void* bias;
	const int* spos;  // shared: pos
	XS xs_;
	int bias_kind, cols, nh, nkv, hd;
	double theta;
	__device__ __forceinline__ int count() const { return (nh * hd + 2 * nkv * hd) / 2; }
	// row i (0 or 1) of task t
	__device__ __forceinline__ int row_of(int t, int i) const {
		const int half = hd >> 1, nq = nh * half, nk = nkv * half;
		if (t < nq + nk) {
			const int j = t < nq ? t : t - nq, h = j / half, p = j - h * half;
			return (t < nq ? 0 : nh * hd) + h * hd + p + i * half;
		}
		return (nh + nkv) * hd + 2 * (t - nq - nk) + i;
	}
	__device__ __forceinline__ F16Fmt::Row row(int t, int i) const { return F16Fmt::row(mat, row_of(t, i), cols, 0, 0); }
	__device__ __forceinline__ XS xs(int) const { return xs_; }
	__device__ __forceinline__ void emit(int t, const float (&out)[2]) const {
		if ((threadIdx.x & 31) != 0) return;
		const int r0 = row_of(t, 0), r1 = row_of(t, 1);
		float a = out[0], c = out[1];
		if (bias_kind != 0) a = __fadd_rn(a, bias_at(bias, bias_kind, r0)), c = __fadd_rn(c, bias_at(bias, bias_kind, r1));
		const int half = hd >> 1, nq = nh * half, nk = nkv * half, kvn = nkv * hd, pos = *spos;
		if (t < nq) {
			rope_rot(a, c, pos, rope_inv_freq((t % half), hd, theta));
			y[r0] = a, y[r1] = c;
		} else if (t < nq + nk) {
			y[r0] = a, y[r1] = c;
			const int j = r0 - nh * hd;  // the key's index in k: h·hd + p
			rope_rot(a, c, pos, rope_inv_freq((t - nq) % half, hd, theta));
			kv_st(kc + (size_t)pos * kvn + j, a);
			kv_st(kc + (size_t)pos * kvn + j + half, c);
		} else {
			y[r0] = a, y[r1] = c;
			const int j = r0 - (nh + nkv) * hd;
			kv_st(vc + (size_t)pos * kvn + j, a);
			kv_st(vc + (size_t)pos * kvn + j + 1, c);
		}
	}
};

#define MATVEC_F16_ROPE_KV(NAME, KV)                                                                                  \
	extern "C" __global__ void __launch_bounds__(256, 2) NAME(float* y, const __half* W, const float* x, const void* bias, \
	                                                       int bias_kind, int cols, const void* nw, int nw_kind, float eps,  \
	                                                       KV* kc, KV* vc, int nh, int nkv, int hd, const int* st,         \
	                                                       double theta) {                                                 \
		RopeKVTasks<KV> tk;                                                                                                \
		tk.y = y, tk.kc = kc, tk.vc = vc, tk.mat = reinterpret_cast<const uint8_t*>(W), tk.bias = bias;                  \
		tk.spos = reinterpret_cast<const int*>(xs_smem + xs_floats(cols));                                                 \
		tk.xs_ = XShared{xs_smem}, tk.bias_kind = bias_kind, tk.cols = cols, tk.nh = nh, tk.nkv = nkv, tk.hd = hd;         \
		tk.theta = theta;                                                                                                  \
		const NormSpec nm{nw, nw_kind, eps};                                                                               \
		const int nw8 = blockDim.x >> 5, warp = threadIdx.x >> 5;                                                          \
		row_pipeline<F16Fmt, 2, 4>(tk, blockIdx.x * nw8 + warp, gridDim.x * nw8, cols, [&] {                              \
			NormPre pre;                                                                                                   \
			pre.ok = false;                                                                                                \
			norm_preload(pre, nm, cols);                                                                                   \
			grid_dep_enter();                                                                                              \
			if (threadIdx.x == 0) reinterpret_cast<int*>(xs_smem + xs_floats(cols))[0] = st[1];                           \
			stage_one<false>(xs_smem, x, cols, nm, &pre); /* its barrier publishes pos too */                              \
		});                                                                                                                \
	}

MATVEC_F16_ROPE_KV(matvec_f16_rope_kv, float)
MATVEC_F16_ROPE_KV(matvec_f16_rope_kv_kv16, __half)
