package cpu

import (
	"fmt"
	"math"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The grouped ops below schedule differently from ExpertMatVec (all experts
// of a group in one parallel pass) but compute every output with the same
// per-row routines, the same SiLU and the same k-ordered combine as the
// scalar sequence ExpertMatVec/SiLUMul/AddScaled, so results are bit-identical.

// groupRows checks a routed group's rows and returns their bytes.
func groupRows(op string, rows []backend.Tensor, l qpack.RecordLayout) ([][]byte, error) {
	out := make([][]byte, len(rows))
	for k, r := range rows {
		b, err := bytesOf(fmt.Sprintf("%s row %d", op, k), r)
		if err != nil {
			return nil, err
		}
		if len(b) < l.Size {
			return nil, shapeErr(op, "row %d has %d bytes, the record needs %d", k, len(b), l.Size)
		}
		out[k] = b
	}
	return out, nil
}

// matRows computes rows [lo,hi) of matrix m of record rec into d.
func matRows(d []float32, rec []byte, m qpack.MatrixLayout, scheme qpack.Scheme, xs []float32) {
	mat := rec[m.Offset : m.Offset+m.Bytes]
	switch scheme {
	case qpack.SchemeInt4:
		int4MatVec(d, mat, m, xs, 1)
	case qpack.SchemeFP16:
		fp16MatVec(d, mat, m, xs, 1)
	}
}

func silu(g float32) float32 { return g / (1 + float32(math.Exp(float64(-g)))) }

// ExpertGateUp implements backend.Backend.
func (b *Backend) ExpertGateUp(act backend.Tensor, rows []backend.Tensor, l qpack.RecordLayout, x backend.Tensor) error {
	a, err := f32s("ExpertGateUp act", act)
	if err != nil {
		return err
	}
	xs, err := f32s("ExpertGateUp x", x)
	if err != nil {
		return err
	}
	recs, err := groupRows("ExpertGateUp", rows, l)
	if err != nil {
		return err
	}
	F := l.Gate.Rows
	if len(a) != len(rows)*F || len(xs) != l.Gate.Cols {
		return shapeErr("ExpertGateUp", "act %d for %d experts of F=%d, x %d want %d", len(a), len(rows), F, len(xs), l.Gate.Cols)
	}
	if l.Scheme != qpack.SchemeInt4 && l.Scheme != qpack.SchemeFP16 {
		return fmt.Errorf("cpu: ExpertGateUp: unknown scheme %q", l.Scheme)
	}
	parallelRows(len(rows), len(rows)*2*F*len(xs), b.workers, func(lo, hi int) {
		up := make([]float32, F)
		for k := lo; k < hi; k++ {
			g := a[k*F : (k+1)*F]
			matRows(g, recs[k], l.Gate, l.Scheme, xs)
			matRows(up, recs[k], l.Up, l.Scheme, xs)
			for i := range g {
				g[i] = silu(g[i]) * up[i]
			}
		}
	})
	return nil
}

// ExpertDownCombine implements backend.Backend.
func (b *Backend) ExpertDownCombine(out backend.Tensor, rows []backend.Tensor, l qpack.RecordLayout, act backend.Tensor, weights []float32) error {
	o, err := f32s("ExpertDownCombine out", out)
	if err != nil {
		return err
	}
	a, err := f32s("ExpertDownCombine act", act)
	if err != nil {
		return err
	}
	recs, err := groupRows("ExpertDownCombine", rows, l)
	if err != nil {
		return err
	}
	F, D := l.Down.Cols, l.Down.Rows
	if len(weights) != len(rows) || len(a) != len(rows)*F || len(o) != D {
		return shapeErr("ExpertDownCombine", "%d rows, %d weights, act %d, out %d (F=%d, D=%d)", len(rows), len(weights), len(a), len(o), F, D)
	}
	downs := make([][]float32, len(rows))
	parallelRows(len(rows), len(rows)*F*D, b.workers, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			downs[k] = make([]float32, D)
			matRows(downs[k], recs[k], l.Down, l.Scheme, a[k*F:(k+1)*F])
		}
	})
	clear(o)
	for k, d := range downs {
		w := weights[k]
		for i, v := range d {
			o[i] += w * v
		}
	}
	return nil
}

// FusedExperts implements backend.Backend.
func (b *Backend) FusedExperts(out backend.Tensor, rows []backend.Tensor, l qpack.RecordLayout, x backend.Tensor, weights []float32) error {
	act, err := b.Alloc(len(rows) * l.Gate.Rows)
	if err != nil {
		return err
	}
	if err := b.ExpertGateUp(act, rows, l, x); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	return b.ExpertDownCombine(out, rows, l, act, weights)
}
