// mmtc.cpp: the tensor-core batched matmul kernels (matmul_tc.cu, the
// split-K FP16 kernel and its reduction included) on the emulator, against
// a float64 reference over the same inputs. The
// emulator's mma is an FMA chain in k order, not the tensor cores' order,
// so the check is a bound, not bits: |got - ref| <= 2e-6 * sum_k m_k |w_k|
// + 1e-30 per output, m_k the largest |x| of k's 32-value chunk (the hi/lo split keeps ~22 bits of each activation,
// the sums are FP32). Cases: FP16 and int4 matrices, token counts below,
// at and above a 64-token tile, row counts off the 64-row tile, column
// counts off the 32-value chunk (and Qwen's padded 1408), gathered and
// scattered rows, both bias kinds, activations over 20 orders of magnitude
// and beyond FP16's range. It also checks that a token's outputs are the
// same bits whichever tokens share its launch (capacity, expert waves and
// tiles must not change them), that the grouped kernels give each
// expert's pairs the bits of that expert's own launch, that the
// pre-split kernels (tc_split_rows, then the _pre twins) give the bits of
// the in-kernel split, and that the cp.async ring twins (the int4 grouped
// kernels, one and two chunks a stage, and their narrow twins; the FP16
// split-K and pre-split kernels), the fragment-direct grouped int4 kernel and the fragment-direct
// FP16 split-K kernel give the two-stage (split-K) kernels' bits (the emulator copies at once, so
// this checks the ring's and the slices' indexing and values, not their timing); and
// tc_route_groups' pairs and tables against a grouping built here (`mmtc route` runs that alone);
// and that matmul_splitk_reduce_parts gives each row block matmul_splitk_reduce's bits (both runs).
//
//	mmtc            (built by build.sh next to the harness)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "cuda_emu.h"

extern "C" void matmul_tc_f16(float*, const uint8_t*, const float*, const void*, int, int, int, int, int, int, const int*,
                              const int*);
extern "C" void matmul_tc_w4a16(float*, const uint8_t*, const float*, const void*, int, int, int, int, int, int, const int*,
                                const int*);
struct tc_group {
	const uint8_t* mat;
	int pair0, count;
};
extern "C" void tc_split_rows(const float*, int, int, __half*, __half*, float*);
extern "C" void tc_split_rows_a16r(const float*, int, int, __half*, float*);
extern "C" void tc_split_rows_a16c(const float*, int, int, __half*, __half*, float*, float*);
extern "C" void matmul_tc_f16_splitk_a16(float*, const uint8_t*, const float*, int, int, int, int);
extern "C" void matmul_tc_grouped_pre_fd_a16r_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int,
                                                    int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd16_a16r_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int,
                                                      int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd_gu_a16r_w4a16(float*, const __half*, const __half*, const float*, const tc_group*,
                                                       const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd16_gu_a16r_w4a16(float*, const __half*, const __half*, const float*, const tc_group*,
                                                         const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_pre_f16(float*, const uint8_t*, const __half*, const __half*, const float*, const void*, int, int, int,
                                  int, int, int, const int*, const int*);
extern "C" void matmul_tc_pre_w4a16(float*, const uint8_t*, const __half*, const __half*, const float*, const void*, int, int,
                                    int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_f16_splitk(float*, const uint8_t*, const float*, int, int, int, int);
extern "C" void matmul_splitk_reduce(float*, const float*, int, int, int, const void*, int);
extern "C" void matmul_splitk_reduce_parts(float*, float*, float*, const float*, int, int, int, int, int, const void*, int);
extern "C" void matmul_tc_grouped_f16(float*, const float*, const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_w4a16(float*, const float*, const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_f16(float*, const __half*, const __half*, const float*, const tc_group*, int, int, int, int,
                                          int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int, int,
                                            int, int, const int*, const int*);
extern "C" void matmul_tc_f16_splitk_ring(float*, const uint8_t*, const float*, int, int, int, int);
extern "C" void matmul_tc_pre_ring_f16(float*, const uint8_t*, const __half*, const __half*, const float*, const void*, int, int,
                                       int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_ring_w4a16(float*, const float*, const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_ring_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int,
                                                 int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_ring2_w4a16(float*, const float*, const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_ring2_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int,
                                                  int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_ring_narrow_w4a16(float*, const float*, const tc_group*, int, int, int, int, int, const int*,
                                                    const int*);
extern "C" void matmul_tc_grouped_pre_ring_narrow_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int,
                                                        int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_ring2_narrow_w4a16(float*, const float*, const tc_group*, int, int, int, int, int, const int*,
                                                     const int*);
extern "C" void matmul_tc_grouped_pre_ring2_narrow_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int,
                                                         int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_f16_pre_splitk_fd(float*, const uint8_t*, const __half*, const __half*, const float*, int, int, int,
                                            int);
extern "C" void matmul_tc_f16_pre_splitk_burst(float*, const uint8_t*, const __half*, const __half*, const float*, int, int,
                                               int, int);
extern "C" void matmul_tc_f16_pre_splitk_burst_a16(float*, const uint8_t*, const __half*, const __half*, const float*, int, int,
                                                   int, int);
extern "C" void tc_route_groups(const int*, int, int, int, const unsigned long long*, long long, long long, long long, int, int, int*,
                                int*, int*, tc_group*, int*, volatile unsigned*, unsigned, int);
extern "C" void matmul_tc_grouped_pre_fd_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int, int,
                                               int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd16_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int, int,
                                                 int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd_gu_w4a16(float*, const __half*, const __half*, const float*, const tc_group*,
                                                  const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd16_gu_w4a16(float*, const __half*, const __half*, const float*, const tc_group*,
                                                    const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd16_s3_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int,
                                                    int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd16_gu_s3_w4a16(float*, const __half*, const __half*, const float*, const tc_group*,
                                                       const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd_a16_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int,
                                                   int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd16_a16_w4a16(float*, const __half*, const __half*, const float*, const tc_group*, int, int,
                                                     int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd_gu_a16_w4a16(float*, const __half*, const __half*, const float*, const tc_group*,
                                                      const tc_group*, int, int, int, int, int, const int*, const int*);
extern "C" void matmul_tc_grouped_pre_fd16_gu_a16_w4a16(float*, const __half*, const __half*, const float*, const tc_group*,
                                                        const tc_group*, int, int, int, int, int, const int*, const int*);

// Split is tc_split_rows's output for nrows rows of cols values.
struct Split {
	std::vector<__half> hi, lo;
	std::vector<float> inv;
};

static Split split_rows(const std::vector<float>& x, int nrows, int cols) {
	const int nck = (cols + 31) / 32;
	Split sp;
	sp.hi.assign((size_t)nrows * nck * 32, __half{0x7e00});  // NaN: what the kernel fails to write shows
	sp.lo = sp.hi;
	sp.inv.assign((size_t)nrows * nck, -1.0f);
	emu_launch(3, 64, 0, [&] { tc_split_rows(x.data(), nrows, cols, sp.hi.data(), sp.lo.data(), sp.inv.data()); });
	return sp;
}

static const int kThreads = 256, kTile = 64, kRowTile = 128;
static const size_t kSmem = 2 * ((64 * 40 * 2 + 128 * 40) * 2 + (64 + 128) * 4);
// The ring kernels' (TC_SMEM_RING): 12 slots of 256 x 8 bytes of codes and
// 128 scale words after the two stages.
static const size_t kSmemRing = kSmem + 12 * (256 * 8 + 128 * 4);
// The two-chunk ring kernels' (TC_SMEM_RING2): two stages of two chunks,
// 10 slots.
static const size_t kSmemRing2 = 2 * kSmem + 10 * (256 * 8 + 128 * 4);
// The FP16 ring kernels' (TC_SMEM_RING_F16): 6 slots of 256 x 32 bytes.
static const size_t kSmemRingF16 = kSmem + 6 * (256 * 32);
// The fragment-direct kernel's (TC_SMEM_FD): two stages of 64 tokens' hi
// and lo over 4 chunks (rows of 136 halves) and their 2^-s.
static const size_t kSmemFD = 2 * (2 * 64 * 136 * 2 + 4 * 64 * 4);
static const size_t kSmemFD16 = 2 * (2 * 16 * 136 * 2 + 4 * 16 * 4);  // TC_SMEM_FD16
static const size_t kSmemFD16S3 = 3 * (2 * 16 * 136 * 2 + 4 * 16 * 4);  // TC_SMEM_FD16_S3
// The burst split-K kernel's (TC_SMEM_BURST): 5 two-stage-kernel stages.
static const size_t kSmemBurst = 5 * ((64 * 40 * 2 + 128 * 40) * 2 + (64 + 128) * 4);

static int failures = 0;

struct Case {
	bool int4;
	int T, rows, cols;
	bool gather;
	int bias_kind;  // 0 none, 1 FP16, 2 FP32
	double xrange;  // activations span 10^-xrange .. 10^xrange
	int splitk = 0; // > 0: matmul_tc_f16_splitk in that many splits, then matmul_splitk_reduce (FP16, no gather)
};

static float f16_round(float v) { return __half2float(__float2half_rn(v)); }

// run launches the kernel and returns y (nxr rows of rows values).
static std::vector<float> run(const Case& c, const std::vector<uint8_t>& mat, int cols_padded, int scales_offset,
                              const std::vector<float>& x, const std::vector<uint8_t>& bias, const std::vector<int>& xr,
                              const std::vector<int>& yr, int T, int ny, bool pre = false, bool ring = false) {
	std::vector<float> y(ny * c.rows, -12345.0f);
	const int G = (T + kTile - 1) / kTile, tiles = (c.rows + kRowTile - 1) / kRowTile;
	if (pre) {
		const Split sp = split_rows(x, (int)(x.size() / c.cols), c.cols);
		auto fn = c.int4 ? matmul_tc_pre_w4a16 : ring ? matmul_tc_pre_ring_f16 : matmul_tc_pre_f16;
		emu_launch(G * tiles, kThreads, ring ? kSmemRingF16 : kSmem, [&] {
			fn(y.data(), mat.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), bias.empty() ? nullptr : bias.data(), c.bias_kind,
			   c.rows, c.cols, cols_padded, scales_offset, T, xr.empty() ? nullptr : xr.data(), yr.empty() ? nullptr : yr.data());
		});
		return y;
	}
	if (c.splitk > 0) {
		std::vector<float> part((size_t)c.splitk * T * c.rows, -777.0f);
		auto fn = ring ? matmul_tc_f16_splitk_ring : matmul_tc_f16_splitk;
		emu_launch(G * tiles * c.splitk, kThreads, ring ? kSmemRingF16 : kSmem,
		           [&] { fn(part.data(), mat.data(), x.data(), c.rows, c.cols, T, c.splitk); });
		emu_launch(3, 64, 0, [&] {
			matmul_splitk_reduce(y.data(), part.data(), c.splitk, T, c.rows, bias.empty() ? nullptr : bias.data(), c.bias_kind);
		});
		return y;
	}
	auto fn = c.int4 ? matmul_tc_w4a16 : matmul_tc_f16;
	emu_launch(G * tiles, kThreads, kSmem, [&] {
		fn(y.data(), mat.data(), x.data(), bias.empty() ? nullptr : bias.data(), c.bias_kind, c.rows, c.cols, cols_padded,
		   scales_offset, T, xr.empty() ? nullptr : xr.data(), yr.empty() ? nullptr : yr.data());
	});
	return y;
}

// check_a16c checks tc_split_rows_a16c on the activations x of an FP16
// case: its hi and inv are tc_split_rows's, its lo zeros and its rows xq
// each 32-value chunk rounded to FP16 at the chunk's shift
// (half.ChunkShiftF16, computed here on the host); xq is a fixed point of
// tc_split_rows (every lo zero, hi·2^-s = xq), so a kernel on xq's rows
// multiplies the rounded values alone; and the kernels on the chunk-shift
// pre-split (the pre-split kernel with its zero lo; at a split-K case the
// burst kernel's FP16 build) give the bits of the kernels on xq's rows.
// ny outputs. It reports failures itself and returns false on one.
static bool check_a16c(const Case& c, const char* name, const std::vector<uint8_t>& mat, const std::vector<float>& x,
                       const std::vector<uint8_t>& bias, size_t ny) {
	const int nx = (int)(x.size() / c.cols), nck = (c.cols + 31) / 32;
	Split sp;
	sp.hi.assign((size_t)nx * nck * 32, __half{0x7e00});
	sp.lo = sp.hi;
	sp.inv.assign((size_t)nx * nck, -1.0f);
	std::vector<float> xq(x.size(), -777.0f);
	emu_launch(3, 64, 0, [&] { tc_split_rows_a16c(x.data(), nx, c.cols, sp.hi.data(), sp.lo.data(), sp.inv.data(), xq.data()); });
	const Split ref = split_rows(x, nx, c.cols);
	for (size_t i = 0; i < sp.hi.size(); i++)
		if (sp.hi[i].x != ref.hi[i].x || sp.lo[i].x != 0) {
			fprintf(stderr, "FAIL %s: a16c half %zu: hi %04x lo %04x, want tc_split_rows's hi %04x and lo 0\n", name, i, sp.hi[i].x,
			        sp.lo[i].x, ref.hi[i].x);
			failures++;
			return false;
		}
	if (std::memcmp(sp.inv.data(), ref.inv.data(), 4 * sp.inv.size()) != 0) {
		fprintf(stderr, "FAIL %s: a16c 2^-s differ from tc_split_rows's\n", name);
		failures++;
		return false;
	}
	for (int r = 0; r < nx; r++)
		for (int k0 = 0; k0 < c.cols; k0 += 32) {
			const int k1 = std::min(c.cols, k0 + 32);
			float mx = 0.0f;
			for (int k = k0; k < k1; k++) mx = std::fmax(mx, std::fabs(x[(size_t)r * c.cols + k]));
			uint32_t bits;
			std::memcpy(&bits, &mx, 4);
			const int E = (int)((bits >> 23) & 0xff), sh = E >= 15 ? 141 - E : 126;
			const float up = std::ldexp(1.0f, sh), down = std::ldexp(1.0f, -sh);
			for (int k = k0; k < k1; k++) {
				const size_t i = (size_t)r * c.cols + k;
				const float want = f16_round(x[i] * up) * down;
				if (std::memcmp(&xq[i], &want, 4) != 0) {
					fprintf(stderr, "FAIL %s: a16c row %d value %d: %.9g -> %.9g, want %.9g\n", name, r, k, x[i], xq[i], want);
					failures++;
					return false;
				}
			}
		}
	const Split fix = split_rows(xq, nx, c.cols);
	for (int r = 0; r < nx; r++)
		for (int k = 0; k < c.cols; k++) {
			const size_t h = (size_t)r * nck * 32 + k;
			const float back = __half2float(fix.hi[h]) * fix.inv[(size_t)r * nck + k / 32];
			if (fix.lo[h].x != 0 && fix.lo[h].x != 0x8000 || back != xq[(size_t)r * c.cols + k]) {
				fprintf(stderr, "FAIL %s: the rounded row %d value %d (%.9g) splits again to hi·2^-s %.9g, lo %04x\n", name, r, k,
				        xq[(size_t)r * c.cols + k], back, fix.lo[h].x);
				failures++;
				return false;
			}
		}
	const int G = (c.T + kTile - 1) / kTile, tiles = (c.rows + kRowTile - 1) / kRowTile;
	std::vector<float> want = run(c, mat, c.cols, 0, xq, bias, {}, {}, c.T, (int)(ny / c.rows));
	std::vector<float> got(ny, -12345.0f);
	if (c.splitk > 0 && c.cols % 8 == 0) {
		// the burst kernel's FP16 build on the chunk-shift pre-split (NaN
		// lo: it reads none), against the burst kernel on xq's pre-split
		const Split fq = split_rows(xq, nx, c.cols);
		Split spn = sp;
		for (auto& h : spn.lo) h = __half{0x7e00};
		std::vector<float> pw((size_t)c.splitk * c.T * c.rows, -777.0f), pg(pw.size(), -777.0f);
		emu_launch(G * tiles * c.splitk, kThreads, kSmemBurst, [&] {
			matmul_tc_f16_pre_splitk_burst(pw.data(), mat.data(), fq.hi.data(), fq.lo.data(), fq.inv.data(), c.rows, c.cols, c.T,
			                               c.splitk);
		});
		emu_launch(G * tiles * c.splitk, kThreads, kSmemBurst, [&] {
			matmul_tc_f16_pre_splitk_burst_a16(pg.data(), mat.data(), spn.hi.data(), spn.lo.data(), spn.inv.data(), c.rows, c.cols,
			                                   c.T, c.splitk);
		});
		if (std::memcmp(pg.data(), pw.data(), 4 * pw.size()) != 0) {
			fprintf(stderr, "FAIL %s: the FP16-activation burst kernel on the chunk-shift pre-split differs from the burst kernel on the rounded rows\n",
			        name);
			failures++;
			return false;
		}
		// the two-stage kernel's FP16 build, splitting x in the kernel: the
		// same partials
		std::vector<float> p2(pw.size(), -777.0f);
		emu_launch(G * tiles * c.splitk, kThreads, kSmem,
		           [&] { matmul_tc_f16_splitk_a16(p2.data(), mat.data(), x.data(), c.rows, c.cols, c.T, c.splitk); });
		if (std::memcmp(p2.data(), pw.data(), 4 * pw.size()) != 0) {
			fprintf(stderr, "FAIL %s: the two-stage split-K kernel's FP16 build differs from the burst kernel on the rounded rows\n", name);
			failures++;
			return false;
		}
		return true;
	}
	if (c.splitk > 0) return true;
	emu_launch(G * tiles, kThreads, kSmem, [&] {
		matmul_tc_pre_f16(got.data(), mat.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), bias.empty() ? nullptr : bias.data(),
		                  c.bias_kind, c.rows, c.cols, c.cols, 0, c.T, nullptr, nullptr);
	});
	if (std::memcmp(got.data(), want.data(), 4 * ny) != 0) {
		fprintf(stderr, "FAIL %s: the pre-split kernel on the chunk-shift pre-split differs from the kernel on the rounded rows\n", name);
		failures++;
		return false;
	}
	return true;
}

static void check(const Case& c, std::mt19937& rng) {
	char name[160];
	snprintf(name, sizeof name, "%s T=%d rows=%d cols=%d gather=%d bias=%d xrange=%g splitk=%d", c.int4 ? "int4" : "f16", c.T,
	         c.rows, c.cols, c.gather, c.bias_kind, c.xrange, c.splitk);
	std::normal_distribution<float> nd(0.0f, 1.0f);
	std::uniform_real_distribution<double> ud(-c.xrange, c.xrange);
	// The matrix: w[r][k] as the kernel reads it (FP16 values, or int4 codes
	// times their block's FP16 scale).
	const int cols_padded = c.int4 ? (c.cols + 255) / 256 * 256 : c.cols;
	std::vector<double> w((size_t)c.rows * c.cols);
	std::vector<uint8_t> mat;
	int scales_offset = 0;
	if (c.int4) {
		const int blocks = cols_padded / 256;
		scales_offset = c.rows * cols_padded / 2;
		mat.assign(scales_offset + c.rows * blocks * 2, 0x88);
		for (int r = 0; r < c.rows; r++)
			for (int b = 0; b < blocks; b++) {
				const __half s = __float2half_rn(std::fabs(nd(rng)) * 0.01f + 1e-3f);
				std::memcpy(&mat[scales_offset + (r * blocks + b) * 2], &s, 2);
				for (int k = b * 256; k < std::min(c.cols, (b + 1) * 256); k++) {
					const int u = (int)(rng() % 16);
					uint8_t& byte = mat[(size_t)r * (cols_padded / 2) + k / 2];
					byte = (k & 1) ? (uint8_t)((byte & 0x0f) | (u << 4)) : (uint8_t)((byte & 0xf0) | u);
					w[(size_t)r * c.cols + k] = (double)(u - 8) * (double)__half2float(s);
				}
			}
	} else {
		mat.resize((size_t)c.rows * c.cols * 2);
		for (size_t i = 0; i < w.size(); i++) {
			const __half h = __float2half_rn(nd(rng) * 0.05f);
			std::memcpy(&mat[2 * i], &h, 2);
			w[i] = __half2float(h);
		}
	}
	std::vector<uint8_t> bias;
	std::vector<double> bv(c.rows, 0.0);
	if (c.bias_kind == 1) {
		bias.resize(c.rows * 2);
		for (int r = 0; r < c.rows; r++) {
			const __half h = __float2half_rn(nd(rng));
			std::memcpy(&bias[2 * r], &h, 2);
			bv[r] = __half2float(h);
		}
	} else if (c.bias_kind == 2) {
		bias.resize(c.rows * 4);
		for (int r = 0; r < c.rows; r++) {
			const float f = nd(rng);
			std::memcpy(&bias[4 * r], &f, 4);
			bv[r] = f;
		}
	}
	// Activations: nx rows; with gather the launch reads rows xr[t] and
	// writes rows yr[t] of a larger y.
	const int nx = c.gather ? c.T + 3 : c.T, ny = c.gather ? c.T + 5 : c.T;
	std::vector<float> x((size_t)nx * c.cols);
	for (float& v : x) v = nd(rng) * (float)std::pow(10.0, ud(rng));
	if (c.xrange > 4 && !x.empty()) x[x.size() / 2] = 3.0e5f;  // beyond FP16's range
	std::vector<int> xr, yr;
	if (c.gather) {
		for (int t = 0; t < c.T; t++) xr.push_back((int)(rng() % nx)), yr.push_back(ny - 1 - t);
	}
	std::vector<float> y = run(c, mat, cols_padded, scales_offset, x, bias, xr, yr, c.T, ny);
	for (int t = 0; t < c.T; t++) {
		const int xi = c.gather ? xr[t] : t, yi = c.gather ? yr[t] : t;
		// The error model: each value is split relative to its 32-value
		// chunk's largest magnitude, so the bound scales with that largest
		// magnitude times each |w|.
		const float* xv = &x[(size_t)xi * c.cols];
		std::vector<double> cmax((c.cols + 31) / 32, 0.0);
		for (int k = 0; k < c.cols; k++) cmax[k / 32] = std::max(cmax[k / 32], std::fabs((double)xv[k]));
		for (int r = 0; r < c.rows; r++) {
			double ref = bv[r], mag = std::fabs(bv[r]);
			for (int k = 0; k < c.cols; k++) {
				ref += (double)xv[k] * w[(size_t)r * c.cols + k];
				mag += cmax[k / 32] * std::fabs(w[(size_t)r * c.cols + k]);
			}
			const double got = y[(size_t)yi * c.rows + r];
			if (!(std::fabs(got - ref) <= 2e-6 * mag + 1e-30)) {
				fprintf(stderr, "FAIL %s: token %d row %d = %.9g, reference %.9g (error scale %.3g)\n", name, t, r, got, ref, mag);
				failures++;
				return;
			}
		}
	}
	// Split ahead (tc_split_rows, the _pre kernels): the same bits.
	if (c.splitk == 0) {
		std::vector<float> yp = run(c, mat, cols_padded, scales_offset, x, bias, xr, yr, c.T, ny, true);
		if (std::memcmp(yp.data(), y.data(), 4 * y.size()) != 0) {
			fprintf(stderr, "FAIL %s: the pre-split kernel's outputs differ from the in-kernel split's\n", name);
			failures++;
			return;
		}
	}
	// The chunk-shift FP16 pre-split (tc_split_rows_a16c: the declared dense
	// activations) and what runs on it.
	if (!c.int4 && !c.gather && !check_a16c(c, name, mat, x, bias, y.size())) return;
	// The FP16 cp.async ring twins (split-K, and the pre-split kernel): the
	// same bits.
	if (!c.int4) {
		std::vector<float> yr1 = run(c, mat, cols_padded, scales_offset, x, bias, xr, yr, c.T, ny, c.splitk == 0, true);
		if (std::memcmp(yr1.data(), y.data(), 4 * y.size()) != 0) {
			fprintf(stderr, "FAIL %s: the FP16 ring kernel's outputs differ from the two-stage kernel's\n", name);
			failures++;
			return;
		}
	}
	// The fragment-direct split-K twin (pre-split activations, weights
	// loaded straight into B fragments): the split-K kernel's bits.
	if (c.splitk > 0) {
		const int G = (c.T + kTile - 1) / kTile, tiles = (c.rows + kRowTile - 1) / kRowTile;
		const Split sp = split_rows(x, nx, c.cols);
		std::vector<float> part((size_t)c.splitk * c.T * c.rows, -777.0f), yf((size_t)ny * c.rows, -12345.0f);
		emu_launch(G * tiles * c.splitk, kThreads, kSmemFD, [&] {
			matmul_tc_f16_pre_splitk_fd(part.data(), mat.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), c.rows, c.cols, c.T,
			                            c.splitk);
		});
		emu_launch(3, 64, 0, [&] {
			matmul_splitk_reduce(yf.data(), part.data(), c.splitk, c.T, c.rows, bias.empty() ? nullptr : bias.data(), c.bias_kind);
		});
		if (std::memcmp(yf.data(), y.data(), 4 * y.size()) != 0) {
			fprintf(stderr, "FAIL %s: the fragment-direct split-K kernel's outputs differ from the split-K kernel's\n", name);
			failures++;
			return;
		}
		// The burst twin (every chunk of a block's share in flight at once;
		// columns a multiple of 8, runtime/cuda tcDenseBurst): the same
		// partials, so the same outputs after the reduce.
		if (c.cols % 8 != 0) {
			fprintf(stderr, "ok   %s (no burst twin: columns not a multiple of 8)\n", name);
			return;
		}
		std::vector<float> pb((size_t)c.splitk * c.T * c.rows, -777.0f), yb((size_t)ny * c.rows, -12345.0f);
		emu_launch(G * tiles * c.splitk, kThreads, kSmemBurst, [&] {
			matmul_tc_f16_pre_splitk_burst(pb.data(), mat.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), c.rows, c.cols, c.T,
			                               c.splitk);
		});
		if (std::memcmp(pb.data(), part.data(), 4 * part.size()) != 0) {
			fprintf(stderr, "FAIL %s: the burst split-K kernel's partials differ from the fragment-direct split-K kernel's\n", name);
			failures++;
			return;
		}
		emu_launch(3, 64, 0, [&] {
			matmul_splitk_reduce(yb.data(), pb.data(), c.splitk, c.T, c.rows, bias.empty() ? nullptr : bias.data(), c.bias_kind);
		});
		if (std::memcmp(yb.data(), y.data(), 4 * y.size()) != 0) {
			fprintf(stderr, "FAIL %s: the burst split-K kernel's outputs differ from the split-K kernel's\n", name);
			failures++;
			return;
		}
		// Its FP16-activation build (tuning.tcA16Dense): the burst kernel's
		// partials on a pre-split whose lo halves are zero, reading none of
		// lo (NaN here).
		{
			Split sp0 = sp, spn = sp;
			for (auto& h : sp0.lo) h = __half{0};
			for (auto& h : spn.lo) h = __half{0x7e00};
			std::vector<float> pw(part.size(), -777.0f), pg(part.size(), -777.0f);
			emu_launch(G * tiles * c.splitk, kThreads, kSmemBurst, [&] {
				matmul_tc_f16_pre_splitk_burst(pw.data(), mat.data(), sp0.hi.data(), sp0.lo.data(), sp0.inv.data(), c.rows, c.cols,
				                               c.T, c.splitk);
			});
			emu_launch(G * tiles * c.splitk, kThreads, kSmemBurst, [&] {
				matmul_tc_f16_pre_splitk_burst_a16(pg.data(), mat.data(), spn.hi.data(), spn.lo.data(), spn.inv.data(), c.rows,
				                                   c.cols, c.T, c.splitk);
			});
			if (std::memcmp(pg.data(), pw.data(), 4 * pw.size()) != 0) {
				fprintf(stderr, "FAIL %s: the FP16-activation burst kernel's partials differ from the burst kernel's on a zero lo\n",
				        name);
				failures++;
				return;
			}
		}
	}
	// A token alone gives the bits it got among the others.
	if (c.T > 1 && !c.gather) {
		const int t = c.T - 1;
		std::vector<float> x1(x.begin() + (size_t)t * c.cols, x.begin() + (size_t)(t + 1) * c.cols);
		std::vector<float> y1 = run(c, mat, cols_padded, scales_offset, x1, bias, {}, {}, 1, 1);
		if (std::memcmp(y1.data(), &y[(size_t)t * c.rows], 4 * c.rows) != 0) {
			fprintf(stderr, "FAIL %s: token %d alone differs from token %d of the batch\n", name, t, t);
			failures++;
			return;
		}
	}
	fprintf(stderr, "ok   %s\n", name);
}

// check_grouped runs a grouped launch over experts whose pair counts are
// below, at and above a 64-pair entry, and checks every pair's outputs are
// the bits the single-matrix kernel gives that expert's pairs alone.
static void check_grouped(bool int4, int rows, int cols, std::mt19937& rng) {
	char name[120];
	snprintf(name, sizeof name, "grouped %s rows=%d cols=%d", int4 ? "int4" : "f16", rows, cols);
	const int cols_padded = int4 ? (cols + 255) / 256 * 256 : cols;
	const int scales_offset = int4 ? rows * cols_padded / 2 : 0;
	const size_t bytes = int4 ? (size_t)scales_offset + (size_t)rows * (cols_padded / 256) * 2 : (size_t)rows * cols * 2;
	const std::vector<int> counts = {70, 5, 64, 17};
	const int E = (int)counts.size(), nx = 40;
	std::normal_distribution<float> nd(0.0f, 1.0f);
	std::vector<std::vector<uint8_t>> mats(E, std::vector<uint8_t>(bytes));
	for (auto& m : mats) {
		if (int4) {
			for (size_t i = 0; i < (size_t)scales_offset; i++) m[i] = (uint8_t)(rng() & 0xff);
			for (size_t i = scales_offset; i < bytes; i += 2) {
				const __half h = __float2half_rn(std::fabs(nd(rng)) * 0.01f + 1e-3f);
				std::memcpy(&m[i], &h, 2);
			}
		} else {
			for (size_t i = 0; i < bytes; i += 2) {
				const __half h = __float2half_rn(nd(rng) * 0.05f);
				std::memcpy(&m[i], &h, 2);
			}
		}
	}
	std::vector<float> x((size_t)nx * cols);
	for (float& v : x) v = nd(rng);
	// Pairs: expert e's pairs read random x rows and write consecutive y rows.
	std::vector<int> xr, yr;
	std::vector<tc_group> groups;
	int P = 0;
	for (int e = 0; e < E; e++) {
		for (int i = 0; i < counts[e]; i++) xr.push_back((int)(rng() % nx)), yr.push_back(P + i);
		for (int i = 0; i < counts[e]; i += kTile) groups.push_back({mats[e].data(), P + i, std::min(kTile, counts[e] - i)});
		P += counts[e];
	}
	const int tiles = (rows + kRowTile - 1) / kRowTile;
	std::vector<float> y((size_t)P * rows, -12345.0f);
	auto gfn = int4 ? matmul_tc_grouped_w4a16 : matmul_tc_grouped_f16;
	emu_launch((unsigned)groups.size() * tiles, kThreads, kSmem,
	           [&] { gfn(y.data(), x.data(), groups.data(), tiles, rows, cols, cols_padded, scales_offset, xr.data(), yr.data()); });
	{
		const Split sp = split_rows(x, nx, cols);
		std::vector<float> yp((size_t)P * rows, -12345.0f);
		auto pfn = int4 ? matmul_tc_grouped_pre_w4a16 : matmul_tc_grouped_pre_f16;
		emu_launch((unsigned)groups.size() * tiles, kThreads, kSmem, [&] {
			pfn(yp.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), groups.data(), tiles, rows, cols, cols_padded, scales_offset,
			    xr.data(), yr.data());
		});
		if (std::memcmp(yp.data(), y.data(), 4 * y.size()) != 0) {
			fprintf(stderr, "FAIL %s: the pre-split grouped kernel's outputs differ from the in-kernel split's\n", name);
			failures++;
			return;
		}
		// The cp.async ring twins (int4): one and two chunks a stage, wide
		// over the 64-pair table and narrow over a table of the same pairs
		// in entries of at most 32; each split both ways. Every pair gets
		// the two-stage kernel's bits.
		if (int4) {
			std::vector<tc_group> g32;
			for (const tc_group& gr : groups)
				for (int i = 0; i < gr.count; i += 32) g32.push_back({gr.mat, gr.pair0 + i, std::min(32, gr.count - i)});
			using Plain = void (*)(float*, const float*, const tc_group*, int, int, int, int, int, const int*, const int*);
			using Pre = void (*)(float*, const __half*, const __half*, const float*, const tc_group*, int, int, int, int, int,
			                     const int*, const int*);
			const struct {
				const char* what;
				Plain plain;
				Pre pre;
				size_t smem;
				const std::vector<tc_group>* table;
			} twins[] = {
			    {"ring", matmul_tc_grouped_ring_w4a16, matmul_tc_grouped_pre_ring_w4a16, kSmemRing, &groups},
			    {"two-chunk ring", matmul_tc_grouped_ring2_w4a16, matmul_tc_grouped_pre_ring2_w4a16, kSmemRing2, &groups},
			    {"narrow ring", matmul_tc_grouped_ring_narrow_w4a16, matmul_tc_grouped_pre_ring_narrow_w4a16, kSmemRing, &g32},
			    {"narrow two-chunk ring", matmul_tc_grouped_ring2_narrow_w4a16, matmul_tc_grouped_pre_ring2_narrow_w4a16, kSmemRing2,
			     &g32},
			};
			for (const auto& tw : twins) {
				const std::vector<tc_group>& tab = *tw.table;
				const unsigned grid = (unsigned)tab.size() * tiles;
				std::vector<float> y1((size_t)P * rows, -12345.0f), y2((size_t)P * rows, -12345.0f);
				emu_launch(grid, kThreads, tw.smem, [&] {
					tw.plain(y1.data(), x.data(), tab.data(), tiles, rows, cols, cols_padded, scales_offset, xr.data(), yr.data());
				});
				emu_launch(grid, kThreads, tw.smem, [&] {
					tw.pre(y2.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), tab.data(), tiles, rows, cols, cols_padded,
					       scales_offset, xr.data(), yr.data());
				});
				if (std::memcmp(y1.data(), y.data(), 4 * y.size()) != 0 || std::memcmp(y2.data(), y.data(), 4 * y.size()) != 0) {
					fprintf(stderr, "FAIL %s: a %s grouped kernel's outputs differ from the two-stage kernel's\n", name, tw.what);
					failures++;
					return;
				}
			}
			// The fragment-direct kernel (pre-split only): the codes loaded
			// into registers and transposed across a row's four lanes, the
			// activations staged in slices; the same 64-pair table.
			std::vector<float> yf((size_t)P * rows, -12345.0f);
			emu_launch((unsigned)groups.size() * tiles, kThreads, kSmemFD, [&] {
				matmul_tc_grouped_pre_fd_w4a16(yf.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), groups.data(), tiles, rows, cols,
				                               cols_padded, scales_offset, xr.data(), yr.data());
			});
			if (std::memcmp(yf.data(), y.data(), 4 * y.size()) != 0) {
				size_t i = 0;
				while (i < y.size() && std::memcmp(&yf[i], &y[i], 4) == 0) i++;
				fprintf(stderr, "FAIL %s: the fragment-direct grouped kernel's outputs differ from the two-stage kernel's (first at pair %zu row %zu: %g, want %g)\n",
				        name, i / rows, i % rows, yf[i], y[i]);
				failures++;
				return;
			}
			// Its small-entry build (tuning.tcFD16) over the same pairs in
			// entries of at most 16 (one m16 tile, a 16-row staging).
			std::vector<tc_group> g16;
			for (const tc_group& gr : groups)
				for (int i = 0; i < gr.count; i += 16) g16.push_back({gr.mat, gr.pair0 + i, std::min(16, gr.count - i)});
			std::vector<float> y16((size_t)P * rows, -12345.0f), y16s3((size_t)P * rows, -12345.0f);
			emu_launch((unsigned)g16.size() * tiles, kThreads, kSmemFD16, [&] {
				matmul_tc_grouped_pre_fd16_w4a16(y16.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), g16.data(), tiles, rows, cols,
				                                 cols_padded, scales_offset, xr.data(), yr.data());
			});
			// and its three-stage build (tuning.tcFD16S3).
			emu_launch((unsigned)g16.size() * tiles, kThreads, kSmemFD16S3, [&] {
				matmul_tc_grouped_pre_fd16_s3_w4a16(y16s3.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), g16.data(), tiles, rows,
				                                    cols, cols_padded, scales_offset, xr.data(), yr.data());
			});
			if (std::memcmp(y16s3.data(), y.data(), 4 * y.size()) != 0) {
				fprintf(stderr, "FAIL %s: the three-stage small-entry kernel's outputs differ from the two-stage kernel's\n", name);
				failures++;
				return;
			}
			if (std::memcmp(y16.data(), y.data(), 4 * y.size()) != 0) {
				size_t i = 0;
				while (i < y.size() && std::memcmp(&y16[i], &y[i], 4) == 0) i++;
				fprintf(stderr, "FAIL %s: the small-entry fragment-direct kernel's outputs differ from the two-stage kernel's (first at pair %zu row %zu: %g, want %g)\n",
				        name, i / rows, i % rows, y16[i], y[i]);
				failures++;
				return;
			}
			// The gate|up builds (RoutedGateUp): y's matrices as the gate,
			// the next expert's as the up, act = silu_mul(gate, up) from the
			// two-stage kernel's values of each, over both tables.
			std::vector<tc_group> up64 = groups, up16 = g16;
			for (auto* tab : {&up64, &up16})
				for (tc_group& gr : *tab)
					for (int e = 0; e < E; e++)
						if (gr.mat == mats[e].data()) {
							gr.mat = mats[(e + 1) % E].data();
							break;
						}
			std::vector<float> yu((size_t)P * rows, -12345.0f);
			emu_launch((unsigned)up64.size() * tiles, kThreads, kSmem, [&] {
				matmul_tc_grouped_pre_w4a16(yu.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), up64.data(), tiles, rows, cols,
				                            cols_padded, scales_offset, xr.data(), yr.data());
			});
			std::vector<float> want(y.size());
			for (size_t i = 0; i < y.size(); i++) {
				const float sg = y[i] / (1.0f + expf(-y[i]));  // common.cuh silu_mul
				want[i] = sg * yu[i];
			}
			const int tiles64 = (rows + 63) / 64;
			using GU = void (*)(float*, const __half*, const __half*, const float*, const tc_group*, const tc_group*, int, int, int,
			                    int, int, const int*, const int*);
			const struct {
				const char* what;
				GU fn;
				size_t smem;
				const std::vector<tc_group>*gate, *up;
			} gus[] = {
			    {"gate|up", matmul_tc_grouped_pre_fd_gu_w4a16, kSmemFD, &groups, &up64},
			    {"small-entry gate|up", matmul_tc_grouped_pre_fd16_gu_w4a16, kSmemFD16, &g16, &up16},
			    {"three-stage small-entry gate|up", matmul_tc_grouped_pre_fd16_gu_s3_w4a16, kSmemFD16S3, &g16, &up16},
			};
			for (const auto& gu : gus) {
				std::vector<float> ya((size_t)P * rows, -12345.0f);
				emu_launch((unsigned)gu.gate->size() * tiles64, kThreads, gu.smem, [&] {
					gu.fn(ya.data(), sp.hi.data(), sp.lo.data(), sp.inv.data(), gu.gate->data(), gu.up->data(), tiles64, rows, cols,
					      cols_padded, scales_offset, xr.data(), yr.data());
				});
				if (std::memcmp(ya.data(), want.data(), 4 * want.size()) != 0) {
					size_t i = 0;
					while (i < want.size() && std::memcmp(&ya[i], &want[i], 4) == 0) i++;
					fprintf(stderr, "FAIL %s: the %s kernel's outputs differ from silu_mul of the two-stage kernel's gate and up (first at pair %zu row %zu: %g, want %g)\n",
					        name, gu.what, i / rows, i % rows, ya[i], want[i]);
					failures++;
					return;
				}
			}
			// The FP16-activation builds (tuning.tcA16) take each chunk's
			// sums from hi alone, so they are the FP32-activation kernels
			// run on a pre-split whose lo halves are zero (adding a zero
			// product changes no sum), bit for bit; each reads none of lo
			// (NaN here).
			Split sp0 = sp, spn = sp;
			for (auto& h : sp0.lo) h = __half{0};
			for (auto& h : spn.lo) h = __half{0x7e00};
			const struct {
				const char* what;
				Pre fp32, a16;
				size_t smem;
				const std::vector<tc_group>* tab;
			} a16s[] = {
			    {"fragment-direct", matmul_tc_grouped_pre_fd_w4a16, matmul_tc_grouped_pre_fd_a16_w4a16, kSmemFD, &groups},
			    {"small-entry", matmul_tc_grouped_pre_fd16_w4a16, matmul_tc_grouped_pre_fd16_a16_w4a16, kSmemFD16, &g16},
			};
			for (const auto& k : a16s) {
				std::vector<float> yw((size_t)P * rows, -12345.0f), yg((size_t)P * rows, -12345.0f);
				const unsigned grid = (unsigned)k.tab->size() * tiles;
				emu_launch(grid, kThreads, k.smem, [&] {
					k.fp32(yw.data(), sp0.hi.data(), sp0.lo.data(), sp0.inv.data(), k.tab->data(), tiles, rows, cols, cols_padded,
					       scales_offset, xr.data(), yr.data());
				});
				emu_launch(grid, kThreads, k.smem, [&] {
					k.a16(yg.data(), spn.hi.data(), spn.lo.data(), spn.inv.data(), k.tab->data(), tiles, rows, cols, cols_padded,
					      scales_offset, xr.data(), yr.data());
				});
				if (std::memcmp(yg.data(), yw.data(), 4 * yw.size()) != 0) {
					fprintf(stderr, "FAIL %s: the FP16-activation %s kernel's outputs differ from the FP32 build's on a zero lo\n", name,
					        k.what);
					failures++;
					return;
				}
			}
			const struct {
				const char* what;
				GU fp32, a16;
				size_t smem;
				const std::vector<tc_group>*gate, *up;
			} gua16s[] = {
			    {"gate|up", matmul_tc_grouped_pre_fd_gu_w4a16, matmul_tc_grouped_pre_fd_gu_a16_w4a16, kSmemFD, &groups, &up64},
			    {"small-entry gate|up", matmul_tc_grouped_pre_fd16_gu_w4a16, matmul_tc_grouped_pre_fd16_gu_a16_w4a16, kSmemFD16, &g16,
			     &up16},
			};
			for (const auto& gu : gua16s) {
				std::vector<float> yw((size_t)P * rows, -12345.0f), yg((size_t)P * rows, -12345.0f);
				const unsigned grid = (unsigned)gu.gate->size() * tiles64;
				emu_launch(grid, kThreads, gu.smem, [&] {
					gu.fp32(yw.data(), sp0.hi.data(), sp0.lo.data(), sp0.inv.data(), gu.gate->data(), gu.up->data(), tiles64, rows,
					        cols, cols_padded, scales_offset, xr.data(), yr.data());
				});
				emu_launch(grid, kThreads, gu.smem, [&] {
					gu.a16(yg.data(), spn.hi.data(), spn.lo.data(), spn.inv.data(), gu.gate->data(), gu.up->data(), tiles64, rows, cols,
					       cols_padded, scales_offset, xr.data(), yr.data());
				});
				if (std::memcmp(yg.data(), yw.data(), 4 * yw.size()) != 0) {
					fprintf(stderr, "FAIL %s: the FP16-activation %s kernel's outputs differ from the FP32 build's on a zero lo\n", name,
					        gu.what);
					failures++;
					return;
				}
			}
			// The row-shift FP16 builds (tuning.tcA16Row): their pre-split
			// against the host's (s from the row's largest magnitude, hi =
			// fp16(x 2^s), inv = 2^-s: exact), then each kernel within
			// FP16's rounding of the FP32 build's outputs (RMS of the
			// difference at most 2e-3 of the outputs').
			{
				const int nck = (cols + 31) / 32;
				std::vector<__half> rh((size_t)nx * nck * 32, __half{0x7e00});
				std::vector<float> ri(nx, -1.0f);
				emu_launch(3, 256, 128, [&] { tc_split_rows_a16r(x.data(), nx, cols, rh.data(), ri.data()); });
				for (int r = 0; r < nx; r++) {
					float mx = 0.0f;
					for (int k = 0; k < cols; k++) mx = std::max(mx, std::fabs(x[(size_t)r * cols + k]));
					uint32_t mb;
					std::memcpy(&mb, &mx, 4);
					const int E = (int)((mb >> 23) & 0xff), sh = E >= 15 ? 141 - E : 126;
					const float p = std::ldexp(1.0f, sh), iv = std::ldexp(1.0f, -sh);
					bool ok = ri[r] == iv;
					for (int k = 0; ok && k < nck * 32; k++) {
						const __half want = __float2half_rn(k < cols ? x[(size_t)r * cols + k] * p : 0.0f);
						ok = std::memcmp(&rh[(size_t)r * nck * 32 + k], &want, 2) == 0;
					}
					if (!ok) {
						fprintf(stderr, "FAIL %s: the row-shift pre-split of row %d differs from the host's\n", name, r);
						failures++;
						return;
					}
				}
				auto rel = [](const std::vector<float>& got, const std::vector<float>& want) {
					double d = 0, w = 0;
					for (size_t i = 0; i < want.size(); i++) {
						const double e = (double)got[i] - want[i];
						d += e * e, w += (double)want[i] * want[i];
					}
					return std::sqrt(d / w);
				};
				const struct {
					const char* what;
					Pre fn;
					size_t smem;
					const std::vector<tc_group>* tab;
				} rks[] = {{"fragment-direct", matmul_tc_grouped_pre_fd_a16r_w4a16, kSmemFD, &groups},
				           {"small-entry", matmul_tc_grouped_pre_fd16_a16r_w4a16, kSmemFD16, &g16}};
				for (const auto& k : rks) {
					std::vector<float> yr16((size_t)P * rows, -12345.0f);
					emu_launch((unsigned)k.tab->size() * tiles, kThreads, k.smem, [&] {
						k.fn(yr16.data(), rh.data(), rh.data(), ri.data(), k.tab->data(), tiles, rows, cols, cols_padded, scales_offset,
						     xr.data(), yr.data());
					});
					const double d = rel(yr16, y);
					if (!(d <= 2e-3)) {
						fprintf(stderr, "FAIL %s: the row-shift FP16 %s kernel's outputs are %.3g (RMS) from the FP32 build's\n", name,
						        k.what, d);
						failures++;
						return;
					}
				}
				const struct {
					const char* what;
					GU fn;
					size_t smem;
					const std::vector<tc_group>*gate, *up;
				} rgus[] = {{"gate|up", matmul_tc_grouped_pre_fd_gu_a16r_w4a16, kSmemFD, &groups, &up64},
				            {"small-entry gate|up", matmul_tc_grouped_pre_fd16_gu_a16r_w4a16, kSmemFD16, &g16, &up16}};
				for (const auto& gu : rgus) {
					std::vector<float> ya((size_t)P * rows, -12345.0f);
					emu_launch((unsigned)gu.gate->size() * tiles64, kThreads, gu.smem, [&] {
						gu.fn(ya.data(), rh.data(), rh.data(), ri.data(), gu.gate->data(), gu.up->data(), tiles64, rows, cols, cols_padded,
						      scales_offset, xr.data(), yr.data());
					});
					const double d = rel(ya, want);
					if (!(d <= 2e-3)) {
						fprintf(stderr, "FAIL %s: the row-shift FP16 %s kernel's outputs are %.3g (RMS) from the FP32 build's\n", name,
						        gu.what, d);
						failures++;
						return;
					}
				}
				fprintf(stderr, "ok   %s: FP16 activations, row shift\n", name);
			}
		}
	}
	auto fn = int4 ? matmul_tc_w4a16 : matmul_tc_f16;
	int p0 = 0;
	for (int e = 0; e < E; e++) {
		const int T = counts[e];
		std::vector<int> exr(xr.begin() + p0, xr.begin() + p0 + T), eyr(T);
		for (int i = 0; i < T; i++) eyr[i] = i;
		std::vector<float> ye((size_t)T * rows, -54321.0f);
		emu_launch((unsigned)((T + kTile - 1) / kTile * tiles), kThreads, kSmem, [&] {
			fn(ye.data(), mats[e].data(), x.data(), nullptr, 0, rows, cols, cols_padded, scales_offset, T, exr.data(), eyr.data());
		});
		if (std::memcmp(ye.data(), &y[(size_t)p0 * rows], 4 * (size_t)T * rows) != 0) {
			fprintf(stderr, "FAIL %s: expert %d's pairs differ from its own launch\n", name, e);
			failures++;
			return;
		}
		p0 += T;
	}
	fprintf(stderr, "ok   %s\n", name);
}

// check_route_groups runs tc_route_groups (one block of 1024 threads) over
// random ids (with an id out of range when bad) and compares its pairs and
// its gate/up/down tables with the grouping built here: experts in id
// order, each one's slots increasing, an entry per tile pairs (64, or 16
// for the small-entry fragment-direct kernel's tables), entries of count 0
// after.
static void check_route_groups(int T, int k, int E, bool bad, std::mt19937& rng, int tile = kTile, bool staged = true) {
	char name[112];
	snprintf(name, sizeof name, "route groups T=%d k=%d E=%d bad=%d tile=%d staged=%d", T, k, E, bad, tile, staged);
	const int P = T * k, maxE = P / tile + std::min(E, P);
	std::vector<int> ids(P);
	for (int& id : ids) id = (int)(rng() % (unsigned)E);
	if (bad) ids[P / 2] = E;
	std::vector<unsigned long long> bases(E);
	for (int e = 0; e < E; e++) bases[e] = 0x100000ull * (e + 1);
	const long long off[3] = {0, 4096, 8192};
	std::vector<int> tok(P, -1), slot(P, -1), iden(P, -1);
	std::vector<tc_group> tab(3 * maxE, tc_group{reinterpret_cast<const uint8_t*>(1), -9, -9});
	std::vector<int> published(P, -7);
	volatile unsigned seq = 0;
	emu_launch(1, 1024, (3 * 256 + 2 + (staged ? P : 0)) * 4, [&] {  // TC_ROUTE_SMEM
		tc_route_groups(ids.data(), P, k, E, bases.data(), off[0], off[1], off[2], tile, maxE, tok.data(), slot.data(), iden.data(),
		                tab.data(), published.data(), &seq, 41u, staged ? 1 : 0);
	});
	// The ids published to the host, then the sequence number.
	if (published != ids || seq != 41u) {
		fprintf(stderr, "FAIL %s: published ids %s, sequence number %u (want 41)\n", name, published == ids ? "equal" : "differ", seq);
		failures++;
		return;
	}
	std::vector<int> wtok, wslot;
	std::vector<tc_group> wtab[3];
	for (int e = 0; e < E; e++) {
		const int base = (int)wslot.size();
		for (int s = 0; s < P; s++)
			if (ids[s] == e) wtok.push_back(s / k), wslot.push_back(s);
		const int n = (int)wslot.size() - base;
		for (int p0 = 0; p0 < n; p0 += tile)
			for (int w = 0; w < 3; w++)
				wtab[w].push_back(tc_group{reinterpret_cast<const uint8_t*>(bases[e] + off[w]), base + p0, std::min(tile, n - p0)});
	}
	const int placed = (int)wslot.size();
	for (int p = 0; p < P; p++) {
		const bool ok = iden[p] == p && (p >= placed || (tok[p] == wtok[p] && slot[p] == wslot[p]));
		if (!ok) {
			fprintf(stderr, "FAIL %s: pair %d is (tok %d, slot %d, iden %d), want (%d, %d, %d)\n", name, p, tok[p], slot[p], iden[p],
			        p < placed ? wtok[p] : -1, p < placed ? wslot[p] : -1, p);
			failures++;
			return;
		}
	}
	for (int w = 0; w < 3; w++)
		for (int n = 0; n < maxE; n++) {
			const tc_group want = n < (int)wtab[w].size() ? wtab[w][n] : tc_group{nullptr, 0, 0};
			const tc_group& got = tab[w * maxE + n];
			if (got.mat != want.mat || got.pair0 != want.pair0 || got.count != want.count) {
				fprintf(stderr, "FAIL %s: table %d entry %d is (%p, %d, %d), want (%p, %d, %d)\n", name, w, n, (const void*)got.mat,
				        got.pair0, got.count, (const void*)want.mat, want.pair0, want.count);
				failures++;
				return;
			}
		}
	fprintf(stderr, "ok   %s\n", name);
}

// check_reduce_parts: matmul_splitk_reduce_parts (the fused q|k|v
// projection's reduce, runtime/cuda MatMulParts) writes each row block's
// outputs with the bits matmul_splitk_reduce gives the whole matrix, for
// each bias kind (none, FP16, FP32) and for two and three blocks.
static void check_reduce_parts(int T, int ks, int n0, int n1, int n2, int bias_kind, std::mt19937& rng) {
	const int rows = n0 + n1 + n2;
	std::normal_distribution<float> nd;
	std::vector<float> part((size_t)ks * T * rows), bias32(rows), y((size_t)T * rows);
	std::vector<__half> bias16(rows);
	for (auto& v : part) v = nd(rng) * 100.0f;
	for (int r = 0; r < rows; r++) bias32[r] = nd(rng), bias16[r] = __float2half_rn(nd(rng));
	const void* bias = bias_kind == 1 ? (const void*)bias16.data() : bias_kind == 2 ? (const void*)bias32.data() : nullptr;
	emu_launch(3, 64, 0, [&] { matmul_splitk_reduce(y.data(), part.data(), ks, T, rows, bias, bias_kind); });
	std::vector<float> y0((size_t)T * n0, NAN), y1((size_t)T * n1, NAN), y2((size_t)T * n2, NAN);
	emu_launch(2, 64, 0, [&] {
		matmul_splitk_reduce_parts(y0.data(), y1.data(), n2 ? y2.data() : nullptr, part.data(), ks, T, rows, n0, n1, bias, bias_kind);
	});
	char name[96];
	snprintf(name, sizeof name, "reduce parts T=%d ks=%d %d|%d|%d bias %d", T, ks, n0, n1, n2, bias_kind);
	for (int t = 0; t < T; t++)
		for (int r = 0; r < rows; r++) {
			const float got = r < n0 ? y0[(size_t)t * n0 + r] : r < n0 + n1 ? y1[(size_t)t * n1 + r - n0] : y2[(size_t)t * n2 + r - n0 - n1];
			const float want = y[(size_t)t * rows + r];
			if (std::memcmp(&got, &want, 4) != 0) {
				fprintf(stderr, "FAIL %s: token %d row %d: %g, the whole reduce %g\n", name, t, r, got, want);
				failures++;
				return;
			}
		}
	fprintf(stderr, "ok   %s\n", name);
}

// check_route_all runs check_route_groups' cases: few tokens (most experts
// unrouted), a 64-pair tile crossed, 512 tokens of 64 experts, 60 experts,
// an id out of range; the small-entry kernel's tables (entries of at most
// 16 pairs); and the ids read from global memory, not staged (a routing of
// more than TC_ROUTE_PMAX pairs).
static void check_route_all(std::mt19937& rng) {
	check_route_groups(3, 2, 8, false, rng);
	check_route_groups(37, 8, 64, false, rng);
	check_route_groups(512, 8, 64, false, rng);
	check_route_groups(57, 4, 60, true, rng);
	check_route_groups(64, 8, 64, false, rng, 16);
	check_route_groups(57, 4, 60, true, rng, 16);
	check_route_groups(512, 8, 64, false, rng, kTile, false);
	check_route_groups(57, 4, 60, true, rng, 16, false);
}

int main(int argc, char** argv) {
	std::mt19937 rng(7);
	for (int bk = 0; bk < 3; bk++) check_reduce_parts(5, 3, 3, 2, 2, bk, rng);
	check_reduce_parts(17, 16, 8, 8, 0, 1, rng);
	if (argc > 1 && std::string(argv[1]) == "route") {  // tc_route_groups alone (seconds, not minutes)
		check_route_all(rng);
		fprintf(stderr, "%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
		return failures ? 1 : 0;
	}
	// Emulated rounding: every value the kernel converts must round as the
	// GPU does (a spot check of __float2half_rn against known bits).
	const struct {
		float in;
		unsigned short want;
	} conv[] = {{1 + 1.0f / 2048, 0x3c00}, {1 + 3.0f / 2048, 0x3c02}, {65519, 0x7bff}, {65520, 0x7c00}, {3.0f / (1 << 25), 0x0002}, {-1e-8f, 0x8000}};
	for (const auto& cv : conv)
		if (__float2half_rn(cv.in).x != cv.want) {
			fprintf(stderr, "FAIL __float2half_rn(%g) = %#06x, want %#06x\n", cv.in, __float2half_rn(cv.in).x, cv.want);
			failures++;
		}
	std::vector<Case> cases = {
	    {false, 1, 8, 32, false, 0, 1},      {false, 5, 64, 64, false, 1, 1},     {false, 64, 96, 100, false, 2, 2},
	    {false, 70, 64, 256, true, 0, 3},    {false, 3, 130, 72, false, 1, 8},    {true, 1, 16, 256, false, 0, 1},
	    {true, 9, 64, 512, false, 0, 2},     {true, 66, 72, 1408, true, 0, 1},    {true, 40, 64, 96, false, 0, 6},
	    {true, 128, 128, 256, false, 0, 1},
	    // split-K: more splits than chunks (empty splits), an uneven last
	    // split, a bias of each kind, tokens over two groups.
	    {false, 20, 130, 300, false, 1, 1, 3},  {false, 7, 64, 64, false, 2, 2, 4},  {false, 70, 128, 2048, false, 0, 1, 8},
	    {false, 3, 40, 96, false, 0, 3, 5},
	    // split-K over two token groups and a partial row tile (the
	    // fragment-direct twin's m16 padding and row guard).
	    {false, 81, 200, 512, false, 2, 1, 3},
	};
	for (const Case& c : cases) check(c, rng);
	check_grouped(false, 72, 96, rng);
	check_grouped(true, 130, 512, rng);
	check_grouped(true, 64, 1408, rng);
	check_grouped(true, 2048, 1024, rng);  // OLMoE's down: more chunks than ring slots
	check_grouped(true, 40, 96, rng);      // fewer chunks (3) than ring slots
	check_route_all(rng);
	fprintf(stderr, "%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
