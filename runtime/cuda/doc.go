//go:build cuda

// Package cuda is Horizon's GPU backend: backend.Backend and cache.Device on
// one NVIDIA GPU through the CUDA driver API (gorgonia.org/cu, plus a small
// cgo file of our own for what gorgonia lacks). It is built only with
// `-tags cuda` and is the only package with `import "C"`.
//
// # Model
//
// One goroutine, locked to its OS thread, owns the CUDA context and makes
// every driver call (owner.go). Backend methods validate their arguments on
// the caller's goroutine, then either enqueue the work (kernel launches,
// small uploads: they return at once, like CUDA launches) or run it and wait
// (allocation, reads back to the host). Hand-offs between a caller and the
// owner spin for a short window instead of parking goroutines (parking and
// waking the owner's locked thread cost ~36 µs per synchronising round
// trip), and the context spin-waits on the GPU. All compute work goes to one
// compute stream, in program order; expert-row copies for the cache go to a
// separate copy stream, with events. Kernels are launched through our own
// cuLaunchKernel wrapper (driver.go), which also passes the grouped kernels'
// row table by value, so a grouped op is a single launch.
//
// # Numerics
//
// Activations and scratch are FP32 on the device, exactly as in the CPU
// reference: the only differences from the CPU backend are the reduction
// orders of dot products (fixed, see kernels/common.cuh) and libm rounding,
// so the conformance suite passes with the CPU tolerances. Weights keep
// their stored format: UploadF16 tensors stay FP16 on the device, expert
// rows hold qpack-int4-b256-v1 (or fp16) records byte for byte, and kernels
// read them directly with FP32 accumulation. FP32 activations cost bandwidth
// only on vectors (KBs per op), never on weights, so decode stays
// weight-bound.
//
// Every output of an expert projection is computed by the same per-row
// reduction in the scalar (ExpertMatVec), grouped (ExpertGateUp,
// ExpertDownCombine) and fused (FusedExperts: the grouped kernels back to
// back) paths, so the executors (scalar-v1 per expert, grouped-v1 per
// group) give bit-identical results, and repeated runs give bit-identical
// outputs (no atomics, no scheduling-dependent order). Captured steps launch
// the structure of the engine's executor's Strategy (step.go), not one
// chosen by name.
//
// # Tensors
//
// A Tensor is a device allocation (rounded up to 128 bytes and zeroed) with
// an element count and a dtype. TopK and Argmax return host values and
// therefore wait for the compute stream (their kernels write the results
// straight into mapped pinned memory when Open's probe says that works, so
// no copy follows the kernel); ReadF32 does too.
//
// # Row kernels
//
// Every matvec-like kernel (FP16 and int4 matvec, grouped gate/up and down)
// runs one warp loop, row_pipeline in kernels/common.cuh: warp tasks of NR
// rows, 16-byte weight loads that skip L1, the next step's loads issued
// before the current step's arithmetic, and the first loads issued before
// the block stages its activations. Launch choices (NR, chunks per step,
// grid, the down kernel's tile) change speed only, never bits; the tuning
// struct in backend.go lets benchmarks compare them in one run, and
// kernels/emu checks the invariance on the CPU.
//
// # Captured steps
//
// The engine's decode step is also available as CUDA graphs (step.go,
// device.Stepper): graph-full at full residency (one graph per step,
// routing on the GPU, expert rows read through a device table, the next
// decode step launched before the host reads the token), graph-segmented
// at partial residency (graphs cut at each layer's routing read, where the
// host serves the group through the cache), graph-wait on request, and
// persistent: graph-full's step recorded as a program that one persistent
// kernel interprets (persistent.go, persistent_program.go,
// kernels/persistent.cu; slower than graph-full today,
// results/persistent-h200). The
// step kernels (kernels/decode.cu) share their arithmetic with the op-by-op
// kernels (kernels/step.cuh), and every RMSNorm is computed by its
// consumers while they stage their input, so captured steps give the
// op-by-op bits (TestStepperMatchesOps). The graphs' kernels are
// programmatic dependent launches (cuLaunchKernelEx; every step kernel waits
// with griddepcontrol before its dependent accesses, kernels/common.cuh),
// so a kernel's blocks start as the previous kernel's leave; tuning.noPDL
// captures them plainly. A step replays ~147 kernels for OLMoE-1B-7B at
// ~1.0 ms per token (results/pdl-h200, results/decode-tunings-h200): the
// kernels' own inefficiency (27-37% of HBM bandwidth for the projections
// and experts, latency chains for routing and short attention) is what
// remains; PDL gained 2%, the down kernel's loads ahead of its wait 2%.
// Two fusions that keep the bits are tunings, off because they measured
// slower: router + route_step in one launch (tuning.routeFused) and a
// routed group's gate/up + down in one launch with a grid barrier
// (tuning.fusedMoE, experts_moe_int4_t). A third is off for the same
// reason: the routing done inside the routed experts' gate/up and down
// blocks (tuning.routeIn, experts_routed.cu: no route_step launch), 10-12%
// slower, 3-5% with the down kernel reading gate/up's table
// (results/decode-h200-s13).
//
// Known weak spots: op-by-op, every op is one kernel launch issued from Go
// (~3-4 µs of CPU each), so small models are launch-bound there. A kernel
// of a few MB cannot reach the HBM rate on its own: launch gap, first-load
// latency and tail are fixed costs of a few microseconds (BenchmarkStream
// measures them in the same run as the row kernels). FusedExperts is two
// launches, not one kernel.
package cuda
