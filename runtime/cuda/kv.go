//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// kvKernels are the kernels that store or read the KV cache, for one cache
// element type (kernelSet.kv): FP32 (kv_append_f32, attention_f32, ...) or
// FP16 (kv_append_f16 and the _kv16 twins, which round what they store to
// binary16 and read it back exactly: the rest of their arithmetic is the
// FP32 kernels').
type kvKernels struct {
	append, attention, attentionRows                             cu.Function
	ropeKVStep, qkNormRopeKVStep, attentionStep, attentionInStep cu.Function
	attentionTiled                                               cu.Function
	// attentionTiled32 is attentionTiled with 32 queries a block
	// (prefill_attention.cu attention_tiled32_rows_f32; tuning.attTiled32).
	attentionTiled32 cu.Function
	// matvecRopeKV is the q|k|v matvec with RoPE and the KV append in its
	// epilogue (matvec_f16.cu matvec_f16_rope_kv; tuning.ropeInQKV).
	matvecRopeKV cu.Function
	// attentionPfStep is attentionStep after an L2 prefetch of each block's
	// first K/V rows, issued before its dependency wait (decode.cu
	// attention_pf_step; tuning.attPrefetch).
	attentionPfStep cu.Function
	// attentionPipeStep is attentionStep with the FP16 cache's pipelined
	// loop (the next round's rows load while this one computes), after the
	// prefetch when its rows argument is above 0 (decode.cu
	// attention_pipe_step; tuning.attPipe).
	attentionPipeStep cu.Function
	// attentionRingStep is attentionStep with the FP16 cache's shared-memory
	// ring (each warp's next rounds' K/V rows copying with cp.async while a
	// round computes; attRingSmem bytes of dynamic shared memory; decode.cu
	// attention_ring_step; tuning.attRing).
	attentionRingStep cu.Function
	// attentionTraceStep is attentionStep that records each block's
	// residency, start, end and SM (decode.cu attention_trace_step;
	// tuning.attTrace, a measuring aid).
	attentionTraceStep cu.Function
	// attentionB3Step is attentionStep built for three blocks an SM
	// (decode.cu attention_b3_step; tuning.attB3).
	attentionB3Step cu.Function
	// attentionCsStep is attentionStep with streaming K/V loads
	// (decode.cu attention_cs_step; the captured steps' default,
	// tuning.noAttStream: attentionStep).
	attentionCsStep cu.Function
	// ropeKVRows and qkNormRopeKVRows are ropeKVStep's and
	// qkNormRopeKVStep's bodies over a batched prefill's rows
	// (prefill_rows.cu; QKRoPEKVRows).
	ropeKVRows, qkNormRopeKVRows cu.Function
}

// attRingSmem is step.cuh's ATT_RING_SMEM: the ring's dynamic shared
// memory a block (8 warps x 3 rounds x 4 KB).
const attRingSmem = 8 * 3 * 2 * 8 * 128 * 2

// kvKernelNames lists kvKernels' functions in field order, per cache type.
var kvKernelNames = [2][18]string{
	{"kv_append_f32", "attention_f32", "attention_rows_f32", "rope_kv_step", "qk_norm_rope_kv_step", "attention_step", "attention_in_step",
		"attention_tiled_rows_f32", "matvec_f16_rope_kv", "attention_pf_step", "attention_pipe_step", "attention_tiled32_rows_f32",
		"attention_ring_step", "attention_trace_step", "attention_b3_step", "attention_cs_step", "rope_kv_rows", "qk_norm_rope_kv_rows"},
	{"kv_append_f16", "attention_f32_kv16", "attention_rows_f32_kv16", "rope_kv_step_kv16", "qk_norm_rope_kv_step_kv16",
		"attention_step_kv16", "attention_in_step_kv16", "attention_tiled_rows_f32_kv16", "matvec_f16_rope_kv_kv16", "attention_pf_step_kv16",
		"attention_pipe_step_kv16", "attention_tiled32_rows_f32_kv16", "attention_ring_step_kv16", "attention_trace_step_kv16",
		"attention_b3_step_kv16", "attention_cs_step_kv16", "rope_kv_rows_kv16", "qk_norm_rope_kv_rows_kv16"},
}

// kvIndex is a cache element type's index in kernelSet.kv.
func kvIndex(dt backend.DType) int {
	if dt == backend.F16 {
		return 1
	}
	return 0
}

// kvCaches checks a layer's K and V caches for op: CUDA tensors of one
// element type, F32 or F16, of one length.
func (b *Backend) kvCaches(op string, kCache, vCache backend.Tensor) (kc, vc *Tensor, err error) {
	if kc, err = b.tensorOf(op, "kCache", kCache, backend.F32, backend.F16); err != nil {
		return nil, nil, err
	}
	if vc, err = b.tensorOf(op, "vCache", vCache, backend.F32, backend.F16); err != nil {
		return nil, nil, err
	}
	if kc.dt != vc.dt {
		return nil, nil, shapeErr(op, "K cache %v, V cache %v: want one element type", kc.dt, vc.dt)
	}
	return kc, vc, nil
}

// appendKV launches the append of n values at element offset off of the
// caches, from k and v (F32): a copy into an FP32 cache, kv_append_f16's
// rounding into an FP16 one. Owner thread.
func (b *Backend) appendKV(op string, kc, vc *Tensor, k, v cu.DevicePtr, n, off int) error {
	if kc.dt == backend.F16 {
		if err := b.launch(b.k.kv[1].append, b.elementwiseGrid(n), block, 0, argPtr(kc.ptr), argPtr(vc.ptr), argPtr(k), argPtr(v),
			argInt(n), argInt(off)); err != nil {
			return fmt.Errorf("cuda: %s: kv_append_f16: %w", op, err)
		}
		return nil
	}
	at := cu.DevicePtr(4 * off)
	if err := cu.MemcpyDtoDAsync(kc.ptr+at, k, int64(4*n), b.compute); err != nil {
		return fmt.Errorf("cuda: %s: K: %w", op, err)
	}
	if err := cu.MemcpyDtoDAsync(vc.ptr+at, v, int64(4*n), b.compute); err != nil {
		return fmt.Errorf("cuda: %s: V: %w", op, err)
	}
	return nil
}
