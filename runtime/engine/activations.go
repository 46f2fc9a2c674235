package engine

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The routed experts' activation dtype (LoadOptions.ExpertActivations).
//
// fp32, the default, multiplies every expert matrix by FP32 activations.
// fp16 rounds the activations of a batched prefill's INT4 expert matmuls to
// FP16 at one power-of-two shift a token row (half.RowShiftF16), the seed's
// W4A16: the CUDA backend's row-shift tensor-core kernels then issue half
// the mma of the FP32 path's hi and lo halves. Products and sums stay FP32,
// and decode steps, the dense projections, attention and the router keep
// FP32 activations. Logits and tokens differ from fp32's; within one
// expert-activation dtype they stay identical across capacities, executors
// and step modes. Raw records state it (artifact.expert_activation_dtype).
const (
	ExpertActFP32 = "fp32"
	ExpertActFP16 = "fp16"
)

// ExpertActivationDTypes maps the names campaigns and flags use to dtypes.
var ExpertActivationDTypes = map[string]backend.DType{ExpertActFP32: backend.F32, ExpertActFP16: backend.F16}

// ExpertActivationNames lists the accepted names, the default first.
func ExpertActivationNames() []string { return []string{ExpertActFP32, ExpertActFP16} }

// ParseExpertActivations reads an expert-activation dtype name ("" is fp32).
func ParseExpertActivations(s string) (backend.DType, error) { return parseActivations("expert", s) }

// parseActivations reads an activation dtype name ("" is fp32) for the
// option what names ("expert", "dense").
func parseActivations(what, s string) (backend.DType, error) {
	if s == "" {
		return backend.F32, nil
	}
	if d, ok := ExpertActivationDTypes[s]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("%s activations %q: want %s (the default) or %s", what, s, ExpertActFP32, ExpertActFP16)
}

// useExpertActivations sets the backend's expert activations once the
// prefill mode is resolved. FP16 needs what it applies to: INT4 experts,
// a batched prefill and a backend that implements it; refusing otherwise
// keeps a declared FP16 from being recorded where nothing ran in FP16. A
// backend that implements it is always set, FP32 too, so an earlier Load
// on the same backend leaves nothing behind.
func (e *Engine) useExpertActivations(dt backend.DType) error {
	ea, ok := e.be.(backend.ExpertActivations)
	if dt == backend.F16 {
		switch {
		case e.layout.Scheme != qpack.SchemeInt4:
			return fmt.Errorf("expert activations %s: the artifact's experts are %s; FP16 activations apply to %s experts only (W4A16)",
				ExpertActFP16, e.layout.Scheme, qpack.SchemeInt4)
		case !ok:
			return fmt.Errorf("expert activations %s: the %s backend multiplies experts by FP32 activations only", ExpertActFP16, e.be.Name())
		case e.PrefillMode() != PrefillBatched:
			return fmt.Errorf("expert activations %s: they apply to a batched prefill's expert matmuls, and this engine prefills token at a time (prefill %s, or next-layer prefetch); use prefill %s or %s",
				ExpertActFP16, PrefillToken, PrefillBatched, PrefillAuto)
		}
	}
	if ok {
		if err := ea.SetExpertActivations(dt); err != nil {
			return fmt.Errorf("expert activations: %w", err)
		}
	}
	e.expertAct = dt
	return nil
}

// ExpertActivationDType is the dtype the routed experts' batched matmuls
// take their activations in (backend.F32 or backend.F16).
func (e *Engine) ExpertActivationDType() backend.DType { return e.expertAct }

// ExpertActivationName is ExpertActivationDType as raw records spell it:
// "FP32" or "FP16".
func (e *Engine) ExpertActivationName() string { return activationName(e.expertAct) }

// activationName spells an activation dtype as raw records do.
func activationName(dt backend.DType) string {
	if dt == backend.F16 {
		return "FP16"
	}
	return "FP32"
}

// The dense projections' activation dtype (LoadOptions.DenseActivations).
//
// fp32, the default, multiplies every dense FP16 matrix by FP32
// activations. fp16 rounds the activations of a batched prefill's dense
// projections (attention's q, k, v and o; the shared expert's gate, up and
// down) to FP16 at one power-of-two shift a 32-value chunk
// (half.ChunkShiftF16): the CUDA backend's tensor-core kernels then issue
// half the mma of the FP32 path's hi and lo halves. Products and sums stay
// FP32; the router, the shared expert's sigmoid gate, the head, attention
// and decode steps keep FP32 activations. Logits and tokens differ from
// fp32's; within one dense-activation dtype they stay identical across
// capacities, executors and step modes. Raw records state it
// (artifact.dense_activation_dtype). The names are the expert activations'.
var DenseActivationDTypes = ExpertActivationDTypes

// DenseActivationNames lists the accepted names, the default first.
func DenseActivationNames() []string { return ExpertActivationNames() }

// ParseDenseActivations reads a dense-activation dtype name ("" is fp32).
func ParseDenseActivations(s string) (backend.DType, error) { return parseActivations("dense", s) }

// useDenseActivations sets the dense projections' activations once the
// prefill mode is resolved. FP16 needs a batched prefill and a backend
// that implements backend.DenseActivations; refusing otherwise keeps a
// declared FP16 from being recorded where nothing ran in FP16.
func (e *Engine) useDenseActivations(dt backend.DType) error {
	e.denseAct, e.dense16 = backend.F32, nil
	if dt != backend.F16 {
		return nil
	}
	if e.PrefillMode() != PrefillBatched {
		return fmt.Errorf("dense activations %s: they apply to a batched prefill's projections, and this engine prefills token at a time (prefill %s, or next-layer prefetch); use prefill %s or %s",
			ExpertActFP16, PrefillToken, PrefillBatched, PrefillAuto)
	}
	da, ok := e.batched.(backend.DenseActivations)
	if !ok {
		return fmt.Errorf("dense activations %s: the %s backend multiplies dense projections by FP32 activations only", ExpertActFP16, e.be.Name())
	}
	e.denseAct, e.dense16 = dt, da
	return nil
}

// DenseActivationDType is the dtype a batched prefill's dense projections
// take their activations in (backend.F32 or backend.F16).
func (e *Engine) DenseActivationDType() backend.DType { return e.denseAct }

// DenseActivationName is DenseActivationDType as raw records spell it:
// "FP32" or "FP16".
func (e *Engine) DenseActivationName() string { return activationName(e.denseAct) }

// denseMatMul is a batched prefill's dense projection dst = W·x[t] (+ bias)
// on the declared activations: MatMulA16 when they are FP16, else MatMul.
func (e *Engine) denseMatMul(dst, w, x, bias backend.Tensor, T int) error {
	if e.dense16 != nil {
		return e.dense16.MatMulA16(dst, w, x, bias, T)
	}
	return e.batched.MatMul(dst, w, x, bias, T)
}

// denseParts is the fused q|k|v projection on the declared activations:
// MatMulPartsA16 or MatMulParts over the fused weight w, or nil when the
// backend has no fused op for them (the engine then multiplies each
// projection's view with denseMatMul).
func (e *Engine) denseParts(w backend.Tensor) func(dsts []backend.Tensor, rows []int, x, bias backend.Tensor, T int) error {
	if w == nil {
		return nil
	}
	if e.dense16 != nil {
		if pm, ok := e.batched.(backend.PartMatMulsA16); ok {
			return func(dsts []backend.Tensor, rows []int, x, bias backend.Tensor, T int) error {
				return pm.MatMulPartsA16(dsts, rows, w, x, bias, T)
			}
		}
		return nil
	}
	if pm, ok := e.batched.(backend.PartMatMuls); ok {
		return func(dsts []backend.Tensor, rows []int, x, bias backend.Tensor, T int) error {
			return pm.MatMulParts(dsts, rows, w, x, bias, T)
		}
	}
	return nil
}
