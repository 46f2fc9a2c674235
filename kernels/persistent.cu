// persistent.cu: the persistent decode kernel (step mode "persistent",
// runtime/cuda/persistent.go). One launch runs a whole decode step: a
// program of instructions, each one kernel of the captured step
// (decode.cu, matvec_f16.cu, experts_grouped.cu, elementwise.cu) with the
// arguments and the grid that kernel would have been launched with.
//
// The program. Instruction i has units[i] virtual blocks; block b runs
// units b, b + gridDim.x, ... of each instruction in program order, unit u
// as block u of units[i] of that kernel (VGrid): the bodies
// are the launched kernels' (decode.cuh, experts.cuh, common.cuh), so a
// unit does exactly what that block of the launch does and the step gives
// the same bits as the captured graph of launches.
//
// Dependencies are counters, not kernel boundaries: done[i] counts the
// finished units of instruction i; a unit of i waits until done[dep[i]]
// reaches units[dep[i]] (the host sets dep[i] = i-1: every instruction
// waits for the one before it, which waited for its own predecessor, so
// instructions complete in program order, as in a stream). Every block
// walks the program in order and the grid is at most what the GPU holds at
// once, so a waiting unit only ever waits for units already running: the
// program cannot deadlock.
//
// While it waits, a unit prefetches its share of the instruction's weights
// into L2 (prefetch kind 1: a byte range the host names, e.g. a matvec's
// matrix). Kind 2 names rows reached through a routed group's row table
// (the down matrices of the routed experts, prefetched by the gate/up units
// once routing is done), so all top-k experts' down bytes are in flight
// while gate/up computes.
//
// Memory ordering: a finished unit's block synchronises, then thread 0
// fences (gpu scope) and increments done[i]; a waiting unit's thread 0
// spins on ld.acquire.gpu, then the block synchronises. Activations that
// other blocks wrote are read through L2 (act_ldg is __ldcg here) or with
// plain loads after the acquire, never through the non-coherent path.
//
// Control block ctl: ctl[0] unused (0), ctl[1] blocks that have
// finished, ctl[2 + i] done[i]. The last block to finish resets all of
// them to 0, so the next launch (stream-ordered) starts clean.
//
// Profiles: with trace not null, thread 0 of the block that ran unit t
// writes trace[3t .. 3t+2] (t: the unit's index in program order) = the
// global timer (ns) when it reached the unit, when its wait ended and when
// the unit finished (runtime/cuda
// persistentProfile turns them into a per-instruction time table).
#define HZ_COHERENT_ACT 1
#include "common.cuh"  // listed for the PTX source hashes
#include "step.cuh"
#include "decode.cuh"
#include "experts.cuh"

// The instruction set: one opcode per kernel of a captured step that the
// interpreter runs. persistentOps in runtime/cuda/persistent_program.go
// lists the same names in the same order (TestPersistentOpcodes compares
// them). Of the row kernels only one variant each: the stepper records the
// step with the FP16 matvec at 4 rows per task, the grouped gate/up at 2+2
// rows and the grouped down at 4 rows (2 chunks per lane), whose results
// are those of every other variant (a row's dot does not depend on the
// variant). One variant per format keeps the interpreter to two
// row_pipeline instances (the FP16 matvec and ExpertTasks below), which
// ptxas fits in 255 registers without spilling; an instance per variant
// spilled 4.9 KB (kernels/NOTES.md).
enum PersistentOp {
	PK_embed_step,
	PK_qk_norm_step,
	PK_rope_kv_step,
	PK_qk_norm_rope_kv_step,
	PK_attention_step,
	PK_route_step,
	PK_argmax_step,
	PK_add_gated_resid_step,
	PK_silu_mul_f32,
	PK_add_f32,
	PK_matvec_f16_r4_s,
	PK_experts_gateup_int4_p2_s_t,
	PK_experts_down_int4_r4_s_t,
	PK_experts_gateup_f16_p2_s_t,
	PK_experts_down_f16_r4_s_t,
	PK_COUNT
};

// PInstr is one instruction, 256 bytes (encodeInstr in
// runtime/cuda/persistent_program.go writes it). a[] holds the kernel's
// arguments in parameter order, one 8-byte slot each, as the launch passes
// them (pointers, ints and floats in the low bytes, doubles whole).
#define PI_ARGS 25
struct PInstr {
	int op, units, dep, smem;
	int pf_kind, pf_n, pad0, pad1;
	unsigned long long pf, pf_bytes, pf_off;
	unsigned long long a[PI_ARGS];
};

#define PF_RANGE 1
#define PF_GROUP_ROWS 2

__device__ __forceinline__ unsigned long long global_ns() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

__device__ __forceinline__ void prefetch_l2(const char* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// prefetch_share prefetches unit u's share (of n) of bytes at p, 128-byte
// lines spread over the block's threads.
__device__ __forceinline__ void prefetch_share(const char* p, unsigned long long bytes, int u, int n) {
	const unsigned long long per = ((bytes + n - 1) / n + 127) & ~127ull;
	const unsigned long long lo = per * u, hi = min(bytes, lo + per);
	for (unsigned long long off = lo + 128ull * threadIdx.x; off < hi; off += 128ull * blockDim.x) prefetch_l2(p + off);
}

#define AP(i, T) reinterpret_cast<T>(a[i])
#define AI(i) ((int)a[i])
#define AF(i) __uint_as_float((unsigned)a[i])
#define AD(i) __longlong_as_double((long long)a[i])

template <class Fmt, int NR, int CPL>
__device__ __forceinline__ void run_matvec(const unsigned long long* a, VGrid vg) {
	matvec_body<Fmt, NR, CPL, true>(xs_smem, AP(0, float*), AP(1, const uint8_t*), AP(2, const float*),
	                                AP(3, const void*), AI(4), AI(5), AI(6), 0, 0,
	                                NormSpec{AP(7, const void*), AI(8), AF(9)}, vg);
}

// ExpertTasks is the grouped gate/up (experts_gateup_*_p2: 2 gate + 2 up
// rows per task, tasks striding over the grid) and the grouped down
// (experts_down_*_r4: 4 rows of one expert per task, items of the block's
// tile, then the block's combine) as one task type, so both run through one
// row_pipeline instance: the same row addressing, activations and outputs
// as GateUpTasks and DownTasks (experts.cuh), chosen at run time.
template <class Fmt>
struct ExpertTasks {
	typedef typename XSource<Fmt, true>::T XS;
	bool down;
	const GroupTable* tbl;
	float* act;      // gate/up: act[A][F] written
	float* p;        // down: shared p[A][R]
	XS x;            // gate/up: the staged input
	int A, F, D, k0; // experts, rows of gate/up (= columns of down), rows of down, first table entry
	int gate_off, up_off, down_off, cols_padded, scales_offset;
	int per;             // gate/up: tasks per expert
	int R, G, d0, stride; // down: tile rows, 4-row groups per tile, first row, staged stride

	__device__ __forceinline__ int count() const { return down ? A * G : A * per; }
	__device__ __forceinline__ typename Fmt::Row row(int t, int i) const {
		if (down) {
			const int k = t / G, rg = t - k * G;
			const uint8_t* rec = reinterpret_cast<const uint8_t*>(tbl->recs[k0 + k]) + down_off;
			return Fmt::row(rec, min(d0 + rg * 4 + i, D - 1), F, cols_padded, scales_offset);
		}
		const int k = t / per, i0 = (t - k * per) * 2;
		const int j = i < 2 ? i : i - 2;
		const uint8_t* rec = reinterpret_cast<const uint8_t*>(tbl->recs[k0 + k]);
		return Fmt::row(rec + (i < 2 ? gate_off : up_off), min(i0 + j, F - 1), D, cols_padded, scales_offset);
	}
	__device__ __forceinline__ XS xs(int t) const {
		if (!down) return x;
		return XSource<Fmt, true>::make(nullptr, xs_smem + (size_t)(t / G) * stride, F);
	}
	__device__ __forceinline__ void emit(int t, const float (&out)[4]) const {
		if ((threadIdx.x & 31) != 0) return;
		if (down) {
			const int k = t / G, rg = t - k * G;
#pragma unroll
			for (int i = 0; i < 4; i++) p[k * R + rg * 4 + i] = out[i];
			return;
		}
		const int k = t / per, i0 = (t - k * per) * 2;
#pragma unroll
		for (int j = 0; j < 2; j++)
			if (i0 + j < F) act[(size_t)k * F + i0 + j] = silu_mul(out[j], out[2 + j]);
	}
};

// run_experts runs a grouped gate/up (down false; the _t kernel's
// arguments: act, x, A, F, D, gate_off, up_off, cols_padded,
// scales_offset, tbl, k0, nw, nw_kind, eps) or down (down true: out, act, A,
// D, F, down_off, cols_padded, scales_offset, R, tbl, k0, resid,
// accumulate) unit with gateup_body's and down_body's arithmetic and
// order.
template <class Fmt>
__device__ __forceinline__ void run_experts(const unsigned long long* a, VGrid vg, bool down) {
	ExpertTasks<Fmt> tk;
	const int nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
	tk.down = down;
	tk.A = AI(2), tk.tbl = AP(9, const GroupTable*), tk.k0 = AI(10);
	const float* src = AP(1, const float*);
	NormSpec nm{nullptr, 0, 0.0f};
	float* out = nullptr;
	const float* resid = nullptr;
	int accumulate = 0;
	if (down) {
		out = AP(0, float*), resid = AP(11, const float*), accumulate = AI(12);
		tk.D = AI(3), tk.F = AI(4), tk.down_off = AI(5), tk.cols_padded = AI(6), tk.scales_offset = AI(7);
		tk.R = AI(8), tk.G = tk.R / 4, tk.d0 = vg.bid * tk.R;
		tk.stride = FmtInfo<Fmt>::stride(tk.F);
		tk.p = xs_smem + (size_t)tk.A * tk.stride;
	} else {
		tk.act = AP(0, float*);
		tk.F = AI(3), tk.D = AI(4), tk.gate_off = AI(5), tk.up_off = AI(6), tk.cols_padded = AI(7);
		tk.scales_offset = AI(8), tk.per = (tk.F + 1) / 2;
		tk.x = XSource<Fmt, true>::make(src, xs_smem, tk.D);
		nm = NormSpec{AP(11, const void*), AI(12), AF(13)};
	}
	const int t0 = down ? warp : vg.bid * nw + warp, ts = down ? nw : vg.nblk * nw;
	row_pipeline<Fmt, 4, 2>(tk, t0, ts, down ? tk.F : tk.D, [&] {
		if (down)
			stage_block<FmtInfo<Fmt>::int4>(xs_smem, src, tk.A, tk.F);
		else
			stage_one<FmtInfo<Fmt>::int4>(xs_smem, src, tk.D, nm);
	});
	if (!down) return;
	__syncthreads();
	for (int r = threadIdx.x; r < tk.R; r += blockDim.x) {
		const int d = tk.d0 + r;
		if (d < tk.D) {
			float acc = accumulate ? out[d] : 0.0f;
			for (int k = 0; k < tk.A; k++) acc = add_scaled(acc, tk.tbl->wts[tk.k0 + k], tk.p[k * tk.R + r]);
			out[d] = resid != nullptr ? __fadd_rn(resid[d], acc) : acc;
		}
	}
}

// run_instr runs unit vg.bid of an instruction. Every thread of the block
// calls it.
template <class EFmt>
__device__ __forceinline__ void run_instr(int op, const unsigned long long* a, VGrid vg) {
	constexpr bool int4 = FmtInfo<EFmt>::int4;
	switch (op) {
	case PK_embed_step:
		embed_step_body(AP(0, float*), AP(1, const void*), AI(2), AP(3, const int*), AI(4), vg);
		break;
	case PK_qk_norm_step:
		qk_norm_step_body(AP(0, float*), AP(1, float*), AP(2, const void*), AP(3, const void*), AI(4), AI(5), AI(6),
		                  AI(7), AF(8), vg);
		break;
	case PK_rope_kv_step:
		rope_kv_step_body(AP(0, float*), AP(1, const float*), AP(2, const float*), AP(3, float*), AP(4, float*),
		                  AI(5), AI(6), AI(7), AP(8, const int*), AD(9), vg);
		break;
	case PK_qk_norm_rope_kv_step:
		qk_norm_rope_kv_step_body(AP(0, float*), AP(1, const float*), AP(2, const float*), AP(3, const float*),
		                          AP(4, float*), AP(5, float*), AP(6, const void*), AP(7, const void*), AI(8), AI(9),
		                          AI(10), AI(11), AI(12), AI(13), AP(14, const int*), AD(15), AF(16), vg);
		break;
	case PK_attention_step:
		attention_step_body(AP(0, float*), AP(1, float*), AP(2, unsigned*), AP(3, const float*), AP(4, const float*),
		                    AP(5, const float*), AP(6, const int*), AI(7), AI(8), AI(9), vg);
		break;
	case PK_route_step:
		// a one-warp kernel: warp 0 runs it
		if (threadIdx.x < 32)
			route_step_body(AP(0, const float*), AI(1), AI(2), AI(3), AP(4, const volatile unsigned long long*),
			                AP(5, GroupTable*), AP(6, int*), AP(7, int*), AP(8, volatile int*), AP(9, const int*),
			                AP(10, int*), AI(11));
		break;
	case PK_argmax_step:
		argmax_step_body(AP(0, const float*), AI(1), AP(2, const int*), AI(3), AP(4, int*), AP(5, int*),
		                 AP(6, unsigned*), AP(7, int*), AP(8, volatile int*), vg);
		break;
	case PK_add_gated_resid_step:
		add_gated_resid_step_body(AP(0, float*), AP(1, const float*), AP(2, const float*), AP(3, const float*), AI(4),
		                          vg);
		break;
	case PK_silu_mul_f32:
		silu_mul_span(AP(0, float*), AP(1, const float*), AP(2, const float*), AI(3), vg);
		break;
	case PK_add_f32:
		add_span(AP(0, float*), AP(1, const float*), AP(2, const float*), AI(3), vg);
		break;
	case PK_matvec_f16_r4_s: run_matvec<F16Fmt, 4, 2>(a, vg); break;
	case PK_experts_gateup_int4_p2_s_t:
	case PK_experts_gateup_f16_p2_s_t:
		if ((op == PK_experts_gateup_int4_p2_s_t) != int4) __trap();  // the other build's experts
		run_experts<EFmt>(a, vg, false);
		break;
	case PK_experts_down_int4_r4_s_t:
	case PK_experts_down_f16_r4_s_t:
		if ((op == PK_experts_down_int4_r4_s_t) != int4) __trap();
		run_experts<EFmt>(a, vg, true);
		break;
	default: __trap();  // the host encodes only the opcodes above
	}
}

// persistent_loop is the interpreter. Blocks of 256 threads. Block b runs
// units b, b + gridDim.x, ... of every instruction, instructions in program
// order (so no block waits for a unit that has not started: every earlier
// instruction's units belong to blocks that are running them or have
// finished), waiting once per instruction for its dependency. A block with
// no unit in an instruction goes straight on to the next, where it
// prefetches and waits: that is how weight loads run ahead of the
// instruction in progress.
template <class EFmt>
__device__ __forceinline__ void persistent_loop(const PInstr* __restrict__ prog, int n, unsigned* ctl,
                                                unsigned long long* trace) {
	unsigned* done = ctl + 2;
	int t0 = 0;  // the first unit (in program order) of instruction i, for traces
	for (int i = 0; i < n; i++) {
		const PInstr* in = &prog[i];
		const int units = __ldg(&in->units), dep = __ldg(&in->dep), pk = __ldg(&in->pf_kind);
		bool waited = dep < 0;
		for (int u = blockIdx.x; u < units; u += gridDim.x) {
			unsigned long long t_claim = 0, t_start = 0;
			if (trace != nullptr && threadIdx.x == 0) t_claim = global_ns();
			if (pk == PF_RANGE)
				prefetch_share(reinterpret_cast<const char*>(__ldg(&in->pf)), __ldg(&in->pf_bytes), u, units);
			if (!waited) {
				if (threadIdx.x == 0) {
					const unsigned want = (unsigned)__ldg(&prog[dep].units);
					while (ld_acquire(&done[dep]) < want) __nanosleep(32);
				}
				waited = true;
			}
			if (trace != nullptr && threadIdx.x == 0) t_start = global_ns();
			__syncthreads();
			if (pk == PF_GROUP_ROWS) {
				// rows of the routed group (the table was written by an
				// instruction this one waited for): row k's share of
				// pf_bytes from pf_off.
				const GroupTable* tbl = reinterpret_cast<const GroupTable*>(__ldg(&in->pf));
				const int A = __ldg(&in->pf_n);
				const unsigned long long off = __ldg(&in->pf_off), bytes = __ldg(&in->pf_bytes);
				for (int k = 0; k < A; k++) {
					const char* row = reinterpret_cast<const char*>(__ldcg(&tbl->recs[k])) + off;
					prefetch_share(row, bytes, u, units);
				}
			}
			run_instr<EFmt>(__ldg(&in->op), in->a, VGrid{u, units});
			__syncthreads();
			if (threadIdx.x == 0) {
				__threadfence();
				atomicAdd(&done[i], 1u);
				if (trace != nullptr) {
					const int t = t0 + u;
					trace[3 * t] = t_claim;
					trace[3 * t + 1] = t_start;
					trace[3 * t + 2] = global_ns();
				}
			}
		}
		t0 += units;
	}
	if (threadIdx.x == 0) {
		__threadfence();
		if (atomicAdd(&ctl[1], 1u) == gridDim.x - 1) {
			for (int j = 0; j < n; j++) done[j] = 0;
			ctl[1] = 0;
			__threadfence();
		}
	}
}

// Two builds of the interpreter, one per expert format (the host picks by
// the records' scheme: persistentBuild in runtime/cuda/persistent.go), one
// block of 256 threads per SM (255 registers). A build at two blocks per SM
// (128 registers) spilled and ran slower (results/persistent-h200/).
extern "C" __global__ void __launch_bounds__(256, 1) decode_persistent(const PInstr* prog, int n, unsigned* ctl,
                                                                    unsigned long long* trace) {
	persistent_loop<Int4Fmt>(prog, n, ctl, trace);
}
extern "C" __global__ void __launch_bounds__(256, 1) decode_persistent_f16x(const PInstr* prog, int n, unsigned* ctl,
                                                                       unsigned long long* trace) {
	persistent_loop<F16Fmt>(prog, n, ctl, trace);
}
