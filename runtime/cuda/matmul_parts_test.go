//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
)

// TestMatMulParts: MatMulParts over a matrix of row blocks gives each block
// the bits of its own MatMul (on a view of the block and its bias), with
// the fused launch (the default) and without (tuning.noPartsFused); the fused launch runs
// where partsSplit allows (blocks of whole 128-row tiles with one split
// count: OLMoE's and Qwen's q|k|v at 16 to 512 tokens) and not elsewhere
// (their 600-token batch is not split, blocks of 200 rows are not whole
// tiles, GQA-sized k and v split differently from q from 100 tokens on).
func TestMatMulParts(t *testing.T) {
	be := testBE
	rng := rand.New(rand.NewPCG(25, 6))
	const cols = 2048
	for _, c := range []struct {
		name  string
		rows  []int
		bias  bool
		fused []int // the T at which the fused launch must run
	}{
		{"q|k|v 2048", []int{2048, 2048, 2048}, false, []int{16, 17, 64, 100, 512}},
		{"q|k|v 2048 with bias", []int{2048, 2048, 2048}, true, []int{16, 17, 64, 100, 512}},
		{"gqa 2048|512|512", []int{2048, 512, 512}, false, []int{16, 17, 64}},
		{"200|100|100", []int{200, 100, 100}, true, nil},
		{"two blocks", []int{1024, 1024}, true, []int{16, 17, 64, 100, 512, 600}},
	} {
		total := 0
		for _, r := range c.rows {
			total += r
		}
		wbits := make([]uint16, total*cols)
		for i := range wbits {
			wbits[i] = half.F32ToF16(float32(rng.NormFloat64() * 0.03))
		}
		w, err := be.UploadF16(wbits)
		if err != nil {
			t.Fatal(err)
		}
		var bias backend.Tensor
		var bb []uint16
		if c.bias {
			bb = make([]uint16, total)
			for i := range bb {
				bb[i] = half.F32ToF16(float32(rng.NormFloat64()))
			}
			if bias, err = be.UploadF16(bb); err != nil {
				t.Fatal(err)
			}
		}
		for _, T := range []int{1, 15, 16, 17, 64, 100, 512, 600} {
			t.Run(fmt.Sprintf("%s/T%d", c.name, T), func(t *testing.T) {
				x := make([]float32, T*cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * math.Pow(10, rng.Float64()*3-1.5))
				}
				xt := mustF32(t, be, x)
				// want: one MatMul a block, on views of w and bias.
				withTuning(t, be, tuning{})
				var want [][]float32
				off := 0
				for _, r := range c.rows {
					wv, err := be.View(w, off*cols, r*cols)
					if err != nil {
						t.Fatal(err)
					}
					// The block's bias is its own upload: a view must start
					// 16 bytes aligned, and 200|100|100's third block starts
					// at byte 600 (MatMulParts offsets its pointer itself).
					var bv backend.Tensor
					if bias != nil {
						if bv, err = be.UploadF16(bb[off : off+r]); err != nil {
							t.Fatal(err)
						}
					}
					d := mustF32(t, be, make([]float32, T*r))
					if err := be.MatMul(d, wv, xt, bv, T); err != nil {
						t.Fatal(err)
					}
					want = append(want, mustRead(t, be, d))
					off += r
				}
				for _, tn := range []tuning{{}, {noPartsFused: true}} {
					withTuning(t, be, tn)
					_, fused := be.partsSplit(T, cols, c.rows)
					if wantFused := !tn.noPartsFused && slices.Contains(c.fused, T); fused != wantFused {
						t.Fatalf("%+v: fused launch %v, want %v", tn, fused, wantFused)
					}
					dsts := make([]backend.Tensor, len(c.rows))
					for j, r := range c.rows {
						dsts[j] = mustF32(t, be, make([]float32, T*r))
					}
					if err := be.MatMulParts(dsts, c.rows, w, xt, bias, T); err != nil {
						t.Fatal(err)
					}
					for j := range dsts {
						got := mustRead(t, be, dsts[j])
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[j][i]) {
								t.Fatalf("%+v: block %d, token %d, row %d: %g, its MatMul %g", tn, j, i/c.rows[j], i%c.rows[j], got[i], want[j][i])
							}
						}
					}
				}
			})
		}
	}
}
