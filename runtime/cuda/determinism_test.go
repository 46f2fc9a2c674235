//go:build cuda

package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestDeterminism runs the same inputs through every kind of kernel twice,
// on fresh buffers and with other work in between, and requires
// bit-identical outputs: no atomics, no scheduling-dependent order.
func TestDeterminism(t *testing.T) {
	be := testBE
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, cols = 50304, 2048
	w := randF16(rng, rows*cols, 0.05)
	bias := randF16(rng, rows, 0.1)
	xs := randF32(rng, cols, 1)
	lq, _ := qpack.NewRecordLayout(qpack.SchemeInt4, 2048, 1408)
	recs := [][]byte{makeRecord(t, rng, lq), makeRecord(t, rng, lq), makeRecord(t, rng, lq), makeRecord(t, rng, lq)}
	weights := []float32{0.4, 0.3, 0.2, 0.1}
	kv := randF32(rng, 2*300*512, 1)
	q := randF32(rng, 16*128, 1)
	normW := randF16(rng, 2048, 1)
	router := randF32(rng, 64, 2)

	run := func() [][]float32 {
		var outs [][]float32
		wt, _ := be.UploadF16(w)
		bt, _ := be.UploadF16(bias)
		x := mustF32(t, be, xs)
		y, _ := be.Alloc(rows)
		if err := be.MatVec(y, wt, x, bt); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, mustRead(t, be, y))

		var rowsT []backend.Tensor
		for _, r := range recs {
			rowsT = append(rowsT, mustBytes(t, be, r))
		}
		down, _ := be.Alloc(2048)
		act := mustF32(t, be, xs[:1408])
		if err := be.ExpertMatVec(down, rowsT[0], lq.Down, lq.Scheme, act); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, mustRead(t, be, down))
		for _, name := range executor.Names() {
			ex, err := executor.New(name, be, lq, 4)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := be.Alloc(2048)
			if err := ex.Forward(out, x, rowsT, weights); err != nil {
				t.Fatal(err)
			}
			outs = append(outs, mustRead(t, be, out))
		}

		kc := mustF32(t, be, kv[:300*512])
		vc := mustF32(t, be, kv[300*512:])
		qt := mustF32(t, be, q)
		att, _ := be.Alloc(len(q))
		if err := be.Attention(att, qt, kc, vc, 300, 16, 4, 128); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, mustRead(t, be, att))
		nw, _ := be.UploadF16(normW)
		xn, _ := be.Alloc(2048)
		if err := be.RMSNorm(xn, x, nw, 1e-5); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, mustRead(t, be, xn))
		if err := be.RoPE(qt, 16, 128, 1234, 1e4); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, mustRead(t, be, qt))
		ids, ws, err := be.TopK(mustF32(t, be, router), 8, true)
		if err != nil {
			t.Fatal(err)
		}
		idf := make([]float32, len(ids))
		for i, id := range ids {
			idf[i] = float32(id)
		}
		outs = append(outs, idf, ws)
		for _, tn := range append(rowsT, wt, bt, x, y, down, act, kc, vc, qt, att, nw, xn) {
			if err := be.Free(tn); err != nil {
				t.Fatal(err)
			}
		}
		return outs
	}
	a := run()
	b := run()
	for i := range a {
		sameBits(t, "rerun", b[i], a[i])
	}
}
