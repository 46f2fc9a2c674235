// Package executor computes the routed-expert part of an MoE layer for one
// token: out = Σ_k w_k · down_k(silu(gate_k(x)) ⊙ up_k(x)) over the A experts
// the router chose, reading each expert's record from the row the cache
// published for it.
//
// Strategies differ in how they schedule that work on a backend, never in
// numerics: every strategy combines experts in routing order and uses the
// same per-output reduction order, so they give bit-identical results.
package executor

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Executor computes the routed experts of one token.
type Executor interface {
	// Name is the declared strategy id, e.g. "scalar-v1".
	Name() string
	// Forward sets out[D] = Σ_k weights[k] · expert(rows[k])(x[D]).
	Forward(out, x backend.Tensor, rows []backend.Tensor, weights []float32) error
}

// Scalar is scalar-v1: one matvec per expert and matrix, then an
// elementwise SiLU·up, then a scaled accumulation into out.
type Scalar struct {
	be     backend.Backend
	layout qpack.RecordLayout
	zeros  []float32
	// scratch, allocated once
	gate, up, act backend.Tensor // [F]
	down          backend.Tensor // [D]
}

// NewScalar allocates scalar-v1's scratch buffers for experts of the given
// record layout.
func NewScalar(be backend.Backend, layout qpack.RecordLayout) (*Scalar, error) {
	s := &Scalar{be: be, layout: layout, zeros: make([]float32, layout.Down.Rows)}
	var err error
	alloc := func(n int) backend.Tensor {
		if err != nil {
			return nil
		}
		var t backend.Tensor
		t, err = be.Alloc(n)
		return t
	}
	f, d := layout.Gate.Rows, layout.Down.Rows
	s.gate, s.up, s.act, s.down = alloc(f), alloc(f), alloc(f), alloc(d)
	if err != nil {
		return nil, fmt.Errorf("scalar-v1 scratch: %w", err)
	}
	return s, nil
}

// Name implements Executor.
func (s *Scalar) Name() string { return "scalar-v1" }

// Forward implements Executor.
func (s *Scalar) Forward(out, x backend.Tensor, rows []backend.Tensor, weights []float32) error {
	if len(rows) != len(weights) {
		return fmt.Errorf("scalar-v1: %d rows for %d weights", len(rows), len(weights))
	}
	if err := s.be.WriteF32(out, s.zeros); err != nil {
		return fmt.Errorf("scalar-v1: clear output: %w", err)
	}
	l := s.layout
	for k, row := range rows {
		if err := s.be.ExpertMatVec(s.gate, row, l.Gate, l.Scheme, x); err != nil {
			return fmt.Errorf("scalar-v1 expert %d gate: %w", k, err)
		}
		if err := s.be.ExpertMatVec(s.up, row, l.Up, l.Scheme, x); err != nil {
			return fmt.Errorf("scalar-v1 expert %d up: %w", k, err)
		}
		if err := s.be.SiLUMul(s.act, s.gate, s.up); err != nil {
			return fmt.Errorf("scalar-v1 expert %d act: %w", k, err)
		}
		if err := s.be.ExpertMatVec(s.down, row, l.Down, l.Scheme, s.act); err != nil {
			return fmt.Errorf("scalar-v1 expert %d down: %w", k, err)
		}
		if err := s.be.AddScaled(out, s.down, weights[k]); err != nil {
			return fmt.Errorf("scalar-v1 expert %d combine: %w", k, err)
		}
	}
	return nil
}
