package backendtest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
)

// runRowOps checks a backend.RowOps against the same backend's per-token
// ops, bit for bit: EmbedRows row t is Embed of token t (repeats and the
// last id included), RoPERows row t is RoPE at pos0+t, KVAppendRows leaves
// the caches KVAppend leaves, AttentionRows row t is Attention over
// positions 0..pos0+t, TopKRows row t is TopK of row t. Head shapes of the
// tiny models and of the real ones (GQA included), batches of 1, 3 and 9
// rows at positions from 0 and from 5.
func runRowOps(t *testing.T, be backend.Backend, rng *rand.Rand) {
	ro, ok := be.(backend.RowOps)
	if !ok {
		t.Skipf("%s does not run row ops", be.Name())
	}
	bb, ok := be.(backend.Batched)
	if !ok {
		t.Fatalf("%s runs row ops without batched ops", be.Name())
	}
	for _, c := range []struct{ V, D, T int }{{50, 8, 1}, {50, 64, 9}, {300, 256, 37}} {
		for _, f16 := range []bool{false, true} {
			t.Run(fmt.Sprintf("EmbedRows/V%d/D%d/T%d/f16=%v", c.V, c.D, c.T, f16), func(t *testing.T) {
				checkEmbedRows(t, be, bb, ro, rng, c.V, c.D, c.T, f16)
			})
		}
	}
	heads := []struct{ h, kv, hd int }{{4, 4, 64}, {4, 2, 16}, {16, 16, 128}}
	for _, hs := range heads {
		for _, T := range []int{1, 3, 9} {
			for _, pos0 := range []int{0, 5} {
				name := fmt.Sprintf("%dx%d-kv%d/T%d/pos%d", hs.h, hs.hd, hs.kv, T, pos0)
				t.Run("RoPERows/"+name, func(t *testing.T) {
					x := randF32(rng, T*hs.h*hs.hd, 1)
					got, want := upload(t, be, x), upload(t, be, x)
					if err := ro.RoPERows(got, T, hs.h, hs.hd, pos0, 10000); err != nil {
						t.Fatal(err)
					}
					for tok := range T {
						if err := be.RoPE(rows(t, bb, want, hs.h*hs.hd, tok, 1), hs.h, hs.hd, pos0+tok, 10000); err != nil {
							t.Fatal(err)
						}
					}
					sameBits(t, "RoPERows", read(t, be, got), read(t, be, want))
				})
				t.Run("KVAppendAttentionRows/"+name, func(t *testing.T) {
					checkKVAttentionRows(t, be, bb, ro, rng, hs.h, hs.kv, hs.hd, T, pos0, backend.F32)
				})
				t.Run("KVAppendAttentionRowsKV16/"+name, func(t *testing.T) {
					checkKVAttentionRows(t, be, bb, ro, rng, hs.h, hs.kv, hs.hd, T, pos0, backend.F16)
				})
			}
		}
	}
	for _, c := range []struct{ T, k, n int }{{1, 1, 8}, {3, 4, 64}, {9, 8, 2048}, {37, 4, 100}} {
		t.Run(fmt.Sprintf("CombineRows/T%d/k%d/n%d", c.T, c.k, c.n), func(t *testing.T) {
			src := upload(t, be, randF32(rng, c.T*c.k*c.n, 1))
			w := randF32(rng, c.T*c.k, 1)
			got := upload(t, be, randF32(rng, c.T*c.n, 1)) // whatever it held is cleared
			if err := ro.CombineRows(got, src, w, c.T, c.k); err != nil {
				t.Fatal(err)
			}
			want, _ := be.Alloc(c.T * c.n)
			zeros := make([]float32, c.n)
			for tok := range c.T {
				dt := rows(t, bb, want, c.n, tok, 1)
				if err := be.WriteF32(dt, zeros); err != nil {
					t.Fatal(err)
				}
				for j := range c.k {
					if err := be.AddScaled(dt, rows(t, bb, src, c.n, tok*c.k+j, 1), w[tok*c.k+j]); err != nil {
						t.Fatal(err)
					}
				}
			}
			sameBits(t, "CombineRows", read(t, be, got), read(t, be, want))
			if err := ro.CombineRows(got, src, w[1:], c.T, c.k); err == nil {
				t.Fatal("CombineRows with a weight missing: no error")
			}
		})
	}
	for _, c := range []struct{ T, n int }{{1, 8}, {5, 2048}, {33, 100}} {
		t.Run(fmt.Sprintf("AddGatedRows/T%d/n%d", c.T, c.n), func(t *testing.T) {
			d0, x, g := randF32(rng, c.T*c.n, 1), randF32(rng, c.T*c.n, 1), randF32(rng, c.T, 3)
			got, want := upload(t, be, d0), upload(t, be, d0)
			xt, gt := upload(t, be, x), upload(t, be, g)
			if err := ro.AddGatedRows(got, xt, gt, c.T); err != nil {
				t.Fatal(err)
			}
			for tok := range c.T {
				if err := be.AddGated(rows(t, bb, want, c.n, tok, 1), rows(t, bb, xt, c.n, tok, 1), rows(t, bb, gt, 1, tok, 1)); err != nil {
					t.Fatal(err)
				}
			}
			sameBits(t, "AddGatedRows", read(t, be, got), read(t, be, want))
		})
	}
	for _, E := range []int{16, 60, 64} {
		for _, T := range []int{1, 3, 9} {
			t.Run(fmt.Sprintf("TopKRows/E%d/T%d", E, T), func(t *testing.T) {
				l := randF32(rng, T*E, 2)
				lt := upload(t, be, l)
				for _, norm := range []bool{false, true} {
					ids, ws, err := ro.TopKRows(lt, T, 4, norm)
					if err != nil {
						t.Fatal(err)
					}
					for tok := range T {
						wi, ww, err := be.TopK(rows(t, bb, lt, E, tok, 1), 4, norm)
						if err != nil {
							t.Fatal(err)
						}
						if !reflect.DeepEqual(ids[tok*4:(tok+1)*4], wi) {
							t.Fatalf("row %d (norm %v): ids %v, TopK %v", tok, norm, ids[tok*4:(tok+1)*4], wi)
						}
						sameBits(t, fmt.Sprintf("row %d weights (norm %v)", tok, norm), ws[tok*4:(tok+1)*4], ww)
					}
				}
			})
		}
	}
}

// checkKVAttentionRows appends T rows at pos0 to caches that already hold
// positions 0..pos0-1, through KVAppendRows and through KVAppend row by
// row, compares the caches, then AttentionRows against Attention. dt is
// the caches' element type.
func checkKVAttentionRows(t *testing.T, be backend.Backend, bb backend.Batched, ro backend.RowOps, rng *rand.Rand, h, kv, hd, T, pos0 int, dt backend.DType) {
	n := kv * hd
	maxSeq := pos0 + T + 2
	prefix := randF32(rng, maxSeq*n, 1)
	for i := pos0 * n; i < len(prefix); i++ {
		prefix[i] = 0
	}
	vprefix := randF32(rng, maxSeq*n, 1)
	for i := pos0 * n; i < len(vprefix); i++ {
		vprefix[i] = 0
	}
	cache := func(x []float32) backend.Tensor {
		if dt != backend.F16 {
			return upload(t, be, x)
		}
		bits := make([]uint16, len(x))
		for i, v := range x {
			bits[i] = half.F32ToF16(v)
		}
		c, err := be.UploadF16(bits)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	kc, vc := cache(prefix), cache(vprefix)
	kw, vw := cache(prefix), cache(vprefix)
	k, v := upload(t, be, randF32(rng, T*n, 1)), upload(t, be, randF32(rng, T*n, 1))
	if err := ro.KVAppendRows(kc, vc, k, v, T, pos0); err != nil {
		t.Fatal(err)
	}
	for tok := range T {
		if err := be.KVAppend(kw, vw, rows(t, bb, k, n, tok, 1), rows(t, bb, v, n, tok, 1), pos0+tok); err != nil {
			t.Fatal(err)
		}
	}
	sameBits(t, "K cache", read(t, be, kc), read(t, be, kw))
	sameBits(t, "V cache", read(t, be, vc), read(t, be, vw))
	Q := h * hd
	q := upload(t, be, randF32(rng, T*Q, 1))
	got, _ := be.Alloc(T * Q)
	if err := ro.AttentionRows(got, q, kc, vc, T, pos0, h, kv, hd); err != nil {
		t.Fatal(err)
	}
	want, _ := be.Alloc(T * Q)
	for tok := range T {
		if err := be.Attention(rows(t, bb, want, Q, tok, 1), rows(t, bb, q, Q, tok, 1), kc, vc, pos0+tok+1, h, kv, hd); err != nil {
			t.Fatal(err)
		}
	}
	sameBits(t, "AttentionRows", read(t, be, got), read(t, be, want))
}

// checkEmbedRows: EmbedRows of T token ids (one repeated, the last id of a
// V x D table among them) against Embed row by row, an FP32 or FP16 table;
// an id outside the table is an error.
func checkEmbedRows(t *testing.T, be backend.Backend, bb backend.Batched, ro backend.RowOps, rng *rand.Rand, V, D, T int, f16 bool) {
	vals := randF32(rng, V*D, 1)
	var table backend.Tensor
	if f16 {
		bits := make([]uint16, len(vals))
		for i, v := range vals {
			bits[i] = half.F32ToF16(v)
		}
		var err error
		if table, err = be.UploadF16(bits); err != nil {
			t.Fatal(err)
		}
	} else {
		table = upload(t, be, vals)
	}
	toks := make([]int, T)
	for i := range toks {
		toks[i] = rng.IntN(V)
	}
	toks[T-1] = V - 1
	if T > 2 {
		toks[1] = toks[0]
	}
	got := upload(t, be, randF32(rng, T*D, 1))
	if err := ro.EmbedRows(got, table, toks); err != nil {
		t.Fatal(err)
	}
	want := upload(t, be, make([]float32, T*D))
	for i, tok := range toks {
		if err := be.Embed(rows(t, bb, want, D, i, 1), table, tok); err != nil {
			t.Fatal(err)
		}
	}
	sameBits(t, "EmbedRows", read(t, be, got), read(t, be, want))
	bad := append([]int(nil), toks...)
	bad[0] = V
	if err := ro.EmbedRows(got, table, bad); err == nil {
		t.Fatalf("EmbedRows of token %d in a %d-token table: no error", V, V)
	}
}
