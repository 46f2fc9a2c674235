// harness.cpp: runs the cases of gen/ through the kernels of kernels/*.cu on
// the emulator (emu.cpp) and checks
//   - every launch variant of an op (rows per task, chunks per step, shared
//     or global activations, grid size, down tile) gives the same bits:
//     results must not depend on launch choices;
//   - grouped gate/up + down gives the same bits as the scalar sequence
//     (ExpertMatVec, SiLUMul, ExpertMatVec, AddScaled per expert);
//   - the results are within 1e-4 (abs + rel) of the references.
// It writes the default variant's outputs under OUTDIR (to compare two
// kernel versions bit for bit).
//
//	harness CASEDIR OUTDIR [quick]
#include <dirent.h>
#include <sys/stat.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <algorithm>
#include "cuda_emu.h"

struct GroupTable {
	unsigned long long recs[64];
	float wts[64];
};

#define MV_F16(n) extern "C" void n(float*, const __half*, const float*, const void*, int, int, int, const void*, int, float);
MV_F16(matvec_f16_r1_s) MV_F16(matvec_f16_r2_s) MV_F16(matvec_f16_r4_s)
MV_F16(matvec_f16_r1_g) MV_F16(matvec_f16_r2_g) MV_F16(matvec_f16_r4_g)
#define MV_W4(n) extern "C" void n(float*, const uint8_t*, const float*, int, int, int, int);
MV_W4(matvec_w4a16_r1_s) MV_W4(matvec_w4a16_r2_s) MV_W4(matvec_w4a16_r4_s) MV_W4(matvec_w4a16_r8_s)
MV_W4(matvec_w4a16_r1_g) MV_W4(matvec_w4a16_r2_g) MV_W4(matvec_w4a16_r4_g) MV_W4(matvec_w4a16_r8_g)
#define GU(n) extern "C" void n(float*, const float*, int, int, int, int, int, int, int, const GroupTable);
GU(experts_gateup_int4_p2_s) GU(experts_gateup_int4_p2_g) GU(experts_gateup_int4_p4_s) GU(experts_gateup_int4_p4_g)
GU(experts_gateup_f16_p2_s) GU(experts_gateup_f16_p2_g) GU(experts_gateup_f16_p4_s) GU(experts_gateup_f16_p4_g)
#define DN(n) extern "C" void n(float*, const float*, int, int, int, int, int, int, int, const GroupTable);
DN(experts_down_int4_r4_s) DN(experts_down_int4_r4_g) DN(experts_down_int4_r8_s) DN(experts_down_int4_r8_g)
DN(experts_down_int4_r4c1_s) DN(experts_down_int4_r4c1_g)
DN(experts_down_f16_r4_s) DN(experts_down_f16_r4_g) DN(experts_down_f16_r8_s) DN(experts_down_f16_r8_g)
DN(experts_down_f16_r4c1_s) DN(experts_down_f16_r4c1_g)
extern "C" void silu_mul_f32(float*, const float*, const float*, int);
extern "C" void add_scaled_f32(float*, const float*, float, int);

typedef void (*MvF16)(float*, const __half*, const float*, const void*, int, int, int, const void*, int, float);
typedef void (*MvW4)(float*, const uint8_t*, const float*, int, int, int, int);
typedef void (*GuFn)(float*, const float*, int, int, int, int, int, int, int, const GroupTable);
typedef void (*DnFn)(float*, const float*, int, int, int, int, int, int, int, const GroupTable);

static const int kF16NR[3] = {1, 2, 4};
static MvF16 kF16[3][2] = {{matvec_f16_r1_s, matvec_f16_r1_g}, {matvec_f16_r2_s, matvec_f16_r2_g}, {matvec_f16_r4_s, matvec_f16_r4_g}};
static const int kW4NR[4] = {1, 2, 4, 8};
static MvW4 kW4[4][2] = {{matvec_w4a16_r1_s, matvec_w4a16_r1_g}, {matvec_w4a16_r2_s, matvec_w4a16_r2_g},
                         {matvec_w4a16_r4_s, matvec_w4a16_r4_g}, {matvec_w4a16_r8_s, matvec_w4a16_r8_g}};
static const int kGuNRP[2] = {2, 4};
static GuFn kGu[2][2][2] = {{{experts_gateup_int4_p2_s, experts_gateup_int4_p2_g}, {experts_gateup_int4_p4_s, experts_gateup_int4_p4_g}},
                            {{experts_gateup_f16_p2_s, experts_gateup_f16_p2_g}, {experts_gateup_f16_p4_s, experts_gateup_f16_p4_g}}};
static const int kDnNR[3] = {4, 8, 4};
static DnFn kDn[2][3][2] = {{{experts_down_int4_r4_s, experts_down_int4_r4_g}, {experts_down_int4_r8_s, experts_down_int4_r8_g},
                             {experts_down_int4_r4c1_s, experts_down_int4_r4c1_g}},
                            {{experts_down_f16_r4_s, experts_down_f16_r4_g}, {experts_down_f16_r8_s, experts_down_f16_r8_g},
                             {experts_down_f16_r4c1_s, experts_down_f16_r4c1_g}}};

// ---- device memory: 128-byte granules, zeroed, like runtime/cuda's alloc.
static std::vector<void*> allocs;
template <class T>
static T* dalloc(size_t n) {
	size_t bytes = (n * sizeof(T) + 127) / 128 * 128;
	if (bytes == 0) bytes = 128;
	void* p = aligned_alloc(256, bytes);
	memset(p, 0, bytes);
	allocs.push_back(p);
	return (T*)p;
}
static void dfree_all() {
	for (void* p : allocs) free(p);
	allocs.clear();
}

// the H200's opt-in shared memory per block, less runtime/cuda's 1 KiB reserve
static const size_t kSmemLimit = 231424 - 1024;

static int xs_bytes(int n) { return (n + 31) / 32 * 36 * 4; }
static int xs4_bytes(int n) { return xs_bytes(n) + ((n + 31) / 32 + 3) / 4 * 4 * 4; }

// ---- case reading
struct Reader {
	std::vector<char> b;
	size_t at = 0;
	explicit Reader(const std::string& path) {
		FILE* f = fopen(path.c_str(), "rb");
		if (!f) { perror(path.c_str()); exit(2); }
		fseek(f, 0, SEEK_END);
		b.resize(ftell(f));
		fseek(f, 0, SEEK_SET);
		if (fread(b.data(), 1, b.size(), f) != b.size()) { perror("read"); exit(2); }
		fclose(f);
	}
	long long i() { long long v; memcpy(&v, &b[at], 8); at += 8; return v; }
	template <class T>
	void arr(T* dst, size_t n) { memcpy(dst, &b[at], n * sizeof(T)); at += n * sizeof(T); }
	template <class T>
	std::vector<T> vec(size_t n) { std::vector<T> v(n); arr(v.data(), n); return v; }
};

static int failures = 0;
#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, "\n"); failures++; } while (0)

static bool same_bits(const float* a, const float* b, int n, const char* what, const std::string& name) {
	for (int i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], 4) != 0) {
			FAIL("%s %s: value %d = %.9g vs %.9g: not bit-identical", name.c_str(), what, i, a[i], b[i]);
			return false;
		}
	return true;
}
template <class R>
static void near(const float* got, const R* want, int n, const char* what, const std::string& name) {
	double worst = 0;
	int at = -1;
	for (int i = 0; i < n; i++) {
		const double d = fabs((double)got[i] - (double)want[i]);
		if (!(d <= 1e-4 + 1e-4 * fabs((double)want[i])) && (at < 0 || d > worst)) worst = d, at = i;
	}
	if (at >= 0) FAIL("%s %s: value %d = %.9g, reference %.9g", name.c_str(), what, at, got[at], (double)want[at]);
}
static void save(const std::string& outdir, const std::string& name, const float* v, int n) {
	FILE* f = fopen((outdir + "/" + name + ".out").c_str(), "wb");
	fwrite(v, 4, n, f);
	fclose(f);
}

static std::vector<int> grids(int tasks, bool quick) {
	std::vector<int> g = {std::max(1, std::min((tasks + 7) / 8, 264))};
	if (!quick) g.push_back(1), g.push_back(3);
	return g;
}

static bool big(long long n) { return n > (12 << 20); }

static void run_f16mv(const std::string& path, const std::string& name, const std::string& outdir, bool quick) {
	Reader r(path);
	const int rows = r.i(), cols = r.i(), has_bias = r.i();
	__half* W = dalloc<__half>((size_t)rows * cols);
	r.arr((uint16_t*)W, (size_t)rows * cols);
	float* x = dalloc<float>(cols);
	r.arr(x, cols);
	__half* bias = dalloc<__half>(rows);
	r.arr((uint16_t*)bias, rows);
	std::vector<double> ref = r.vec<double>(rows);
	float* y = dalloc<float>(rows);
	std::vector<float> first;
	const bool b = big((long long)rows * cols);
	for (int nri = 0; nri < 3; nri++)
		for (int v = 0; v < 2; v++) {
			if ((b || quick) && !(nri == 2 && v == 0) && !(nri == 0 && v == 1)) continue;
			const int tasks = (rows + kF16NR[nri] - 1) / kF16NR[nri];
			for (int grid : grids(tasks, quick || b)) {
				std::fill(y, y + rows, NAN);
				const size_t smem = v == 0 ? xs_bytes(cols) : 0;
				emu_launch(grid, 256, smem, [&] { kF16[nri][v](y, W, x, has_bias ? bias : nullptr, has_bias ? 1 : 0, rows, cols, nullptr, 0, 0.0f); });
				if (first.empty()) {
					first.assign(y, y + rows);
					near(y, ref.data(), rows, "f16 matvec vs float64", name);
					save(outdir, name, y, rows);
				} else {
					char what[64];
					snprintf(what, sizeof what, "f16 r%d%s grid %d vs first", kF16NR[nri], v ? "_g" : "_s", grid);
					same_bits(y, first.data(), rows, what, name);
				}
			}
		}
	dfree_all();
}

static void run_w4mv(const std::string& path, const std::string& name, const std::string& outdir, bool quick) {
	Reader r(path);
	const int rows = r.i(), cols = r.i(), cp = r.i(), so = r.i(), bytes = r.i();
	uint8_t* mat = dalloc<uint8_t>(bytes);
	r.arr(mat, bytes);
	float* x = dalloc<float>(cols);
	r.arr(x, cols);
	std::vector<double> ref = r.vec<double>(rows);
	float* y = dalloc<float>(rows);
	std::vector<float> first;
	const bool b = big((long long)rows * cols * 4);
	for (int nri = 0; nri < 4; nri++)
		for (int v = 0; v < 2; v++) {
			if (v == 1 && cols % 32 != 0) continue;
			if ((b || quick) && !(nri == 2 && v == 0) && !(nri == 3 && v == 1)) continue;
			const int tasks = (rows + kW4NR[nri] - 1) / kW4NR[nri];
			for (int grid : grids(tasks, quick || b)) {
				std::fill(y, y + rows, NAN);
				const size_t smem = v == 0 ? xs4_bytes(cols) : 0;
				emu_launch(grid, 256, smem, [&] { kW4[nri][v](y, mat, x, rows, cols, cp, so); });
				if (first.empty()) {
					first.assign(y, y + rows);
					near(y, ref.data(), rows, "int4 matvec vs float64", name);
					save(outdir, name, y, rows);
				} else {
					char what[64];
					snprintf(what, sizeof what, "w4 r%d%s grid %d vs first", kW4NR[nri], v ? "_g" : "_s", grid);
					same_bits(y, first.data(), rows, what, name);
				}
			}
		}
	dfree_all();
}

static void run_group(const std::string& path, const std::string& name, const std::string& outdir, bool quick) {
	Reader r(path);
	const int scheme = r.i(), D = r.i(), F = r.i(), A = r.i();
	int off[3], cp[3], so[3];
	for (int m = 0; m < 3; m++) off[m] = r.i(), cp[m] = r.i(), so[m] = r.i();
	const int size = r.i();
	std::vector<uint8_t*> recs(A);
	for (int k = 0; k < A; k++) {
		recs[k] = dalloc<uint8_t>(size);
		r.arr(recs[k], size);
	}
	float* x = dalloc<float>(D);
	r.arr(x, D);
	std::vector<float> wts = r.vec<float>(A);
	std::vector<float> ref = r.vec<float>(D);
	GroupTable tbl;
	memset(&tbl, 0, sizeof tbl);
	for (int k = 0; k < A; k++) tbl.recs[k] = (unsigned long long)(uintptr_t)recs[k], tbl.wts[k] = wts[k];

	// Scalar sequence with the default matvec variants (the matvec tests
	// check the others give the same bits).
	float* out = dalloc<float>(D);
	float* g = dalloc<float>(F);
	float* u = dalloc<float>(F);
	float* act = dalloc<float>(F);
	float* dn = dalloc<float>(D);
	auto mv = [&](float* y, const uint8_t* m, const float* xv, int rows, int cols, int mi) {
		if (scheme == 0) {
			emu_launch(std::min((rows + 31) / 32, 264), 256, xs4_bytes(cols), [&] { matvec_w4a16_r4_s(y, m, xv, rows, cols, cp[mi], so[mi]); });
		} else {
			emu_launch(std::min((rows + 7) / 8, 264), 256, xs_bytes(cols), [&] { matvec_f16_r1_s(y, (const __half*)m, xv, nullptr, 0, rows, cols, nullptr, 0, 0.0f); });
		}
	};
	for (int k = 0; k < A; k++) {
		mv(g, recs[k] + off[0], x, F, D, 0);
		mv(u, recs[k] + off[1], x, F, D, 1);
		emu_launch((F + 255) / 256, 256, 0, [&] { silu_mul_f32(act, g, u, F); });
		mv(dn, recs[k] + off[2], act, D, F, 2);
		const float w = wts[k];
		emu_launch((D + 255) / 256, 256, 0, [&] { add_scaled_f32(out, dn, w, D); });
	}
	std::vector<float> scalar(out, out + D);
	near(scalar.data(), ref.data(), D, "scalar sequence vs CPU scalar-v1", name);
	save(outdir, name, scalar.data(), D);

	// Grouped: every gate/up variant must give the same act bits, every down
	// variant the scalar sequence's output bits.
	float* acts = dalloc<float>((size_t)A * F);
	float* gout = dalloc<float>(D);
	std::vector<float> act_first;
	const int sch = scheme;
	const int stagedF = sch == 0 ? xs4_bytes(F) : xs_bytes(F);
	const int stagedD = sch == 0 ? xs4_bytes(D) : xs_bytes(D);
	for (int pi = 0; pi < 2; pi++)
		for (int v = 0; v < 2; v++) {
			if (v == 1 && sch == 0 && D % 32 != 0) continue;
			if (quick && v == 1) continue;
			const int nrp = kGuNRP[pi], tasks = A * ((F + nrp - 1) / nrp);
			for (int grid : grids(tasks, quick || A * F > 4096)) {
				std::fill(acts, acts + (size_t)A * F, NAN);
				emu_launch(grid, 256, v == 0 ? stagedD : 0, [&] {
					kGu[sch][pi][v](acts, x, A, F, D, off[0], off[1], cp[0], so[0], tbl);
				});
				if (act_first.empty()) act_first.assign(acts, acts + (size_t)A * F);
				else {
					char what[64];
					snprintf(what, sizeof what, "gate/up p%d%s grid %d vs first", nrp, v ? "_g" : "_s", grid);
					same_bits(acts, act_first.data(), A * F, what, name);
				}
			}
		}
	// The scalar sequence's act of expert k must be what gate/up wrote.
	{
		for (int k = 0; k < A; k++) {
			mv(g, recs[k] + off[0], x, F, D, 0);
			mv(u, recs[k] + off[1], x, F, D, 1);
			emu_launch((F + 255) / 256, 256, 0, [&] { silu_mul_f32(act, g, u, F); });
			char what[64];
			snprintf(what, sizeof what, "gate/up act of expert %d vs scalar", k);
			if (!same_bits(act_first.data() + (size_t)k * F, act, F, what, name)) break;
		}
	}
	memcpy(acts, act_first.data(), sizeof(float) * A * F);
	for (int ni = 0; ni < 3; ni++)
		for (int v = 0; v < 2; v++) {
			if (v == 1 && sch == 0 && F % 32 != 0) continue;
			if (quick && v == 1 && (size_t)A * stagedF + (size_t)A * 4 * 64 <= kSmemLimit) continue;
			const int nr = kDnNR[ni];
			std::vector<int> tiles = {nr, 2 * nr, 16 / nr * nr, 64 / nr * nr};
			if (quick) tiles = {16 / nr * nr};
			std::sort(tiles.begin(), tiles.end());
			tiles.erase(std::unique(tiles.begin(), tiles.end()), tiles.end());
			for (int R : tiles) {
				std::fill(gout, gout + D, NAN);
				const size_t smem = (v == 0 ? (size_t)A * stagedF : 0) + (size_t)A * 4 * R;
				if (smem > kSmemLimit) continue;
				emu_launch((D + R - 1) / R, 256, smem, [&] {
					kDn[sch][ni][v](gout, acts, A, D, F, off[2], cp[2], so[2], R, tbl);
				});
				char what[64];
				snprintf(what, sizeof what, "down variant %d%s tile %d vs scalar", ni, v ? "_g" : "_s", R);
				same_bits(gout, scalar.data(), D, what, name);
			}
		}
	dfree_all();
}

int main(int argc, char** argv) {
	if (argc < 3) { fprintf(stderr, "usage: harness CASEDIR OUTDIR [quick] [filter]\n"); return 2; }
	const std::string dir = argv[1], outdir = argv[2];
	const bool quick = argc > 3 && std::string(argv[3]) == "quick";
	const std::string filter = argc > 4 ? argv[4] : "";
	if (mkdir(outdir.c_str(), 0755) != 0 && errno != EEXIST) { perror(outdir.c_str()); return 2; }
	std::vector<std::string> names;
	DIR* d = opendir(dir.c_str());
	if (!d) { perror(dir.c_str()); return 2; }
	for (dirent* e; (e = readdir(d));)
		if (e->d_name[0] != '.') names.push_back(e->d_name);
	closedir(d);
	std::sort(names.begin(), names.end());
	for (const std::string& n : names) {
		if (!filter.empty() && n.find(filter) == std::string::npos) continue;
		const std::string path = dir + "/" + n;
		const int before = failures;
		fprintf(stderr, "%s ...", n.c_str());
		if (n.find(".f16mv") != std::string::npos) run_f16mv(path, n, outdir, quick);
		else if (n.find(".w4mv") != std::string::npos) run_w4mv(path, n, outdir, quick);
		else if (n.find(".group") != std::string::npos) run_group(path, n, outdir, quick);
		fprintf(stderr, " %s\n", failures == before ? "ok" : "FAILED");
	}
	fprintf(stderr, "%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
