package device

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// LayerWeights are one decoder layer's non-routed tensors on the backend.
type LayerWeights struct {
	InputNorm backend.Tensor // [D]
	Q         backend.Tensor // [Hq*hd, D]
	K         backend.Tensor // [Hkv*hd, D]
	V         backend.Tensor // [Hkv*hd, D]
	QBias     backend.Tensor // [Hq*hd]   Qwen only, else nil
	KBias     backend.Tensor // [Hkv*hd]  Qwen only, else nil
	VBias     backend.Tensor // [Hkv*hd]  Qwen only, else nil
	O         backend.Tensor // [D, Hq*hd]
	QNorm     backend.Tensor // [Hq*hd]   OLMoE only, else nil
	KNorm     backend.Tensor // [Hkv*hd]  OLMoE only, else nil
	PostNorm  backend.Tensor // [D]
	Router    backend.Tensor // [E, D]

	SharedGate backend.Tensor // [S, D]  Qwen only
	SharedUp   backend.Tensor // [S, D]  Qwen only
	SharedDown backend.Tensor // [D, S]  Qwen only
	SharedMix  backend.Tensor // [1, D]  Qwen's shared_expert_gate

	// Fused storage, set only on a backend.Viewer: the tensors above are
	// then views into these (same bytes), which a captured decode step
	// multiplies in one launch each.
	QKV       backend.Tensor // [Hq*hd + 2*Hkv*hd, D]: q_proj | k_proj | v_proj rows
	QKVBias   backend.Tensor // [Hq*hd + 2*Hkv*hd]    Qwen only, else nil
	SharedGUM backend.Tensor // [2*S + 1, D]          Qwen only: gate_proj | up_proj | shared_expert_gate rows
}

// Weights are every non-routed tensor of a model on the backend.
type Weights struct {
	Embed  backend.Tensor // [V, D]
	Layers []LayerWeights
	Norm   backend.Tensor // [D]
	LMHead backend.Tensor // [V, D]; the embedding table when tied
	// Owned lists every tensor uploaded for these weights (not the views
	// into them), in upload order: what Free releases.
	Owned []backend.Tensor
}

// Free releases every tensor of Owned on be, once; the weights are unusable
// after it.
func (w *Weights) Free(be backend.Backend) error {
	var errs []error
	for _, t := range w.Owned {
		if err := be.Free(t); err != nil {
			errs = append(errs, err)
		}
	}
	w.Owned = nil
	if len(errs) > 0 {
		return fmt.Errorf("free weights: %w", errors.Join(errs...))
	}
	return nil
}
