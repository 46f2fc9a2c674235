package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// checkGrouped runs a routed group through the scalar op sequence
// (ExpertMatVec, SiLUMul, AddScaled), through ExpertGateUp +
// ExpertDownCombine and through FusedExperts, and requires bit-identical
// outputs: executors may differ in scheduling only.
func checkGrouped(t *testing.T, be backend.Backend, rng *rand.Rand, scheme qpack.Scheme, hidden, ffn, k int) {
	l, err := qpack.NewRecordLayout(scheme, hidden, ffn)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]backend.Tensor, k)
	for i := range rows {
		rec := make([]byte, l.Size)
		for _, m := range []qpack.MatrixLayout{l.Gate, l.Up, l.Down} {
			w := randF32(rng, m.Rows*m.Cols, 0.05)
			if scheme == qpack.SchemeInt4 {
				_, err = qpack.QuantizeMatrix(rec[m.Offset:m.Offset+m.Bytes], w, m.Rows, m.Cols)
			} else {
				_, err = qpack.EncodeFP16Matrix(rec[m.Offset:m.Offset+m.Bytes], w)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if rows[i], err = be.AllocBytes(len(rec)); err != nil {
			t.Fatal(err)
		}
		if err := be.WriteBytes(rows[i], 0, rec); err != nil {
			t.Fatal(err)
		}
	}
	x := upload(t, be, randF32(rng, hidden, 1))
	weights := make([]float32, k)
	for i := range weights {
		weights[i] = rng.Float32()
	}
	// Scalar sequence.
	out := upload(t, be, make([]float32, hidden))
	gate, _ := be.Alloc(ffn)
	up, _ := be.Alloc(ffn)
	act, _ := be.Alloc(ffn)
	down, _ := be.Alloc(hidden)
	for i, r := range rows {
		steps := []error{
			be.ExpertMatVec(gate, r, l.Gate, scheme, x),
			be.ExpertMatVec(up, r, l.Up, scheme, x),
			be.SiLUMul(act, gate, up),
			be.ExpertMatVec(down, r, l.Down, scheme, act),
			be.AddScaled(out, down, weights[i]),
		}
		for _, err := range steps {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	want := read(t, be, out)

	grouped, _ := be.Alloc(hidden)
	acts, _ := be.Alloc(k * ffn)
	if err := be.ExpertGateUp(acts, rows, l, x); err != nil {
		t.Fatal(err)
	}
	if err := be.ExpertDownCombine(grouped, rows, l, acts, weights); err != nil {
		t.Fatal(err)
	}
	fused, _ := be.Alloc(hidden)
	if err := be.FusedExperts(fused, rows, l, x, weights); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]float32{"grouped": read(t, be, grouped), "fused": read(t, be, fused)} {
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s output %d = %g, scalar sequence %g: not bit-identical", name, i, got[i], want[i])
			}
		}
	}
}

func runGrouped(t *testing.T, be backend.Backend, rng *rand.Rand) {
	for _, c := range []struct {
		scheme      qpack.Scheme
		hidden, ffn int
		k           int
	}{{qpack.SchemeInt4, 256, 256, 4}, {qpack.SchemeInt4, 256, 352, 4}, {qpack.SchemeFP16, 256, 352, 4}, {qpack.SchemeInt4, 256, 256, 8}} {
		t.Run(fmt.Sprintf("%s/%dx%d/k=%d", c.scheme, c.hidden, c.ffn, c.k), func(t *testing.T) {
			checkGrouped(t, be, rng, c.scheme, c.hidden, c.ffn, c.k)
		})
	}
}
