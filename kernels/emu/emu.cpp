// emu.cpp: the fiber scheduler behind cuda_emu.h.
#include "cuda_emu.h"
#include <vector>
#include <random>

dim3_ threadIdx, blockIdx, blockDim, gridDim;

// Dynamic shared memory: the launched size, then a poisoned guard zone that
// must stay untouched (checked after each block).
constexpr size_t kSmemFloats = (256 << 10) / 4;
alignas(16) float xs_smem[kSmemFloats + 4096];

// emu_switch saves the callee-saved registers, MXCSR and the x87 control
// word on the current stack, stores the stack pointer in *save and resumes
// the context whose stack pointer is next (System V x86-64). It replaces
// swapcontext, which makes a system call per switch.
extern "C" void emu_switch(void** save, void* next);
asm(R"(
	.text
	.globl emu_switch
	.type emu_switch,@function
emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	subq $8, %rsp
	stmxcsr (%rsp)
	fnstcw 4(%rsp)
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	ldmxcsr (%rsp)
	fldcw 4(%rsp)
	addq $8, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size emu_switch, .-emu_switch
)");

namespace {
struct Fiber {
	void* sp;
	std::vector<char> stack;
	unsigned tid;
	bool done;
};
struct Barrier {
	unsigned count = 0;
	unsigned long gen = 0;
};
void* sched_sp;
std::vector<Fiber> fibers;
Fiber* cur = nullptr;
Barrier block_bar;
std::vector<Barrier> warp_bar;
std::vector<unsigned> warp_slot;
unsigned long progress = 0;
std::function<void()>* body_fn;
std::mt19937 rng(12345);

void yield() { emu_switch(&cur->sp, sched_sp); }

void arrive(Barrier& b, unsigned members) {
	const unsigned long gen = b.gen;
	if (++b.count == members) {
		b.count = 0;
		b.gen++;
		progress++;
		return;
	}
	while (b.gen == gen) yield();
}

void trampoline() {
	(*body_fn)();
	cur->done = true;
	progress++;
	emu_switch(&cur->sp, sched_sp);
	abort();  // a finished fiber is never resumed
}

// init_fiber prepares f's stack so that emu_switch into it starts trampoline.
void init_fiber(Fiber& f) {
	uintptr_t top = (reinterpret_cast<uintptr_t>(f.stack.data()) + f.stack.size()) & ~uintptr_t(15);
	uint64_t* p = reinterpret_cast<uint64_t*>(top);
	*--p = 0;                                            // trampoline's return address (never used)
	*--p = reinterpret_cast<uint64_t>(&trampoline);      // emu_switch's ret
	for (int i = 0; i < 6; i++) *--p = 0;                // rbp rbx r12 r13 r14 r15
	*--p = 0x1F80ull | (0x037Full << 32);                // MXCSR, x87 control word
	f.sp = p;
}
}  // namespace

// emu_yield lets the other fibers run (a spin's __nanosleep): a fiber that
// waits for another warp's counter would otherwise spin for ever.
void emu_yield() { yield(); }
void emu_progress() { progress++; }

void __syncthreads() { arrive(block_bar, blockDim.x); }
void __syncwarp(unsigned) { arrive(warp_bar[cur->tid >> 5], 32); }
unsigned emu_ballot(int p) {
	const unsigned w = cur->tid >> 5;
	warp_slot[cur->tid] = p != 0;
	arrive(warp_bar[w], 32);
	unsigned r = 0;
	for (unsigned l = 0; l < 32; l++) r |= (warp_slot[(w << 5) | l] != 0 ? 1u : 0u) << l;
	arrive(warp_bar[w], 32);
	return r;
}
unsigned emu_shfl(unsigned v, int src) {
	const unsigned w = cur->tid >> 5;
	warp_slot[cur->tid] = v;
	arrive(warp_bar[w], 32);
	const unsigned r = warp_slot[(w << 5) | ((unsigned)src & 31u)];
	arrive(warp_bar[w], 32);
	return r;
}
unsigned emu_shfl_xor(unsigned v, int o) {
	const unsigned lane = cur->tid & 31, w = cur->tid >> 5;
	warp_slot[cur->tid] = v;
	arrive(warp_bar[w], 32);
	const unsigned r = warp_slot[(w << 5) | (lane ^ (unsigned)o)];
	arrive(warp_bar[w], 32);
	return r;
}

namespace {
struct MmaIn {
	unsigned a[4], b[2];
};
std::vector<MmaIn> mma_in;
float half_lo(unsigned r) { return __half2float(__half{(unsigned short)(r & 0xffffu)}); }
float half_hi(unsigned r) { return __half2float(__half{(unsigned short)(r >> 16)}); }
float half_at(unsigned r, int k) { return (k & 1) ? half_hi(r) : half_lo(r); }
}  // namespace

void emu_mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
	const unsigned lane = cur->tid & 31, w = cur->tid >> 5, base = w << 5;
	std::memcpy(mma_in[cur->tid].a, a, sizeof mma_in[cur->tid].a);
	std::memcpy(mma_in[cur->tid].b, b, sizeof mma_in[cur->tid].b);
	arrive(warp_bar[w], 32);
	const unsigned g = lane >> 2, q = lane & 3;
	float out[4];
	for (int e = 0; e < 4; e++) {
		const unsigned row = g + (e >> 1) * 8, col = 2 * q + (e & 1);
		float sum = d[e];
		for (int k = 0; k < 16; k++) {
			// A[row][k]: lane (row % 8)*4 + (k % 8)/2, register (row >= 8) + 2*(k >= 8)
			const MmaIn& ai = mma_in[base + (row & 7) * 4 + ((k & 7) >> 1)];
			const float av = half_at(ai.a[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k);
			// B[k][col]: lane col*4 + (k % 8)/2, register k >= 8
			const MmaIn& bi = mma_in[base + col * 4 + ((k & 7) >> 1)];
			const float bv = half_at(bi.b[k >= 8 ? 1 : 0], k);
			sum = std::fmaf(av, bv, sum);
		}
		out[e] = sum;
	}
	arrive(warp_bar[w], 32);
	for (int e = 0; e < 4; e++) d[e] = out[e];
}

void emu_launch(unsigned grid, unsigned block, size_t smem, std::function<void()> body) {
	if (block % 32 != 0) { fprintf(stderr, "emu: block %u not a multiple of 32\n", block); abort(); }
	if (smem > kSmemFloats * 4) { fprintf(stderr, "emu: %zu bytes of shared memory\n", smem); abort(); }
	body_fn = &body;
	gridDim = {grid, 1, 1};
	blockDim = {block, 1, 1};
	fibers.resize(block);
	for (auto& f : fibers) f.stack.resize(256 << 10);
	warp_bar.assign(block / 32, Barrier{});
	warp_slot.assign(block, 0);
	mma_in.assign(block, MmaIn{});
	std::vector<unsigned> order(block);
	const uint32_t poison = 0x7fbadbadu;  // a NaN: reads past smem poison results
	for (unsigned b = 0; b < grid; b++) {
		// fresh smem is garbage on a GPU: poison it, so a read before a write shows
		for (size_t i = 0; i < kSmemFloats + 4096; i++) std::memcpy(&xs_smem[i], &poison, 4);
		block_bar = Barrier{};
		for (unsigned t = 0; t < block; t++) {
			Fiber& f = fibers[t];
			f.tid = t;
			f.done = false;
			init_fiber(f);
			order[t] = t;
		}
		unsigned left = block;
		while (left > 0) {
			std::shuffle(order.begin(), order.end(), rng);  // any order between barriers must do
			const unsigned long before = progress;
			bool ran = false;
			for (unsigned t : order) {
				Fiber& f = fibers[t];
				if (f.done) continue;
				cur = &f;
				threadIdx = {t, 0, 0};
				blockIdx = {b, 0, 0};
				emu_switch(&sched_sp, f.sp);
				ran = true;
				if (f.done) left--;
			}
			if (ran && left > 0 && progress == before) {
				fprintf(stderr, "emu: deadlock in block %u (%u threads waiting)\n", b, left);
				abort();
			}
		}
		for (size_t i = smem / 4 + ((smem % 4) ? 1 : 0); i < kSmemFloats + 4096; i++) {
			uint32_t u;
			std::memcpy(&u, &xs_smem[i], 4);
			if (u != poison) {
				fprintf(stderr, "emu: block %u wrote shared memory at float %zu, past its %zu bytes\n", b, i, smem);
				abort();
			}
		}
	}
}
