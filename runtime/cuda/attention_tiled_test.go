//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
)

// TestAttentionTiled: by default AttentionRows runs the tiled kernel
// (attnTiled); every row is within the conformance suite's attention
// tolerance of the per-token Attention over the same caches (FP32 and FP16,
// heads of 64 and 128 dims, grouped-query heads, batches that start at
// position 0 and deeper, shorter and longer than a 16-query tile), and a
// row's bits do not depend on the batch: rows [a, a+5) run alone from
// pos0 + a give the bits they had in the whole batch, and the 32-query
// kernel (tuning.attTiled32) gives the whole batch's bits. Over FP16 caches
// the tensor-core kernel (attnTC, the default there; tuning.noAttTC runs the
// tiled kernel) is held to the same tolerance and the same independence of
// the batch.
func TestAttentionTiled(t *testing.T) {
	withTuning(t, testBE, tuning{noAttTC: true})
	be := testBE
	rng := rand.New(rand.NewPCG(17, 3))
	randF := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	upload := func(x []float32) backend.Tensor { return mustF32(t, be, x) }
	read := func(tn backend.Tensor) []float32 { return mustRead(t, be, tn) }
	rowsOf := func(tn backend.Tensor, width, lo, n int) backend.Tensor {
		v, err := be.Rows(tn, width, lo, n)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, hs := range []struct{ h, kv, hd int }{{4, 4, 64}, {4, 2, 128}, {16, 16, 128}} {
		for _, dt := range []backend.DType{backend.F32, backend.F16} {
			for _, c := range []struct{ T, pos0 int }{{1, 0}, {5, 0}, {16, 0}, {17, 3}, {40, 37}, {100, 0}, {70, 300}, {300, 40}} {
				t.Run(fmt.Sprintf("h%d-kv%d-hd%d/%v/T%d-pos%d", hs.h, hs.kv, hs.hd, dt, c.T, c.pos0), func(t *testing.T) {
					n, Q := hs.kv*hs.hd, hs.h*hs.hd
					cache := func() backend.Tensor {
						x := randF((c.pos0 + c.T) * n)
						if dt == backend.F32 {
							return upload(x)
						}
						bits := make([]uint16, len(x))
						for i, v := range x {
							bits[i] = half.F32ToF16(v)
						}
						tn, err := be.UploadF16(bits)
						if err != nil {
							t.Fatal(err)
						}
						return tn
					}
					kc, vc := cache(), cache()
					q := upload(randF(c.T * Q))
					got, err := be.Alloc(c.T * Q)
					if err != nil {
						t.Fatal(err)
					}
					if err := be.AttentionRows(got, q, kc, vc, c.T, c.pos0, hs.h, hs.kv, hs.hd); err != nil {
						t.Fatal(err)
					}
					want, err := be.Alloc(c.T * Q)
					if err != nil {
						t.Fatal(err)
					}
					for tok := range c.T {
						if err := be.Attention(rowsOf(want, Q, tok, 1), rowsOf(q, Q, tok, 1), kc, vc, c.pos0+tok+1, hs.h, hs.kv, hs.hd); err != nil {
							t.Fatal(err)
						}
					}
					g, w := read(got), read(want)
					for i := range g {
						if d := math.Abs(float64(g[i]) - float64(w[i])); !(d <= 1e-5+1e-4*math.Abs(float64(w[i]))) {
							t.Fatalf("row %d, value %d: tiled %g, per token %g", i/Q, i%Q, g[i], w[i])
						}
					}
					a := c.T / 3
					m := min(5, c.T-a)
					sub, err := be.Alloc(m * Q)
					if err != nil {
						t.Fatal(err)
					}
					if err := be.AttentionRows(sub, rowsOf(q, Q, a, m), kc, vc, m, c.pos0+a, hs.h, hs.kv, hs.hd); err != nil {
						t.Fatal(err)
					}
					s := read(sub)
					for i := range s {
						if math.Float32bits(s[i]) != math.Float32bits(g[a*Q+i]) {
							t.Fatalf("row %d, value %d: %g alone, %g in the batch", a+i/Q, i%Q, s[i], g[a*Q+i])
						}
					}
					if be.attnTC(hs.hd, dt) {
						t.Fatalf("attnTC(%d, %v) under tuning.noAttTC", hs.hd, dt)
					}
					withTuning(t, be, tuning{attTiled32: true, noAttTC: true})
					if err := be.AttentionRows(got, q, kc, vc, c.T, c.pos0, hs.h, hs.kv, hs.hd); err != nil {
						t.Fatal(err)
					}
					withTuning(t, be, tuning{noAttTC: true})
					for i, v := range read(got) {
						if math.Float32bits(v) != math.Float32bits(g[i]) {
							t.Fatalf("row %d, value %d: %g with 32 queries a block, %g with 16", i/Q, i%Q, v, g[i])
						}
					}
					if dt != backend.F16 {
						return
					}
					// The tensor-core kernel (the default over FP16 caches):
					// within the same tolerance of the per-token kernel, and a
					// row's bits do not depend on the batch either.
					withTuning(t, be, tuning{})
					if !be.attnTC(hs.hd, dt) {
						t.Fatalf("attnTC(%d, %v) is false by default", hs.hd, dt)
					}
					if err := be.AttentionRows(got, q, kc, vc, c.T, c.pos0, hs.h, hs.kv, hs.hd); err != nil {
						t.Fatal(err)
					}
					gt := read(got)
					for i := range gt {
						if d := math.Abs(float64(gt[i]) - float64(w[i])); !(d <= 1e-5+1e-4*math.Abs(float64(w[i]))) {
							t.Fatalf("row %d, value %d: tensor cores %g, per token %g", i/Q, i%Q, gt[i], w[i])
						}
					}
					if err := be.AttentionRows(sub, rowsOf(q, Q, a, m), kc, vc, m, c.pos0+a, hs.h, hs.kv, hs.hd); err != nil {
						t.Fatal(err)
					}
					for i, v := range read(sub) {
						if math.Float32bits(v) != math.Float32bits(gt[a*Q+i]) {
							t.Fatalf("tensor cores: row %d, value %d: %g alone, %g in the batch", a+i/Q, i%Q, v, gt[a*Q+i])
						}
					}
					withTuning(t, be, tuning{})
				})
			}
		}
	}
}
