// Package executor computes the routed-expert part of an MoE layer for one
// token: out = Σ_k w_k · down_k(silu(gate_k(x)) ⊙ up_k(x)) over the A experts
// the router chose, reading each expert's record from the row the cache
// published for it.
//
// Executors differ in how they schedule that work on a backend (their
// Strategy), never in numerics: every executor combines experts in routing
// order and uses the same per-output reduction order, so they give
// bit-identical results. Each name is a distinct launch structure on every
// backend; a name that ran another's steps is retired (Retired), and
// editions keep it as history.
package executor

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Executor computes the routed experts of one token.
type Executor interface {
	// Name is the declared executor id, e.g. "scalar-v1".
	Name() string
	// Strategy is the launch structure Forward issues. A device that runs
	// the step without calling Forward (the CUDA stepper's captured graphs)
	// issues this structure, so the executor decides on every path.
	Strategy() Strategy
	// Forward sets out[D] = Σ_k weights[k] · expert(rows[k])(x[D]).
	Forward(out, x backend.Tensor, rows []backend.Tensor, weights []float32) error
	// Close frees the executor's scratch on its backend; the executor is
	// unusable after it.
	Close() error
}

// Scalar is scalar-v1, the PerExpert strategy: one matvec per expert and
// matrix, then an elementwise SiLU·up, then a scaled accumulation into out,
// one expert after another. How it differs: on the CPU every expert is five
// backend ops (three row-parallel matvecs, SiLUMul, AddScaled), so a group
// of A experts is 5·A sequential passes where grouped-v1 makes two; on CUDA
// op by op it is those five launches per expert, and in captured steps one
// gate/up+SiLU launch and one down launch (accumulating into the output)
// per expert, 2·A launches per layer where grouped-v1 launches two.
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

// Close implements Executor.
func (s *Scalar) Close() error {
	var errs []error
	for _, t := range []*backend.Tensor{&s.gate, &s.up, &s.act, &s.down} {
		if *t != nil {
			errs = append(errs, s.be.Free(*t))
			*t = nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("scalar-v1 scratch: %w", err)
	}
	return nil
}

// Strategy implements Executor.
func (s *Scalar) Strategy() Strategy { return PerExpert }

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

// Names lists the executors New accepts, one per Strategy.
func Names() []string { return []string{"scalar-v1", "grouped-v1"} }

// New returns the named executor for records of layout and routed groups of
// topK experts. A retired name is refused with the name of the executor
// whose steps it ran.
func New(name string, be backend.Backend, layout qpack.RecordLayout, topK int) (Executor, error) {
	switch name {
	case "scalar-v1":
		return NewScalar(be, layout)
	case "grouped-v1":
		return NewGrouped(be, layout, topK)
	}
	if ran, ok := Retired(name); ok {
		return nil, fmt.Errorf("executor %q is retired: it ran %s's steps on every backend; use %s (known: %v)", name, ran, ran, Names())
	}
	return nil, fmt.Errorf("unknown executor %q (known: %v)", name, Names())
}

// retired maps executor names that committed editions still carry to the
// executor whose steps they ran.
//
// fused-topk-v1 called backend.FusedExperts, which on the CPU is
// ExpertGateUp then ExpertDownCombine and on CUDA launches the same two
// grouped kernels with the same row table, in captured steps too: grouped-v1
// under another name, not a strategy of its own, so it was removed (issue
// 13). Editions that name it ran grouped-v1's launches and bits.
var retired = map[string]string{"fused-topk-v1": "grouped-v1"}

// Retired reports whether name is a retired executor, and which executor in
// Names ran in its place: what reproducing an edition that names it runs.
func Retired(name string) (ran string, ok bool) {
	ran, ok = retired[name]
	return ran, ok
}
