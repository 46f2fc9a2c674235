// pa.cpp: the batched prefill's tiled causal attention (prefill_attention.cu:
// attention_tiled_rows_f32 and its 32-query twin attention_tiled32_rows_f32,
// over FP32 and FP16 caches) on the emulator. Per case: the two kernels give
// the same bits (a row's arithmetic is fixed by its position alone, not by
// how many queries share its block), and both are within a bound of a
// float64 softmax over the same queries and cache: |out - ref| <= 1e-6 *
// max |v| + 1e-7 (each score is an FP32 chain of hd products, each weight an
// FP32 exp). Cases: OLMoE's and Qwen1.5-MoE's head dim (128) with grouped
// kv heads, a head dim of 64 (lanes past hd/4 idle), a first chunk (pos0 0)
// and later chunks (pos0 past several tiles), row counts off both block
// sizes. A planted error shows: the queries' positions moved by one (each
// row attends to one position more) make the check fail. Over FP16 caches
// the tensor-core kernel (attention_tc_rows_kv16) is held to three times the
// bound, with its own planted case.
//
//	pa            (built by build.sh next to the harness)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "cuda_emu.h"

extern "C" void attention_tiled_rows_f32(float*, const float*, const float*, const float*, int, int, int, int, int);
extern "C" void attention_tiled_rows_f32_kv16(float*, const float*, const __half*, const __half*, int, int, int, int, int);
extern "C" void attention_tiled32_rows_f32(float*, const float*, const float*, const float*, int, int, int, int, int);
extern "C" void attention_tiled32_rows_f32_kv16(float*, const float*, const __half*, const __half*, int, int, int, int, int);
extern "C" void attention_tc_rows_kv16(float*, const float*, const __half*, const __half*, int, int, int, int, int);

// patSmem is PAT_SMEM: the queries' hi and lo and a tile's K (64 x 136
// halves each), V transposed (128 x 72 halves).
static const size_t patSmem = (2 * 64 * 136 + 64 * 136 + 128 * 72) * 2;

// paSmem is prefill_attention.cu's PA_SMEM(qt).
static size_t paSmem(int qt) { return (size_t)(qt * 128 + 32 * 132 + 32 * 128) * 4; }

struct Case {
	const char* name;
	int T, pos0, heads, kv, hd;
	bool kv16, plant;
};

static int failures = 0;

// run launches the qt-query kernel over the case's cache and queries (qpos0:
// the position the kernel is told the rows start at).
static std::vector<float> run(const Case& c, int qt, const std::vector<float>& q, const std::vector<float>& k32,
                              const std::vector<float>& v32, const std::vector<__half>& k16, const std::vector<__half>& v16,
                              int qpos0) {
	std::vector<float> out((size_t)c.T * c.heads * c.hd, NAN);
	const int blocks = c.heads * ((c.T + qt - 1) / qt);
	emu_launch(blocks, 256, paSmem(qt), [&] {
		if (c.kv16 && qt == 16) attention_tiled_rows_f32_kv16(out.data(), q.data(), k16.data(), v16.data(), c.T, qpos0, c.heads, c.kv, c.hd);
		if (c.kv16 && qt == 32) attention_tiled32_rows_f32_kv16(out.data(), q.data(), k16.data(), v16.data(), c.T, qpos0, c.heads, c.kv, c.hd);
		if (!c.kv16 && qt == 16) attention_tiled_rows_f32(out.data(), q.data(), k32.data(), v32.data(), c.T, qpos0, c.heads, c.kv, c.hd);
		if (!c.kv16 && qt == 32) attention_tiled32_rows_f32(out.data(), q.data(), k32.data(), v32.data(), c.T, qpos0, c.heads, c.kv, c.hd);
	});
	return out;
}

static void check(const Case& c, std::mt19937_64& rng) {
	std::normal_distribution<double> nd;
	const int kvDim = c.kv * c.hd, qDim = c.heads * c.hd, npos = c.pos0 + c.T + (c.plant ? 1 : 0);
	std::vector<float> q((size_t)c.T * qDim), k32((size_t)npos * kvDim), v32((size_t)npos * kvDim);
	std::vector<__half> k16(k32.size()), v16(v32.size());
	for (auto& x : q) x = (float)(nd(rng) * 0.5);
	for (size_t i = 0; i < k32.size(); i++) {
		k32[i] = (float)(nd(rng) * 0.5), v32[i] = (float)nd(rng);
		if (c.kv16) {  // the cache holds FP16 values: the reference reads them exactly
			k16[i] = __float2half_rn(k32[i]), v16[i] = __float2half_rn(v32[i]);
			k32[i] = __half2float(k16[i]), v32[i] = __half2float(v16[i]);
		}
	}
	double vmax = 0;
	for (float x : v32) vmax = std::max(vmax, (double)std::fabs(x));
	const double bound = 1e-6 * vmax + 1e-7;
	const int qpos0 = c.pos0 + (c.plant ? 1 : 0);
	std::vector<float> a = run(c, 16, q, k32, v32, k16, v16, qpos0), b = run(c, 32, q, k32, v32, k16, v16, qpos0);
	// The tensor-core kernel (FP16 caches): 64 queries a block of 4 warps.
	std::vector<float> tc;
	if (c.kv16) {
		tc.assign(a.size(), NAN);
		emu_launch(c.heads * ((c.T + 63) / 64), 128, patSmem,
		           [&] { attention_tc_rows_kv16(tc.data(), q.data(), k16.data(), v16.data(), c.T, qpos0, c.heads, c.kv, c.hd); });
	}
	double worstTC = 0;
	bool ok = true;
	size_t diff = 0;
	for (size_t i = 0; i < a.size(); i++) {
		uint32_t ua, ub;
		std::memcpy(&ua, &a[i], 4), std::memcpy(&ub, &b[i], 4);
		if (ua != ub) diff++;
	}
	if (diff) {
		ok = false;
		fprintf(stderr, "%s: %zu of %zu outputs differ in bits between 16 and 32 queries a block\n", c.name, diff, a.size());
	}
	double worst = 0;
	const int group = c.heads / c.kv;
	for (int t = 0; t < c.T; t++)
		for (int h = 0; h < c.heads; h++) {
			const int qp = c.pos0 + t, off = (h / group) * c.hd;
			std::vector<double> s(qp + 1);
			double mx = -INFINITY;
			for (int p = 0; p <= qp; p++) {
				double d = 0;
				for (int j = 0; j < c.hd; j++) d += (double)q[(size_t)t * qDim + h * c.hd + j] * k32[(size_t)p * kvDim + off + j];
				s[p] = d / std::sqrt((double)c.hd), mx = std::max(mx, s[p]);
			}
			double l = 0;
			for (int p = 0; p <= qp; p++) s[p] = std::exp(s[p] - mx), l += s[p];
			for (int j = 0; j < c.hd; j++) {
				double r = 0;
				for (int p = 0; p <= qp; p++) r += s[p] * v32[(size_t)p * kvDim + off + j];
				r /= l;
				const double e = std::fabs(a[(size_t)t * qDim + h * c.hd + j] - r);
				if (!(e <= worst)) worst = e;  // NaN sticks
				if (c.kv16) {
					const double et = std::fabs(tc[(size_t)t * qDim + h * c.hd + j] - r);
					if (!(et <= worstTC)) worstTC = et;
				}
			}
		}
	if (!(worst <= bound)) ok = false;
	// The tensor cores' bound: the queries and probabilities keep ~22 bits
	// (hi and lo halves), the mma sums are FP32: three times the tiled bound
	// (the emulator measured ~1.5x its worst).
	const double boundTC = 3e-6 * vmax + 3e-7;
	if (c.kv16 && !(worstTC <= boundTC)) ok = false;
	printf("%-44s %s  worst %.3g (bound %.3g)%s", c.name, ok ? "ok  " : "FAIL", worst, bound,
	       diff ? " bits differ" : ", 16 and 32 the same bits");
	if (c.kv16) printf("; tensor cores worst %.3g (bound %.3g)", worstTC, boundTC);
	printf("\n");
	if (ok == c.plant) {
		failures++;
		fprintf(stderr, "FAIL %s%s\n", c.name, c.plant ? ": the planted error was not caught" : "");
	}
}

int main() {
	std::mt19937_64 rng(20261206);
	const Case cases[] = {
	    {"first chunk T40, 4 heads / 2 kv, hd128", 40, 0, 4, 2, 128, false, false},
	    {"first chunk T40, 4 heads / 2 kv, hd128, kv16", 40, 0, 4, 2, 128, true, false},
	    {"later chunk T70 from 37, 2 heads, hd64, kv16", 70, 37, 2, 2, 64, true, false},
	    {"later chunk T33 from 100, 2 heads / 1 kv", 33, 100, 2, 1, 128, false, false},
	    {"later chunk T96 from 200, 2 heads, kv16", 96, 200, 2, 2, 128, true, false},
	    {"T5 from 0, 1 head, hd128", 5, 0, 1, 1, 128, false, false},
	    {"planted T40 from 20, 2 heads", 40, 20, 2, 2, 128, false, true},
	    {"T130 from 0, 2 heads / 1 kv, kv16", 130, 0, 2, 1, 128, true, false},
	    {"T64 from 64, 1 head, hd64, kv16", 64, 64, 1, 1, 64, true, false},
	    {"planted T70 from 30, 1 head, kv16", 70, 30, 1, 1, 128, true, true},
	};
	for (const Case& c : cases) check(c, rng);
	if (failures) {
		fprintf(stderr, "pa: %d failures\n", failures);
		return 1;
	}
	printf("pa: every case passed; the planted error was caught\n");
	return 0;
}
