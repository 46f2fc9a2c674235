// as.cpp: the decode attention (step.cuh attention_split_t, the body of
// attention_step and its tunings' kernels) on the emulator, over an FP16
// cache. Per case: the shared-memory ring (RING, attention_ring_step) and
// the register pipe (PIPE, attention_pipe_step) give the plain loop's bits
// (attention_step), and the plain loop is within a bound of a float64
// softmax over the same query and cache: |out - ref| <= 1e-5 * max |v| (the
// scores are FP32 chains of hd products, the weights FP32 exps, the sums
// FP32 in a fixed order). The emulator runs blocks one after another, so
// the block's AttShared is one global here; the ring reads the emulator's
// poisoned dynamic shared memory (xs_smem), so a stage read before it was
// copied shows up as NaN. Cases: head dims 128 (OLMoE's and Qwen1.5-MoE's),
// 64 and 40 (lanes past hd/4 idle; the ring's 16-byte pieces), 36 (hd % 8
// != 0: the ring falls back to the plain loop), grouped kv heads, position
// counts that leave a warp no round, one, several and a partial last one
// (a round is 64 positions a block), up to 8,064. A planted error shows:
// the ring over n + 1 positions must differ from the plain loop over n.
//
//	as            (built by build.sh next to the harness)
#include "cuda_emu.h"
#include "../step.cuh"

#include <random>
#include <string>
#include <vector>

static AttShared g_sh;  // the block's static shared memory (blocks run one after another)
static int failures = 0;

struct Case {
	int heads, kv, hd, n;
};

template <bool PIPE, bool RING>
static std::vector<float> run(const Case& c, const std::vector<float>& q, const std::vector<__half>& k,
                              const std::vector<__half>& v, int n) {
	std::vector<float> out((size_t)c.heads * c.hd, NAN), part((size_t)c.heads * ATT_SPLIT * (c.hd + 2), NAN);
	std::vector<unsigned> cnt(c.heads, 0);
	emu_launch(c.heads * ATT_SPLIT, ATT_WARPS * 32, RING ? ATT_RING_SMEM : 0, [&] {
		const int bid = blockIdx.x;
		if (c.hd <= 128)
			attention_split_t<1, 8, __half, PIPE, RING>(out.data(), part.data(), cnt.data(), q.data(), k.data(), v.data(), n, c.heads,
			                                            c.kv, c.hd, bid / ATT_SPLIT, bid % ATT_SPLIT, g_sh, false);
		else
			attention_split_t<2, 4, __half, PIPE, RING>(out.data(), part.data(), cnt.data(), q.data(), k.data(), v.data(), n, c.heads,
			                                            c.kv, c.hd, bid / ATT_SPLIT, bid % ATT_SPLIT, g_sh, false);
	});
	for (unsigned x : cnt)
		if (x != 0) std::printf("  a head's ticket was left at %u\n", x), failures++;
	return out;
}

static bool same(const std::vector<float>& a, const std::vector<float>& b) {
	return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

static void check(const Case& c, std::mt19937_64& rng) {
	std::normal_distribution<double> nd;
	const int kvDim = c.kv * c.hd, np = c.n + 1;
	std::vector<float> q((size_t)c.heads * c.hd);
	std::vector<__half> k((size_t)np * kvDim), v((size_t)np * kvDim);
	for (auto& x : q) x = (float)nd(rng);
	for (auto& x : k) x = __float2half_rn((float)nd(rng));
	for (auto& x : v) x = __float2half_rn((float)nd(rng));
	const auto plain = run<false, false>(c, q, k, v, c.n);
	const auto pipe = run<true, false>(c, q, k, v, c.n);
	const auto ring = run<false, true>(c, q, k, v, c.n);
	const auto planted = run<false, true>(c, q, k, v, c.n + 1);
	// float64 reference
	double worst = 0, vmax = 0;
	const int g = c.heads / c.kv;
	for (int h = 0; h < c.heads; h++) {
		const int off = (h / g) * c.hd;
		std::vector<double> sc(c.n);
		double m = -INFINITY;
		for (int t = 0; t < c.n; t++) {
			double d = 0;
			for (int i = 0; i < c.hd; i++) d += (double)q[(size_t)h * c.hd + i] * __half2float(k[(size_t)t * kvDim + off + i]);
			sc[t] = d / std::sqrt((double)c.hd);
			m = std::max(m, sc[t]);
		}
		double L = 0;
		for (int t = 0; t < c.n; t++) L += std::exp(sc[t] - m);
		for (int i = 0; i < c.hd; i++) {
			double o = 0;
			for (int t = 0; t < c.n; t++) {
				const double x = __half2float(v[(size_t)t * kvDim + off + i]);
				o += std::exp(sc[t] - m) * x;
				vmax = std::max(vmax, std::fabs(x));
			}
			worst = std::max(worst, std::fabs(o / L - plain[(size_t)h * c.hd + i]));
		}
	}
	const bool okPipe = same(plain, pipe), okRing = same(plain, ring), okPlant = !same(plain, planted),
	           okRef = worst <= 1e-5 * vmax;
	const bool ok = okPipe && okRing && okPlant && okRef;
	if (!ok) failures++;
	std::printf("%-4s heads %2d kv %2d hd %3d n %5d: pipe %s, ring %s, planted n+1 %s, worst %.3g (bound %.3g)\n", ok ? "ok" : "FAIL",
	            c.heads, c.kv, c.hd, c.n, okPipe ? "same bits" : "DIFFERS", okRing ? "same bits" : "DIFFERS",
	            okPlant ? "caught" : "NOT CAUGHT", worst, 1e-5 * vmax);
}

int main() {
	std::mt19937_64 rng(26);
	const Case cases[] = {
	    {4, 4, 128, 1},   {4, 2, 128, 7},    {4, 4, 128, 64},  {4, 4, 128, 65},  {2, 2, 128, 1025}, {2, 1, 128, 2113},
	    {2, 2, 128, 8064}, {4, 4, 64, 1500}, {2, 2, 40, 1100}, {2, 2, 36, 1100}, {2, 2, 256, 700},
	};
	for (const auto& c : cases) check(c, rng);
	if (failures) {
		std::printf("as: %d case(s) failed\n", failures);
		return 1;
	}
	std::printf("as: every case passed; the planted error was caught\n");
	return 0;
}
