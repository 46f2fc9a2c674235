// tcd.cpp: the decode experts on the tensor cores (experts_tc.cu, gate/up
// and down, both step sizes) on the emulator, against a float64 reference
// over the same int4 records and activations. The emulator's mma is an FMA
// chain, not the tensor cores' order, so the check is a bound: a dot's error
// is at most 4e-6 * sum_j |w_j| m_j (m_j the largest |x| of j's 32-value
// chunk: the hi/lo split keeps ~22 bits of each), carried through SiLU x up
// and the weighted combine. Cases: OLMoE's and Qwen1.5-MoE's expert shapes
// (Qwen's 1408 is padded to 1536 in a record), a row count off the 8-row
// task and a column count off the 4-chunk lane step, the down combine from
// zero, onto out, and with a residual;
// activations over 12 orders of magnitude; on the small shapes, that the
// three variants (tc4, tc8, tca4) give the same bits. A planted error shows: the
// codes of one row moved by one make the check fail. Not here:
// the fused RMSNorm (stage_one, the grouped kernels' staging): the emulator
// gives each thread its own copy of a function's static __shared__ array,
// so block_sum cannot run on it; the GPU tests cover it
// (TestStepperTCDecode).
//
//	tcd            (built by build.sh next to the harness)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "cuda_emu.h"

struct GroupTable {
	unsigned long long recs[64];
	float wts[64];
};
extern "C" void experts_gateup_int4_tc4_t(float*, const float*, int, int, int, int, int, int, int, const GroupTable*, int,
                                          const void*, int, float);
extern "C" void experts_gateup_int4_tc8_t(float*, const float*, int, int, int, int, int, int, int, const GroupTable*, int,
                                          const void*, int, float);
extern "C" void experts_down_int4_tc4_t(float*, const float*, int, int, int, int, int, int, int, const GroupTable*, int,
                                        const float*, int, int);
extern "C" void experts_gateup_int4_tca4_t(float*, const float*, int, int, int, int, int, int, int, const GroupTable*, int,
                                           const void*, int, float);
extern "C" void experts_down_int4_tca4_t(float*, const float*, int, int, int, int, int, int, int, const GroupTable*, int,
                                         const float*, int, int);
extern "C" void experts_down_int4_tc8_t(float*, const float*, int, int, int, int, int, int, int, const GroupTable*, int,
                                        const float*, int, int);

static int failures = 0;
static std::mt19937_64 rng(20261204);

// Mat is one int4 matrix of a record: codes then scales, as qpack lays it out.
struct Mat {
	int rows, cols, cols_padded, scales_offset;
	std::vector<uint8_t> bytes;
	std::vector<double> w;  // dequantised, rows x cols
};

static Mat make_mat(int rows, int cols) {
	std::normal_distribution<double> nd;
	Mat m;
	m.rows = rows, m.cols = cols, m.cols_padded = (cols + 255) / 256 * 256;
	const int blocks = m.cols_padded / 256;
	m.scales_offset = rows * m.cols_padded / 2;
	m.bytes.assign((m.scales_offset + rows * blocks * 2 + 15) / 16 * 16, 0x88);  // records keep matrices 16-byte aligned
	m.w.assign((size_t)rows * cols, 0.0);
	for (int r = 0; r < rows; r++)
		for (int b = 0; b < blocks; b++) {
			const __half s = __float2half_rn((float)(std::fabs(nd(rng)) * 0.01 + 1e-3));
			std::memcpy(&m.bytes[m.scales_offset + (r * blocks + b) * 2], &s, 2);
			for (int k = b * 256; k < std::min(cols, (b + 1) * 256); k++) {
				const int u = (int)(rng() % 16);
				uint8_t& byte = m.bytes[(size_t)r * (m.cols_padded / 2) + k / 2];
				byte = (k & 1) ? (uint8_t)((byte & 0x0f) | (u << 4)) : (uint8_t)((byte & 0xf0) | u);
				m.w[(size_t)r * cols + k] = (double)(u - 8) * (double)__half2float(s);
			}
		}
	return m;
}

static std::vector<float> rand_x(int n, double range) {
	std::uniform_real_distribution<double> ud(-range, range);
	std::normal_distribution<double> nd;
	std::vector<float> x(n);
	for (auto& v : x) v = (float)(nd(rng) * std::pow(10.0, ud(rng)));
	return x;
}

// dot returns row r of m against x in float64, and the error bound's
// sum_j |w_j| m_j.
static void dot(const Mat& m, int r, const std::vector<double>& x, double& val, double& mag) {
	val = mag = 0;
	for (int c0 = 0; c0 < m.cols; c0 += 32) {
		double mx = 0;
		for (int j = c0; j < std::min(m.cols, c0 + 32); j++) mx = std::max(mx, std::fabs(x[j]));
		for (int j = c0; j < std::min(m.cols, c0 + 32); j++) {
			val += m.w[(size_t)r * m.cols + j] * x[j];
			mag += std::fabs(m.w[(size_t)r * m.cols + j]) * mx;
		}
	}
}

struct Case {
	const char* name;
	int A, F, D;
	bool norm;
	int accumulate;  // down: 0 from zero, 1 onto out
	bool resid;
	int U;           // 4 or 8 (the register pipelines), 0: tca4 (the cp.async ring)
	bool plant;      // flip one code after the reference: the check must fail
};

static bool check(const char* what, const Case& c, const std::vector<float>& got, const std::vector<double>& ref,
                  const std::vector<double>& bound) {
	int bad = 0;
	double worst = 0;
	for (size_t i = 0; i < got.size(); i++) {
		const double e = std::fabs((double)got[i] - ref[i]);
		if (!(e <= bound[i])) {
			if (bad < 3) fprintf(stderr, "  %s %s[%zu]: got %.9g want %.9g (|err| %.3g > bound %.3g)\n", c.name, what, i, got[i], ref[i], e, bound[i]);
			bad++;
		}
		if (bound[i] > 0) worst = std::max(worst, e / bound[i]);
	}
	printf("%s %s: %zu values, worst |err|/bound %.3f, %d outside\n", c.name, what, got.size(), worst, bad);
	return bad == 0;
}

static void run(const Case& c) {
	std::vector<Mat> gate, up, down;
	std::vector<std::vector<uint8_t>> recs(c.A);
	int gate_off = 0, up_off = 0, down_off = 0, cpg = 0, sog = 0, cpd = 0, sod = 0;
	for (int k = 0; k < c.A; k++) {
		gate.push_back(make_mat(c.F, c.D));
		up.push_back(make_mat(c.F, c.D));
		down.push_back(make_mat(c.D, c.F));
		up_off = (int)gate[k].bytes.size();
		down_off = up_off + (int)up[k].bytes.size();
		recs[k] = gate[k].bytes;
		recs[k].insert(recs[k].end(), up[k].bytes.begin(), up[k].bytes.end());
		recs[k].insert(recs[k].end(), down[k].bytes.begin(), down[k].bytes.end());
		recs[k].resize((recs[k].size() + 15) / 16 * 16);
		cpg = gate[k].cols_padded, sog = gate[k].scales_offset, cpd = down[k].cols_padded, sod = down[k].scales_offset;
	}
	GroupTable tbl{};
	std::uniform_real_distribution<double> uw(0.05, 1.0);
	for (int k = 0; k < c.A; k++) {
		tbl.recs[k] = (unsigned long long)(uintptr_t)recs[k].data();
		tbl.wts[k] = (float)uw(rng);
	}
	std::vector<float> x = rand_x(c.D, 6);
	std::vector<float> nw(c.D);
	for (auto& v : nw) v = (float)uw(rng);
	const float eps = 1e-6f;
	// x' as the kernel stages it (stage_block_norm's roundings: the bound is
	// about the dots, not the norm).
	std::vector<double> xs(c.D);
	if (c.norm) {
		double ss = 0;
		for (float v : x) ss += (double)v * v;
		const float inv = (float)(1.0 / std::sqrt((double)((float)(ss / c.D) + eps)));
		for (int i = 0; i < c.D; i++) xs[i] = (double)(nw[i] * (x[i] * inv));
	} else {
		for (int i = 0; i < c.D; i++) xs[i] = x[i];
	}
	// gate/up reference
	std::vector<double> act_ref((size_t)c.A * c.F), act_bound((size_t)c.A * c.F);
	for (int k = 0; k < c.A; k++)
		for (int i = 0; i < c.F; i++) {
			double g, mg, u, mu;
			dot(gate[k], i, xs, g, mg);
			dot(up[k], i, xs, u, mu);
			const double sg = g / (1 + std::exp(-g));
			act_ref[(size_t)k * c.F + i] = sg * u;
			act_bound[(size_t)k * c.F + i] = 1.2 * std::fabs(u) * 4e-6 * mg + (std::fabs(sg) + 4e-6 * mg) * 4e-6 * mu +
			                                 1e-6 * std::fabs(sg * u) + 1e-37;
		}
	if (c.plant) {
		for (int j = 0; j < cpg / 2; j++) recs[0][j] ^= 0x11;  // every code of gate row 0 of expert 0 moved by one
	}
	std::vector<float> act((size_t)c.A * c.F, NAN);
	const int per = (c.F + 7) / 8, tasks = c.A * per;
	const int grid = std::min((tasks + 7) / 8, 264);
	const size_t smem_gu = (size_t)((c.D + 31) / 32 * 36) * 4 + (size_t)((c.D + 31) / 32) * 128 + (((c.D + 31) / 32 * 4 + 15) & ~15);
	const size_t ring = 8 * 4 * (4 * 2 * 32 * 20);  // tca4: TCQ_S steps of tcq_stage_bytes<4>() a warp
	auto run_gu = [&](int U, std::vector<float>& dst) {
		auto gu = U == 8 ? experts_gateup_int4_tc8_t : U == 0 ? experts_gateup_int4_tca4_t : experts_gateup_int4_tc4_t;
		emu_launch(grid, 256, U == 0 ? (smem_gu + 15) / 16 * 16 + ring : smem_gu, [&] {
			gu(dst.data(), x.data(), c.A, c.F, c.D, 0, up_off, cpg, sog, &tbl, 0, c.norm ? nw.data() : nullptr, 2, eps);
		});
	};
	run_gu(c.U, act);
	bool ok = check("gate/up", c, act, act_ref, act_bound);
	// down reference, from the kernel's own act (so the bound is the down's)
	std::vector<double> actd(act.begin(), act.end());
	std::vector<float> out0 = rand_x(c.D, 1), resid = rand_x(c.D, 1);
	std::vector<double> out_ref(c.D), out_bound(c.D);
	for (int d = 0; d < c.D; d++) {
		double acc = c.accumulate ? out0[d] : 0, bnd = 0;
		for (int k = 0; k < c.A; k++) {
			double v, m;
			dot(down[k], d, std::vector<double>(actd.begin() + (size_t)k * c.F, actd.begin() + (size_t)(k + 1) * c.F), v, m);
			acc += tbl.wts[k] * v;
			bnd += tbl.wts[k] * (4e-6 * m + 1e-7 * std::fabs(v));
		}
		if (c.resid) acc += resid[d];
		out_ref[d] = acc;
		out_bound[d] = bnd + 1e-6 * std::fabs(acc) + 1e-37;
	}
	std::vector<float> out = out0;
	const int vb = (c.F + 31) / 32 * 128 + (((c.F + 31) / 32 * 4 + 15) & ~15);
	const size_t smem_dn = (size_t)c.A * vb + (size_t)c.A * 16 * 4;
	auto run_dn = [&](int U, std::vector<float>& dst) {
		auto dn = U == 8 ? experts_down_int4_tc8_t : U == 0 ? experts_down_int4_tca4_t : experts_down_int4_tc4_t;
		emu_launch((c.D + 15) / 16, 256, U == 0 ? (smem_dn + 15) / 16 * 16 + ring : smem_dn, [&] {
			dn(dst.data(), act.data(), c.A, c.D, c.F, down_off, cpd, sod, 16, &tbl, 0, c.resid ? resid.data() : nullptr,
			   c.accumulate, 1);
		});
	};
	run_dn(c.U, out);
	ok = check("down", c, out, out_ref, out_bound) && ok;
	// The variants are one arithmetic: the other two give this one's bits.
	if (!c.plant && c.D <= 256) {
		for (int U : {4, 8, 0}) {
			if (U == c.U) continue;
			std::vector<float> a2((size_t)c.A * c.F, NAN), o2 = out0;
			run_gu(U, a2);
			run_dn(U, o2);
			const bool same = std::memcmp(a2.data(), act.data(), a2.size() * 4) == 0 && std::memcmp(o2.data(), out.data(), o2.size() * 4) == 0;
			printf("%s: variant %s gives %s bits\n", c.name, U == 0 ? "tca4" : U == 8 ? "tc8" : "tc4", same ? "the same" : "OTHER");
			ok = same && ok;
		}
	}
	if (c.plant == ok) {
		fprintf(stderr, "FAIL %s%s\n", c.name, c.plant ? ": the planted error was not caught" : "");
		failures++;
	}
}

int main(int argc, char** argv) {
	const Case cases[] = {
	    {"olmoe A8 F1024 D2048", 8, 1024, 2048, false, 0, true, 4, false},
	    {"olmoe A8 F1024 D2048 tc8", 8, 1024, 2048, false, 1, false, 8, false},
	    {"qwen A4 F1408 D2048", 4, 1408, 2048, false, 1, false, 4, false},
	    {"qwen A4 F1408 D2048 tc8", 4, 1408, 2048, false, 0, true, 8, false},
	    {"odd A3 F44 D96", 3, 44, 96, false, 0, false, 4, false},
	    {"odd A2 F13 D160 tc8", 2, 13, 160, false, 1, true, 8, false},
	    {"small A1 F8 D256", 1, 8, 256, false, 0, false, 4, false},
	    {"olmoe A8 F1024 D2048 tca4", 8, 1024, 2048, false, 1, true, 0, false},
	    {"qwen A4 F1408 D2048 tca4", 4, 1408, 2048, false, 0, false, 0, false},
	    {"odd A3 F44 D96 tca4", 3, 44, 96, false, 0, true, 0, false},
	    {"planted A2 F16 D256 tca4", 2, 16, 256, false, 0, false, 0, true},
	    {"planted A2 F16 D256", 2, 16, 256, false, 0, false, 4, true},
	};
	for (const Case& c : cases)
		if (argc < 2 || strstr(c.name, argv[1]) != nullptr) run(c);  // tcd [name part]
	if (failures) {
		fprintf(stderr, "tcd: %d case(s) FAIL\n", failures);
		return 1;
	}
	printf("tcd: %zu cases PASS\n", sizeof cases / sizeof cases[0]);
	return 0;
}
