package executor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestExecutorsBitIdentical: the strategies differ in scheduling only, so on
// the same inputs they produce bit-identical outputs, and those outputs equal
// a float64 reference within FP32 rounding.
func TestExecutorsBitIdentical(t *testing.T) {
	cases := []struct {
		name        string
		scheme      qpack.Scheme
		hidden, ffn int
		topK        int
	}{
		{"olmoe-tiny int4", qpack.SchemeInt4, 256, 256, 4},
		{"qwen-tiny int4 (padded)", qpack.SchemeInt4, 256, 352, 4},
		{"qwen-tiny fp16", qpack.SchemeFP16, 256, 352, 4},
		{"top-8", qpack.SchemeInt4, 256, 256, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := cpu.New(2)
			layout, err := qpack.NewRecordLayout(c.scheme, c.hidden, c.ffn)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, uint64(c.ffn)))
			rows, recs := make([]backend.Tensor, c.topK), make([][]byte, c.topK)
			for k := range rows {
				recs[k] = makeRecord(t, rng, layout)
				rows[k], _ = be.AllocBytes(len(recs[k]))
				_ = be.WriteBytes(rows[k], 0, recs[k])
			}
			xs := make([]float32, c.hidden)
			for i := range xs {
				xs[i] = float32(rng.NormFloat64())
			}
			weights := make([]float32, c.topK)
			for i := range weights {
				weights[i] = rng.Float32()
			}
			x, _ := be.Alloc(c.hidden)
			_ = be.WriteF32(x, xs)

			var first []float32
			for _, name := range Names() {
				ex, err := New(name, be, layout, c.topK)
				if err != nil {
					t.Fatal(err)
				}
				out, _ := be.Alloc(c.hidden)
				if err := ex.Forward(out, x, rows, weights); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := make([]float32, c.hidden)
				_ = be.ReadF32(out, got)
				if first == nil {
					first = got
					checkReference(t, layout, recs, xs, weights, got)
					continue
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%s output %d = %g, scalar-v1 gave %g: not bit-identical", name, i, got[i], first[i])
					}
				}
			}
		})
	}
}

func makeRecord(t *testing.T, rng *rand.Rand, l qpack.RecordLayout) []byte {
	rec := make([]byte, l.Size)
	for _, m := range []qpack.MatrixLayout{l.Gate, l.Up, l.Down} {
		w := make([]float32, m.Rows*m.Cols)
		for i := range w {
			w[i] = float32(rng.NormFloat64() * 0.05)
		}
		var err error
		if l.Scheme == qpack.SchemeInt4 {
			_, err = qpack.QuantizeMatrix(rec[m.Offset:m.Offset+m.Bytes], w, m.Rows, m.Cols)
		} else {
			_, err = qpack.EncodeFP16Matrix(rec[m.Offset:m.Offset+m.Bytes], w)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return rec
}

// checkReference recomputes the routed output in float64 from dequantised
// weights.
func checkReference(t *testing.T, l qpack.RecordLayout, recs [][]byte, xs, weights, got []float32) {
	deq := func(rec []byte, m qpack.MatrixLayout) []float32 {
		out := make([]float32, m.Rows*m.Cols)
		if l.Scheme == qpack.SchemeInt4 {
			qpack.DequantizeMatrix(out, rec[m.Offset:m.Offset+m.Bytes], m.Rows, m.Cols)
			return out
		}
		for r := 0; r < m.Rows; r++ {
			for c := 0; c < m.Cols; c++ {
				i := (r*m.Cols + c) * 2
				out[r*m.Cols+c] = f16(uint16(rec[m.Offset+i]) | uint16(rec[m.Offset+i+1])<<8)
			}
		}
		return out
	}
	want := make([]float64, len(got))
	for k, rec := range recs {
		g, u, d := deq(rec, l.Gate), deq(rec, l.Up), deq(rec, l.Down)
		F, D := l.Gate.Rows, l.Down.Rows
		act := make([]float64, F)
		for f := 0; f < F; f++ {
			var gs, us float64
			for c, x := range xs {
				gs += float64(g[f*len(xs)+c]) * float64(x)
				us += float64(u[f*len(xs)+c]) * float64(x)
			}
			act[f] = gs / (1 + math.Exp(-gs)) * us
		}
		for o := 0; o < D; o++ {
			var s float64
			for f := 0; f < F; f++ {
				s += float64(d[o*F+f]) * act[f]
			}
			want[o] += float64(weights[k]) * s
		}
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > 1e-4+1e-4*math.Abs(want[i]) {
			t.Fatalf("output %d = %g, float64 reference %g", i, got[i], want[i])
		}
	}
}
