// tk.cpp: prefill_rows.cu's router_topk_rows_warp (a warp a row: step.cuh's
// route_topk_warp, route_step's selection) on the emulator, against a host
// reference of router_topk_block's values: p_i = exp(l_i - max) in double
// rounded to float once, the sum in index order, one division each, the k
// largest by (p desc, index asc). The ids must be equal and the weights the
// same bits (both sides use libm's exp). Cases: OLMoE's 64 experts top-8,
// Qwen1.5-MoE's 60 top-4, a few experts, 256 experts top-64 (every lane's
// eight values, two rounds of lanes for the tail), row counts off the 8 rows
// a block, tied logits (the index breaks the tie) and -inf logits. A planted
// error shows: a reference whose ties go to the higher index must differ.
//
//	tk            (built by build.sh next to the harness)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "cuda_emu.h"

extern "C" void router_topk_rows_warp(const float*, int, int, int, int*, float*);

static const size_t kSmem = 8 * (32 * 8 + 2 * 64) * 4;  // TOPK_WARP_SMEM

static int failures = 0;

// reference is router_topk_block's ids and weights of one row (lowIndex:
// ties to the lower index, as the kernels; false plants an error).
static void reference(const float* l, int E, int k, bool lowIndex, int* ids, float* w) {
	float m = -INFINITY;
	for (int i = 0; i < E; i++) m = std::fmax(m, l[i]);
	std::vector<float> p(E);
	float total = 0.0f;
	for (int i = 0; i < E; i++) p[i] = (float)std::exp((double)(l[i] - m));
	for (int i = 0; i < E; i++) total += p[i];
	for (int i = 0; i < E; i++) p[i] = p[i] / total;
	std::vector<bool> taken(E);
	for (int r = 0; r < k; r++) {
		int bi = -1;
		for (int i = 0; i < E; i++) {
			if (taken[i]) continue;
			if (bi < 0 || p[i] > p[bi] || (p[i] == p[bi] && (lowIndex ? i < bi : i > bi))) bi = i;
		}
		taken[bi] = true;
		ids[r] = bi, w[r] = p[bi];
	}
}

static void check(int T, int E, int k, bool ties, bool plant, std::mt19937& rng) {
	char name[96];
	snprintf(name, sizeof name, "topk T=%d E=%d k=%d ties=%d%s", T, E, k, ties, plant ? " (planted)" : "");
	std::normal_distribution<float> nd(0.0f, 2.0f);
	std::vector<float> logits((size_t)T * E);
	for (float& v : logits) v = nd(rng);
	if (ties)
		for (int t = 0; t < T; t++) {
			float* l = &logits[(size_t)t * E];
			for (int i = 1; i < E; i += 3) l[i] = l[i - 1];  // equal pairs
			l[E - 1] = -INFINITY;
		}
	std::vector<int> ids((size_t)T * k, -7);
	std::vector<float> w((size_t)T * k, NAN);
	emu_launch((unsigned)(T + 7) / 8, 256, kSmem, [&] { router_topk_rows_warp(logits.data(), T, E, k, ids.data(), w.data()); });
	bool same = true;
	for (int t = 0; t < T && same; t++) {
		std::vector<int> rid(k);
		std::vector<float> rw(k);
		reference(&logits[(size_t)t * E], E, k, !plant, rid.data(), rw.data());
		same = std::memcmp(rid.data(), &ids[(size_t)t * k], 4 * k) == 0 && std::memcmp(rw.data(), &w[(size_t)t * k], 4 * k) == 0;
		if (!same && !plant)
			fprintf(stderr, "FAIL %s: row %d: first ids %d %d, want %d %d\n", name, t, ids[(size_t)t * k], ids[(size_t)t * k + 1], rid[0],
			        rid[1]);
	}
	if (same == plant) {
		if (plant) fprintf(stderr, "FAIL %s: the planted error passed\n", name);
		failures++;
		return;
	}
	fprintf(stderr, "ok   %s\n", name);
}

int main() {
	std::mt19937 rng(11);
	check(64, 64, 8, false, false, rng);
	check(19, 64, 8, true, false, rng);
	check(57, 60, 4, true, false, rng);
	check(3, 8, 2, false, false, rng);
	check(9, 256, 64, true, false, rng);
	check(8, 16, 4, true, false, rng);
	check(19, 64, 8, true, true, rng);
	fprintf(stderr, "%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
