package engine

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// Speculative next-layer prefetch (LoadOptions.Prefetch "next-layer").
//
// In the op-by-op step, once layer l has routed and its experts were
// served (device.Acquire: Lease, then Serve), the engine multiplies layer
// l+1's router weights with layer l's router input xn (the post-attention
// norm of layer l) into a scratch [E] buffer, takes the top-k with layer
// l+1's normalisation, and hands that predicted group to the cache's
// Prefetch, which loads the predicted misses on the copy stream while
// layer l's experts compute. Layer l+1 then routes on its own input,
// exactly as without prefetch, and leases and serves the group it routed:
// prefetched experts are hits, anything mispredicted is loaded by the
// ordinary miss path. The prediction writes only the scratch buffer, so
// logits and tokens are bit-identical with prefetch on and off; only
// transfers, evictions and hits move. The Lease of the routed group scores
// the prediction (precision and recall counters) and waits for the
// layer's prefetch to finish, so the counters do not depend on goroutine
// timing. With the prediction and the routing both top-k, precision and
// recall are equal; they are kept apart for predictors whose guesses have
// another size.
//
// Captured device steps (runtime/cuda, Stepper) route on the device and
// have no host point between layers to predict from, so prefetch forces
// StepOps (see Load).

// Prefetch modes, the values of LoadOptions.Prefetch.
const (
	// PrefetchOff: no speculation (the default; "" means it too).
	PrefetchOff = "off"
	// PrefetchNextLayer predicts layer l+1's routed group from layer l's
	// router input and prefetches its misses.
	PrefetchNextLayer = "next-layer"
)

// PrefetchModes lists the values LoadOptions.Prefetch accepts besides "".
func PrefetchModes() []string { return []string{PrefetchOff, PrefetchNextLayer} }

// ParsePrefetch returns the prefetch mode of s ("" is PrefetchOff) or an
// error naming the modes.
func ParsePrefetch(s string) (string, error) {
	switch s {
	case "", PrefetchOff:
		return PrefetchOff, nil
	case PrefetchNextLayer:
		return PrefetchNextLayer, nil
	}
	return "", fmt.Errorf("prefetch %q: want one of %v", s, PrefetchModes())
}

// nextLayerPrefetch is the engine's prefetch state.
type nextLayerPrefetch struct {
	logits backend.Tensor // [E] layer l+1's router applied to layer l's xn
}

// usePrefetch turns next-layer prefetch on when mode asks for it (the
// engine's expert rows prefetch through ExpertRows.Prefetch).
func (e *Engine) usePrefetch(mode string) error {
	if e.pf != nil { // a mode set before: its logits buffer goes
		if err := e.be.Free(e.pf.logits); err != nil {
			return fmt.Errorf("engine: prefetch %s: free the earlier mode's logits: %w", mode, err)
		}
		e.pf = nil
	}
	if mode != PrefetchNextLayer {
		return nil
	}
	logits, err := e.be.Alloc(e.cfg.NumExperts)
	if err != nil {
		return fmt.Errorf("engine: prefetch %s: allocate the predicted router logits [%d]: %w", mode, e.cfg.NumExperts, err)
	}
	e.pf = &nextLayerPrefetch{logits: logits}
	return nil
}

// PrefetchMode is the prefetch mode in force: PrefetchOff or
// PrefetchNextLayer.
func (e *Engine) PrefetchMode() string {
	if e.pf != nil {
		return PrefetchNextLayer
	}
	return PrefetchOff
}

// prefetchNext predicts layer l+1's routed group from e.xn (layer l's
// router input) and starts prefetching it; nothing without prefetch or at
// the last layer. It reads e.xn and writes only its own scratch.
func (e *Engine) prefetchNext(l int) error {
	if e.pf == nil || l+1 >= len(e.w.Layers) {
		return nil
	}
	if err := e.be.MatVec(e.pf.logits, e.w.Layers[l+1].Router, e.xn, nil); err != nil {
		return fmt.Errorf("predict layer %d: router: %w", l+1, err)
	}
	ids, _, err := e.be.TopK(e.pf.logits, e.cfg.TopK, e.cfg.NormTopKProb)
	if err != nil {
		return fmt.Errorf("predict layer %d: router top-%d: %w", l+1, e.cfg.TopK, err)
	}
	if err := e.experts.Prefetch(l+1, ids); err != nil {
		return fmt.Errorf("prefetch layer %d experts %v: %w", l+1, ids, err)
	}
	return nil
}
