package executor

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Grouped is grouped-v1, the PerGroup strategy: the gate/up/activation of
// every routed expert of the token in one step, then every down projection
// and the weighted combine in a second step, both addressing experts through
// the group's row table. How it differs: a group is two backend steps
// whatever its size. On the CPU each is one parallel pass over the A experts
// (ExpertGateUp, ExpertDownCombine) where scalar-v1 parallelises each matrix
// alone; on CUDA each is one launch reading the A rows through the table,
// op by op and in captured steps alike, where scalar-v1 launches per expert.
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

// Close implements Executor.
func (g *Grouped) Close() error {
	if g.act == nil {
		return nil
	}
	err := g.be.Free(g.act)
	g.act = nil
	if err != nil {
		return fmt.Errorf("grouped-v1 scratch: %w", err)
	}
	return nil
}

// Strategy implements Executor.
func (g *Grouped) Strategy() Strategy { return PerGroup }

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
