// Package engine runs a model: prefill, the decode loop, greedy selection
// with EOS suppression, and the timing points PERF-REAL-v1 defines.
//
// The forward pass follows transformers' OlmoeForCausalLM and
// Qwen2MoeForCausalLM op for op (see forward.go); it is written once against
// runtime/backend, and the routed experts go through an ExpertRows source
// (the residency cache) and an executor strategy.
package engine

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/plan"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// DefaultMaxSeq bounds prompt + generated tokens when Options.MaxSeq is 0.
const DefaultMaxSeq = 2048

// Options configure an Engine.
type Options struct {
	Backend  backend.Backend
	Config   model.Config
	Weights  *Weights
	Experts  ExpertRows
	Executor executor.Executor
	// Layout is the expert records' layout (batched prefill reads the
	// matrices of a routed row itself).
	Layout qpack.RecordLayout
	// MaxSeq is the KV-cache length in positions (0: DefaultMaxSeq, capped
	// at the model's max_position_embeddings).
	MaxSeq int
	// KV is the KV cache's element type: backend.F32 (the zero value) or
	// backend.F16 (K and V rounded to binary16 when stored, read back as
	// FP32: half the bytes a decode step reads at depth).
	KV backend.DType
}

// KVDTypes names the KV cache's element types as campaigns, flags and raw
// records spell them.
var KVDTypes = map[string]backend.DType{"fp32": backend.F32, "fp16": backend.F16}

// ParseKVDType reads a KV dtype name ("" is fp32).
func ParseKVDType(s string) (backend.DType, error) {
	if s == "" {
		return backend.F32, nil
	}
	if d, ok := KVDTypes[s]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("KV cache dtype %q: want fp32 or fp16", s)
}

// Engine holds the model on a backend and the buffers one request uses.
type Engine struct {
	be      backend.Backend
	cfg     model.Config
	w       *Weights
	experts ExpertRows
	exec    executor.Executor
	layout  qpack.RecordLayout
	maxSeq  int
	eps     float32
	stepper Stepper // nil: op-by-op steps
	// pf is next-layer prefetch (prefetch.go); nil: off.
	pf *nextLayerPrefetch
	// batched runs the prompt as batches (prefill.go); nil: token at a
	// time. bt is its scratch.
	batched backend.Batched
	bt      *batch
	chunk   int // positions a batch (0: PrefillChunk; tests set less)
	// prof, when set (ProfilePrefill), accumulates each batched prefill
	// instruction's wall time, the backend waited on before and after it.
	prof *PrefillProfile
	// overlap: the stepper computes a group's hits while its misses copy
	// (overlap.go).
	overlap bool
	// The step plans (forward.go): body for prompt positions before the
	// last, full (head and select) for the last one and every decode step.
	body, full *plan.Plan
	// groupIDs, groupWeights hold the routed group of the layer being run
	// (the plan's group buffer, on the host in the op-by-op interpreter).
	groupIDs     []int
	groupWeights []float32
	// headDone, when set, runs as soon as the head instruction has left
	// the logits (Generate sets it for the prompt's last position on a
	// synchronous backend: the end of prefill).
	headDone func()
	// owned lists the buffers New allocated (the KV cache, the per-token
	// activations, the logits), which Close frees.
	owned []backend.Tensor

	// KV caches, [T, Hkv*hd] per layer, of element type kv.
	kCache, vCache []backend.Tensor
	kv             backend.DType
	// expertAct is the dtype the routed experts' batched matmuls take
	// their activations in (activations.go; LoadOptions.ExpertActivations).
	expertAct backend.DType
	// denseAct is the dtype a batched prefill's dense FP16 projections take
	// their activations in (activations.go; LoadOptions.DenseActivations).
	denseAct backend.DType
	dense16  backend.DenseActivations // the batched backend's FP16 projections when denseAct is F16
	// Scratch named by role.
	x, xn          backend.Tensor // residual stream and its norm [D]
	q, att, ao     backend.Tensor // [Hq*hd], [Hq*hd], [D]
	k, v           backend.Tensor // [Hkv*hd]
	routerLogits   backend.Tensor // [E]
	moe            backend.Tensor // [D]
	sg, su, sa, sd backend.Tensor // shared expert [S],[S],[S],[D]
	mix            backend.Tensor // [1]
	logits         backend.Tensor // [V]
}

// New allocates an engine's buffers.
func New(o Options) (*Engine, error) {
	cfg := o.Config
	if o.Backend == nil || o.Weights == nil || o.Experts == nil || o.Executor == nil {
		return nil, fmt.Errorf("engine: backend, weights, experts and executor are all required")
	}
	maxSeq := o.MaxSeq
	if maxSeq <= 0 {
		maxSeq = DefaultMaxSeq
	}
	if cfg.MaxPositions > 0 && maxSeq > cfg.MaxPositions {
		maxSeq = cfg.MaxPositions
	}
	if o.KV != backend.F32 && o.KV != backend.F16 {
		return nil, fmt.Errorf("engine: KV cache dtype %v: want F32 or F16", o.KV)
	}
	e := &Engine{be: o.Backend, cfg: cfg, w: o.Weights, experts: o.Experts, exec: o.Executor, layout: o.Layout,
		maxSeq: maxSeq, eps: float32(cfg.RMSNormEps), kv: o.KV}
	var err error
	alloc := func(n int) backend.Tensor {
		if err != nil || n == 0 {
			return nil
		}
		var t backend.Tensor
		if t, err = e.be.Alloc(n); err == nil {
			e.owned = append(e.owned, t)
		}
		return t
	}
	allocKV := alloc
	if o.KV == backend.F16 {
		allocKV = func(n int) backend.Tensor {
			if err != nil || n == 0 {
				return nil
			}
			var t backend.Tensor
			if t, err = e.be.AllocF16(n); err == nil {
				e.owned = append(e.owned, t)
			}
			return t
		}
	}
	D, KV := cfg.HiddenSize, cfg.KVDim()
	for l := 0; l < cfg.NumLayers; l++ {
		e.kCache = append(e.kCache, allocKV(maxSeq*KV))
		e.vCache = append(e.vCache, allocKV(maxSeq*KV))
	}
	e.x, e.xn = alloc(D), alloc(D)
	e.q, e.att, e.ao = alloc(D), alloc(D), alloc(D)
	e.k, e.v = alloc(KV), alloc(KV)
	e.routerLogits, e.moe = alloc(cfg.NumExperts), alloc(D)
	if cfg.HasSharedExpert() {
		e.sg, e.su, e.sa, e.sd = alloc(cfg.SharedFFN), alloc(cfg.SharedFFN), alloc(cfg.SharedFFN), alloc(D)
		e.mix = alloc(1)
	}
	e.logits = alloc(cfg.VocabSize)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("engine: allocate buffers for %d positions: %w", maxSeq, err), e.freeOwned())
	}
	if err := e.buildPlans(); err != nil {
		return nil, errors.Join(fmt.Errorf("engine: %w", err), e.freeOwned())
	}
	return e, nil
}

// Config returns the model configuration.
func (e *Engine) Config() model.Config { return e.cfg }

// KVDType is the KV cache's element type (backend.F32 or backend.F16).
func (e *Engine) KVDType() backend.DType { return e.kv }

// KVName is KVDType as raw records spell it: "FP32" or "FP16".
func (e *Engine) KVName() string {
	if e.kv == backend.F16 {
		return "FP16"
	}
	return "FP32"
}

// MaxSeq is the number of positions one request may use.
func (e *Engine) MaxSeq() int { return e.maxSeq }

// ExecutorName is the routed-expert strategy in use.
func (e *Engine) ExecutorName() string { return e.exec.Name() }

// freeOwned frees the buffers New allocated, once.
func (e *Engine) freeOwned() error {
	var errs []error
	for _, t := range e.owned {
		if err := e.be.Free(t); err != nil {
			errs = append(errs, err)
		}
	}
	e.owned = nil
	if len(errs) > 0 {
		return fmt.Errorf("engine: free buffers: %w", errors.Join(errs...))
	}
	return nil
}
