package executor

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Grouped is grouped-v1: the gate/up/activation of every routed expert of
// the token in one step, then every down projection and the weighted combine
// in a second step, both addressing experts through the group's row table.
type Grouped struct {
	be     backend.Backend
	layout qpack.RecordLayout
	act    backend.Tensor // [A*F]
	groupN int
}

// NewGrouped allocates grouped-v1's scratch for groups of up to maxGroup
// experts.
func NewGrouped(be backend.Backend, layout qpack.RecordLayout, maxGroup int) (*Grouped, error) {
	act, err := be.Alloc(maxGroup * layout.Gate.Rows)
	if err != nil {
		return nil, fmt.Errorf("grouped-v1 scratch: %w", err)
	}
	return &Grouped{be: be, layout: layout, act: act, groupN: maxGroup}, nil
}

// Name implements Executor.
func (g *Grouped) Name() string { return "grouped-v1" }

// Forward implements Executor.
func (g *Grouped) Forward(out, x backend.Tensor, rows []backend.Tensor, weights []float32) error {
	if len(rows) != g.groupN || len(weights) != len(rows) {
		return fmt.Errorf("grouped-v1: %d rows and %d weights for groups of %d", len(rows), len(weights), g.groupN)
	}
	if err := g.be.ExpertGateUp(g.act, rows, g.layout, x); err != nil {
		return fmt.Errorf("grouped-v1 gate/up: %w", err)
	}
	if err := g.be.ExpertDownCombine(out, rows, g.layout, g.act, weights); err != nil {
		return fmt.Errorf("grouped-v1 down: %w", err)
	}
	return nil
}

// FusedTopK is fused-topk-v1: gate, up, activation and down of the whole
// routed group fused into one backend step.
type FusedTopK struct {
	be     backend.Backend
	layout qpack.RecordLayout
}

// NewFusedTopK returns fused-topk-v1.
func NewFusedTopK(be backend.Backend, layout qpack.RecordLayout) *FusedTopK {
	return &FusedTopK{be: be, layout: layout}
}

// Name implements Executor.
func (f *FusedTopK) Name() string { return "fused-topk-v1" }

// Forward implements Executor.
func (f *FusedTopK) Forward(out, x backend.Tensor, rows []backend.Tensor, weights []float32) error {
	if len(weights) != len(rows) {
		return fmt.Errorf("fused-topk-v1: %d rows for %d weights", len(rows), len(weights))
	}
	if err := f.be.FusedExperts(out, rows, f.layout, x, weights); err != nil {
		return fmt.Errorf("fused-topk-v1: %w", err)
	}
	return nil
}

// Names lists the executor strategies New accepts.
func Names() []string { return []string{"scalar-v1", "grouped-v1", "fused-topk-v1"} }

// New returns the named strategy for records of layout and routed groups of
// topK experts.
func New(name string, be backend.Backend, layout qpack.RecordLayout, topK int) (Executor, error) {
	switch name {
	case "scalar-v1":
		return NewScalar(be, layout)
	case "grouped-v1":
		return NewGrouped(be, layout, topK)
	case "fused-topk-v1":
		return NewFusedTopK(be, layout), nil
	}
	return nil, fmt.Errorf("unknown executor %q (known: %v)", name, Names())
}
