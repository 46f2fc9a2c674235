package engine

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Step modes: how Generate issues a step.
const (
	// StepOps issues every op of a step from the host (forward.go), with a
	// host round trip per layer for the routing.
	StepOps = "ops"
	// StepGraphFull replays the whole step as one captured device graph,
	// routing on the device and reading expert rows through a device table
	// (full residency only).
	StepGraphFull = "graph-full"
	// StepGraphSegmented replays captured segments between the per-layer
	// routing reads, which the host serves through the cache (misses and
	// all) before the next segment (partial residency).
	StepGraphSegmented = "graph-segmented"
	// StepGraphWait replays one captured graph per step at partial
	// residency: the device routes and gathers resident rows through a
	// table the host keeps; a layer with a missing expert waits on the
	// device until the host has loaded it through the cache.
	StepGraphWait = "graph-wait"
)

// StepModes lists the values LoadOptions.StepMode accepts.
func StepModes() []string {
	return []string{"auto", StepOps, StepGraphFull, StepGraphSegmented, StepGraphWait}
}

// StepSpec is what a device stepper needs: the model, its weights, the
// expert rows and the engine's buffers (x, the KV caches and the logits the
// stepper shares with the op-by-op path; it allocates its own scratch).
type StepSpec struct {
	Config   model.Config
	Weights  *Weights
	Experts  ExpertRows
	Executor string             // scalar-v1, grouped-v1 or fused-topk-v1
	Layout   qpack.RecordLayout // of the expert records
	MaxSeq   int
	// Mode is the requested step mode: "" or "auto" (graph-full at full
	// residency, else graph-segmented), or one of the graph modes.
	Mode string
	// Overlap asks a graph-segmented stepper to compute a layer's resident
	// experts' gate/up while its misses copy (overlap.go); Experts then
	// implements ResidentLeaser. Other modes refuse it.
	Overlap bool
	KCache  []backend.Tensor // [L] of [MaxSeq, Hkv*hd]
	VCache  []backend.Tensor
	X       backend.Tensor // residual stream [D]
	Logits  backend.Tensor // [V]
}

// Stepper runs whole steps on the device. Step runs token tok at position
// pos through every layer. When set is false the device already holds tok
// and pos (the previous step's head advanced them). With head it also
// computes the logits into StepSpec.Logits and returns the greedy next
// token, EOS ids excluded when suppress is set.
type Stepper interface {
	Step(tok, pos int, set, head, suppress bool) (next int, err error)
	// SetLookahead lets the stepper launch the next decode step before the
	// current one's token reaches the host (the device holds the token it
	// needs). The engine turns it off when it reads the logits of a step,
	// which a step launched ahead would overwrite.
	SetLookahead(on bool)
	// Mode is StepGraphFull, StepGraphSegmented or StepGraphWait.
	Mode() string
	Close() error
}

// StepperBackend is a backend that can build a Stepper.
type StepperBackend interface {
	// NewStepper returns (nil, nil) when this device cannot run one.
	NewStepper(StepSpec) (Stepper, error)
}

// PinnedRows is the part of the cache a full-residency stepper uses: the row
// of every expert of a layer for its device table, and the accounting of
// the groups it routed on the device (runtime/cache implements it).
type PinnedRows interface {
	FullResidency() bool
	PinnedRows(layer int) ([]backend.Tensor, error)
	RecordHits(layer int, ids []int) error
}

// PublishedRows is the part of the cache a graph-wait stepper uses to keep
// its table of resident rows: every published expert's row (nil where not
// published) and the generation's sequence number.
type PublishedRows interface {
	PublishedRows(layer int) ([]backend.Tensor, uint64, error)
}

// useStepper builds the backend's stepper when mode asks for one ("" and
// "auto": when the backend has one; StepOps: never).
//
// With overlap the stepper must be graph-segmented (the only mode that
// serves misses between captured segments) and the expert rows must lease
// resident rows (ResidentLeaser); anything else is an error.
func (e *Engine) useStepper(mode string, layout qpack.RecordLayout, overlap bool) error {
	if overlap {
		if _, ok := e.experts.(ResidentLeaser); !ok {
			return fmt.Errorf("engine: overlap %s: the expert rows (%T) cannot lease resident rows", OverlapHitCompute, e.experts)
		}
		switch mode {
		case "", "auto", StepGraphSegmented:
		default:
			return fmt.Errorf("engine: overlap %s needs step mode %s (or auto at partial residency), not %s", OverlapHitCompute, StepGraphSegmented, mode)
		}
	}
	switch mode {
	case "", "auto", StepGraphFull, StepGraphSegmented, StepGraphWait:
	case StepOps:
		if overlap {
			return fmt.Errorf("engine: overlap %s needs step mode %s, not %s", OverlapHitCompute, StepGraphSegmented, mode)
		}
		return nil
	default:
		return fmt.Errorf("engine: step mode %q: want one of %v", mode, StepModes())
	}
	sb, ok := e.be.(StepperBackend)
	if !ok {
		if overlap {
			return fmt.Errorf("engine: overlap %s: the %s backend issues op by op only (it needs %s steps)", OverlapHitCompute, e.be.Name(), StepGraphSegmented)
		}
		if mode != "" && mode != "auto" {
			return fmt.Errorf("engine: step mode %s: the %s backend issues op by op only", mode, e.be.Name())
		}
		return nil
	}
	st, err := sb.NewStepper(StepSpec{
		Config: e.cfg, Weights: e.w, Experts: e.experts, Executor: e.exec.Name(), Layout: layout, Mode: mode,
		Overlap: overlap, MaxSeq: e.maxSeq, KCache: e.kCache, VCache: e.vCache, X: e.x, Logits: e.logits,
	})
	if err != nil {
		return fmt.Errorf("engine: device stepper: %w", err)
	}
	if overlap && (st == nil || st.Mode() != StepGraphSegmented) {
		got := StepOps
		if st != nil {
			got = st.Mode()
			err = st.Close()
		}
		return errors.Join(fmt.Errorf("engine: overlap %s needs %s steps, and this device runs %s (full residency runs %s: nothing misses)",
			OverlapHitCompute, StepGraphSegmented, got, StepGraphFull), err)
	}
	e.stepper = st // nil when the backend cannot step on this device
	e.overlap = overlap
	return nil
}

// StepMode is how steps are issued: StepOps, StepGraphFull or
// StepGraphSegmented.
func (e *Engine) StepMode() string {
	if e.stepper != nil {
		return e.stepper.Mode()
	}
	return StepOps
}

// Close releases the stepper, if any.
func (e *Engine) Close() error {
	if e.stepper == nil {
		return nil
	}
	err := e.stepper.Close()
	e.stepper = nil
	return err
}
