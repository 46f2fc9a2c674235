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
#define HZ_PERSISTENT 1
#include "common.cuh"  // listed for the PTX source hashes
#include "step.cuh"
#include "decode.cuh"
#include "experts.cuh"

// The instruction set: one opcode per kernel a captured step may launch.
// persistentOps in runtime/cuda/persistent_program.go lists the same names
// in the same order (TestPersistentOpcodes compares them).
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
	PK_matvec_f16_r1_s,
	PK_matvec_f16_r2_s,
	PK_matvec_f16_r4_s,
	PK_experts_gateup_int4_p2_s_t,
	PK_experts_gateup_int4_p4_s_t,
	PK_experts_gateup_f16_p2_s_t,
	PK_experts_gateup_f16_p4_s_t,
	PK_experts_down_int4_r4_s_t,
	PK_experts_down_int4_r8_s_t,
	PK_experts_down_int4_r4c1_s_t,
	PK_experts_down_f16_r4_s_t,
	PK_experts_down_f16_r8_s_t,
	PK_experts_down_f16_r4c1_s_t,
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

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
	unsigned v;
	asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

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

template <class Fmt, int NRP, int CPL>
__device__ __forceinline__ void run_gateup(const unsigned long long* a, VGrid vg) {
	gateup_body<Fmt, NRP, CPL, true>(AP(0, float*), AP(1, const float*), AI(2), AI(3), AI(4), AI(5), AI(6), AI(7),
	                                 AI(8), *AP(9, const GroupTable*), AI(10),
	                                 NormSpec{AP(11, const void*), AI(12), AF(13)}, vg);
}

template <class Fmt, int NR, int CPL>
__device__ __forceinline__ void run_down(const unsigned long long* a, VGrid vg) {
	down_body<Fmt, NR, CPL, true>(AP(0, float*), AP(1, const float*), AI(2), AI(3), AI(4), AI(5), AI(6), AI(7),
	                              AI(8), *AP(9, const GroupTable*), AI(10), AP(11, const float*), AI(12), vg);
}

// run_instr runs unit vg.bid of an instruction. Every thread of the block
// calls it.
__device__ __forceinline__ void run_instr(int op, const unsigned long long* a, VGrid vg) {
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
		attention_step_body(AP(0, float*), AP(1, const float*), AP(2, const float*), AP(3, const float*),
		                    AP(4, const int*), AI(5), AI(6), AI(7), vg);
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
	case PK_matvec_f16_r1_s: run_matvec<F16Fmt, 1, 8>(a, vg); break;
	case PK_matvec_f16_r2_s: run_matvec<F16Fmt, 2, 4>(a, vg); break;
	case PK_matvec_f16_r4_s: run_matvec<F16Fmt, 4, 2>(a, vg); break;
	case PK_experts_gateup_int4_p2_s_t: run_gateup<Int4Fmt, 2, 2>(a, vg); break;
	case PK_experts_gateup_int4_p4_s_t: run_gateup<Int4Fmt, 4, 1>(a, vg); break;
	case PK_experts_gateup_f16_p2_s_t: run_gateup<F16Fmt, 2, 2>(a, vg); break;
	case PK_experts_gateup_f16_p4_s_t: run_gateup<F16Fmt, 4, 1>(a, vg); break;
	case PK_experts_down_int4_r4_s_t: run_down<Int4Fmt, 4, 2>(a, vg); break;
	case PK_experts_down_int4_r8_s_t: run_down<Int4Fmt, 8, 1>(a, vg); break;
	case PK_experts_down_int4_r4c1_s_t: run_down<Int4Fmt, 4, 1>(a, vg); break;
	case PK_experts_down_f16_r4_s_t: run_down<F16Fmt, 4, 2>(a, vg); break;
	case PK_experts_down_f16_r8_s_t: run_down<F16Fmt, 8, 1>(a, vg); break;
	case PK_experts_down_f16_r4c1_s_t: run_down<F16Fmt, 4, 1>(a, vg); break;
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
			run_instr(__ldg(&in->op), in->a, VGrid{u, units});
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

// Two builds of the interpreter: one block per SM (registers up to 255) and
// two per SM (128 registers). The host picks one (persistentBuild in
// runtime/cuda/persistent.go). (A third, with the row bodies called rather
// than inlined, ran no faster on the H200: results/persistent-h200/.)
extern "C" __global__ void __launch_bounds__(256, 1) decode_persistent(const PInstr* prog, int n, unsigned* ctl,
                                                                    unsigned long long* trace) {
	persistent_loop(prog, n, ctl, trace);
}
extern "C" __global__ void __launch_bounds__(256, 2) decode_persistent_2(const PInstr* prog, int n, unsigned* ctl,
                                                                    unsigned long long* trace) {
	persistent_loop(prog, n, ctl, trace);
}
