package engine

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// LoadOptions select how an artifact is run. Zero values take the defaults
// noted on each field.
type LoadOptions struct {
	Executor  string // routed-expert executor, one of executor.Names(); "" means scalar-v1
	Capacity  int    // published expert rows per layer; 0 means every expert (full residency)
	Placement string // initial placement; "" means canonical (experts 0..c-1)
	Policy    string // eviction policy; "" means lru
	Spares    int    // unpublished spare rows, one pool the layers share; 0 means top-k
	Staging   int    // staging buffers in the ring; 0 means top-k (staged transport; the registered transport has none)
	Transport string // miss copy path, "staged" or "registered" (cache.Transports); "" means staged
	MaxSeq    int    // KV-cache positions; 0 means DefaultMaxSeq
	KV        string // KV-cache element type, "fp32" or "fp16" (KVDTypes); "" means fp32
	// ExpertActivations is the dtype the routed experts' batched-prefill
	// matmuls take their activations in, "fp32" or "fp16"
	// (ExpertActivationDTypes; activations.go); "" means fp32. fp16 needs
	// INT4 experts, batched prefill and a backend with
	// backend.ExpertActivations.
	ExpertActivations string
	// DenseActivations is the dtype a batched prefill's dense FP16
	// projections (q, k, v, o and the shared expert's gate, up and down)
	// take their activations in, "fp32" or "fp16" (DenseActivationDTypes;
	// activations.go); "" means fp32. fp16 needs batched prefill and a
	// backend with backend.DenseActivations.
	DenseActivations string
	// StepMode: "" or "auto" runs captured device steps when the backend
	// can (StepGraphFull at full residency, StepGraphSegmented otherwise);
	// StepOps always issues op by op; a graph mode asks for that mode.
	StepMode string
	// Prefetch: "" or "off" (the default) or "next-layer" (speculative
	// next-layer prefetch, prefetch.go). next-layer runs op by op: with
	// StepMode "" or "auto" it forces StepOps, and a graph StepMode is an
	// error.
	Prefetch string
	// Overlap: "" or "off" (the default) or "hit-compute" (compute a
	// layer's resident experts while its misses copy, overlap.go). It needs
	// graph-segmented steps: partial residency with StepMode "", "auto"
	// or graph-segmented on a backend with a stepper; anything else is an
	// error.
	Overlap string
	// Prefill: "" or "auto" (batched where the backend runs batched ops op
	// by op, else token at a time), "batched" (an error where it cannot
	// run) or "token" (PrefillModes, prefill.go).
	Prefill string
	// Trace turns on the cache's routing trace (cache.Options.Trace,
	// Cache.TakeTrace).
	Trace bool
}

// Loaded is an engine with the residency machinery it runs on.
type Loaded struct {
	*Engine
	Cache     *cache.Cache
	Authority *cache.Authority
}

// Load builds the host authority (every expert record in read-only process
// memory, hash verified once), the budgeted expert cache on dev, the
// non-routed weights on be, and an engine over them. Full residency
// (capacity = experts) and partial residency are the same code. The cache is
// admitted before Load returns: every later artifact read or hash is counted
// as request-time work.
func Load(be backend.Backend, dev cache.Device, art *qpack.Artifact, o LoadOptions) (l *Loaded, err error) {
	cfg, err := art.Config()
	if err != nil {
		return nil, fmt.Errorf("artifact config: %w", err)
	}
	prefetch, err := ParsePrefetch(o.Prefetch)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	prefill, err := ParsePrefill(o.Prefill)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	overlap, err := ParseOverlap(o.Overlap)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	kv, err := ParseKVDType(o.KV)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	expertAct, err := ParseExpertActivations(o.ExpertActivations)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	denseAct, err := ParseDenseActivations(o.DenseActivations)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if overlap == OverlapHitCompute && prefetch != PrefetchOff {
		return nil, fmt.Errorf("engine: overlap %s runs in captured graph-segmented steps and prefetch %s op by op: choose one", overlap, prefetch)
	}
	stepMode := o.StepMode
	if prefetch == PrefetchNextLayer {
		// The prediction runs between two layers on the host (forward.go).
		// The CUDA backend's captured steps (runtime/cuda/step.go) route on
		// the device and have no such point, so prefetch runs op by op:
		// auto picks StepOps, and an explicit graph mode cannot be honoured.
		switch stepMode {
		case "", "auto":
			stepMode = StepOps
		case StepGraphFull, StepGraphSegmented, StepGraphWait, StepPersistent:
			return nil, fmt.Errorf("engine: prefetch %s needs op-by-op steps (step mode %s or auto), but step mode %s was asked for: captured device steps route on the device and cannot prefetch",
				prefetch, StepOps, stepMode)
		}
	}
	capacity := o.Capacity
	if capacity == 0 {
		capacity = cfg.NumExperts
	}
	if capacity < cfg.TopK || capacity > cfg.NumExperts {
		return nil, fmt.Errorf("capacity %d outside %d..%d: a layer must hold at least a routed group (top-%d) and at most its %d experts",
			capacity, cfg.TopK, cfg.NumExperts, cfg.TopK, cfg.NumExperts)
	}
	name := o.Executor
	if name == "" {
		name = "scalar-v1"
	}
	ex, err := executor.New(name, be, art.Layout(), cfg.TopK)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ex.Close())
		}
	}()
	w, err := LoadWeights(be, cfg, art)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.Free(be))
		}
	}()
	auth, err := cache.NewAuthority(art)
	if err != nil {
		return nil, fmt.Errorf("host authority: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, auth.Close())
		}
	}()
	spares, staging := o.Spares, o.Staging
	if spares == 0 {
		spares = cfg.TopK
	}
	if staging == 0 && o.Transport != cache.TransportRegistered {
		staging = cfg.TopK
	}
	c, err := cache.New(dev, auth, cfg.NumLayers, cfg.NumExperts, cache.Options{
		Capacity: capacity, Spares: spares, Staging: staging, GroupSize: cfg.TopK,
		Policy: o.Policy, Placement: o.Placement, Transport: o.Transport, Trace: o.Trace,
	})
	if err != nil {
		return nil, fmt.Errorf("expert cache: %w", err)
	}
	eng, err := New(Options{Backend: be, Config: cfg, Weights: w, Experts: c, Executor: ex, Layout: art.Layout(), MaxSeq: o.MaxSeq, KV: kv})
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if err := eng.usePrefetch(prefetch); err != nil {
		return nil, errors.Join(err, eng.Close(), c.Close())
	}
	if err := eng.useStepper(stepMode, art.Layout(), overlap == OverlapHitCompute); err != nil {
		return nil, errors.Join(err, eng.Close(), c.Close())
	}
	if err := eng.usePrefill(prefill); err != nil {
		return nil, errors.Join(fmt.Errorf("engine: %w", err), eng.Close(), c.Close())
	}
	if err := eng.useExpertActivations(expertAct); err != nil {
		return nil, errors.Join(fmt.Errorf("engine: %w", err), eng.Close(), c.Close())
	}
	if err := eng.useDenseActivations(denseAct); err != nil {
		return nil, errors.Join(fmt.Errorf("engine: %w", err), eng.Close(), c.Close())
	}
	c.Admit()
	return &Loaded{Engine: eng, Cache: c, Authority: auth}, nil
}

// Close releases the engine (its buffers and stepper), the cache, the
// authority, and the executor and weights Load made.
func (l *Loaded) Close() error {
	return errors.Join(l.Engine.Close(), l.Cache.Close(), l.Authority.Close(), l.Engine.exec.Close(), l.Engine.w.Free(l.Engine.be))
}
