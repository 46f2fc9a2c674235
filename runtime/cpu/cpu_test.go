package cpu

import (
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend/backendtest"
)

func TestConformance(t *testing.T) {
	for _, workers := range []int{1, 4} {
		backendtest.Run(t, New(workers), backendtest.TinyShapes, nil)
	}
}

// TestWorkersDoNotChangeResults: splitting rows across goroutines leaves each
// output's reduction order alone, so results are bit-identical.
func TestWorkersDoNotChangeResults(t *testing.T) {
	serial, parallel := New(1), New(8)
	rows, cols := 512, 2048
	w := make([]uint16, rows*cols)
	for i := range w {
		w[i] = uint16(0x2000 + i%4096)
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	run := func(b *Backend) []float32 {
		wt, _ := b.UploadF16(w)
		xt, _ := b.Alloc(cols)
		_ = b.WriteF32(xt, x)
		d, _ := b.Alloc(rows)
		if err := b.MatVec(d, wt, xt, nil); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, rows)
		_ = b.ReadF32(d, out)
		return out
	}
	a, b := run(serial), run(parallel)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("row %d: 1 worker %g, 8 workers %g", i, a[i], b[i])
		}
	}
}
