// Package backendtest is the conformance suite every backend runs: each op
// of runtime/backend is checked against a float64 reference written here,
// independently of any backend, with a per-op tolerance. The CPU backend runs
// it in its own tests; the CUDA backend runs the same suite on the GPU.
package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Tolerances are absolute-plus-relative bounds per op family:
// |got - want| <= Abs + Rel*|want|.
type Tolerance struct{ Abs, Rel float64 }

// Tolerances for FP32-accumulating backends. A backend with FP16
// activations passes its own, looser set.
var DefaultTolerances = map[string]Tolerance{
	"matvec":    {Abs: 1e-4, Rel: 1e-4},
	"expert":    {Abs: 1e-4, Rel: 1e-4},
	"rmsnorm":   {Abs: 1e-5, Rel: 1e-5},
	"rope":      {Abs: 1e-5, Rel: 1e-5},
	"attention": {Abs: 1e-5, Rel: 1e-4},
	"elementw":  {Abs: 1e-6, Rel: 1e-6},
	"topk":      {Abs: 1e-6, Rel: 1e-5},
}

// Shape is one matvec problem size.
type Shape struct{ Rows, Cols int }

// TinyShapes are the matrix sizes of the tiny test models (and one odd size).
var TinyShapes = []Shape{{256, 256}, {512, 256}, {352, 256}, {256, 352}, {16, 256}, {3, 5}}

// Run checks every op of be on the given matvec shapes.
func Run(t *testing.T, be backend.Backend, shapes []Shape, tol map[string]Tolerance) {
	if tol == nil {
		tol = DefaultTolerances
	}
	rng := rand.New(rand.NewPCG(1, 2))
	t.Run("MatVec", func(t *testing.T) {
		for _, s := range shapes {
			for _, bias := range []bool{false, true} {
				t.Run(fmt.Sprintf("%dx%d/bias=%v", s.Rows, s.Cols, bias), func(t *testing.T) {
					checkMatVec(t, be, rng, s, bias, tol["matvec"])
				})
			}
		}
	})
	t.Run("ExpertMatVec", func(t *testing.T) {
		for _, s := range shapes {
			for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
				t.Run(fmt.Sprintf("%s/%dx%d", scheme, s.Rows, s.Cols), func(t *testing.T) {
					checkExpert(t, be, rng, s, scheme, tol["expert"])
				})
			}
		}
	})
	t.Run("GroupedExperts", func(t *testing.T) { runGrouped(t, be, rng) })
	t.Run("RMSNorm", func(t *testing.T) { checkRMSNorm(t, be, rng, tol["rmsnorm"]) })
	t.Run("RoPE", func(t *testing.T) { checkRoPE(t, be, rng, tol["rope"]) })
	t.Run("Attention", func(t *testing.T) { checkAttention(t, be, rng, tol["attention"], backend.F32) })
	t.Run("AttentionKV16", func(t *testing.T) { checkAttention(t, be, rng, tol["attention"], backend.F16) })
	t.Run("KVAppendF16Rounding", func(t *testing.T) { checkKVAppendF16(t, be, rng) })
	t.Run("Elementwise", func(t *testing.T) { checkElementwise(t, be, rng, tol["elementw"]) })
	t.Run("TopK", func(t *testing.T) { checkTopK(t, be, rng, tol["topk"]) })
	t.Run("Argmax", func(t *testing.T) { checkArgmax(t, be) })
	t.Run("Embed", func(t *testing.T) { checkEmbed(t, be, rng) })
	t.Run("Errors", func(t *testing.T) { checkErrors(t, be) })
	t.Run("Batched", func(t *testing.T) { runBatched(t, be, rng, shapes) })
	t.Run("RowOps", func(t *testing.T) { runRowOps(t, be, rng) })
}

func randF32(rng *rand.Rand, n int, std float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * std)
	}
	return out
}

// randF16 returns FP16 bits and their exact float64 values.
func randF16(rng *rand.Rand, n int, std float64) ([]uint16, []float64) {
	bits := make([]uint16, n)
	vals := make([]float64, n)
	for i := range bits {
		bits[i] = half.F32ToF16(float32(rng.NormFloat64() * std))
		vals[i] = float64(half.F16ToF32(bits[i]))
	}
	return bits, vals
}

func upload(t *testing.T, be backend.Backend, x []float32) backend.Tensor {
	t.Helper()
	tn, err := be.Alloc(len(x))
	if err != nil {
		t.Fatal(err)
	}
	if err := be.WriteF32(tn, x); err != nil {
		t.Fatal(err)
	}
	return tn
}

func read(t *testing.T, be backend.Backend, tn backend.Tensor) []float32 {
	t.Helper()
	out := make([]float32, tn.Len())
	if err := be.ReadF32(tn, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func near(t *testing.T, what string, got []float32, want []float64, tol Tolerance) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range got {
		d := math.Abs(float64(got[i]) - want[i])
		if d > tol.Abs+tol.Rel*math.Abs(want[i]) && d > worst {
			worst, at = d, i
		}
	}
	if at >= 0 {
		t.Fatalf("%s: element %d = %g, want %g (|diff| %g beyond abs %g + rel %g)", what, at, got[at], want[at], worst, tol.Abs, tol.Rel)
	}
}

func checkMatVec(t *testing.T, be backend.Backend, rng *rand.Rand, s Shape, withBias bool, tol Tolerance) {
	wBits, wVals := randF16(rng, s.Rows*s.Cols, 0.05)
	x := randF32(rng, s.Cols, 1)
	w, err := be.UploadF16(wBits)
	if err != nil {
		t.Fatal(err)
	}
	var bias backend.Tensor
	var bVals []float64
	if withBias {
		var bBits []uint16
		bBits, bVals = randF16(rng, s.Rows, 0.1)
		if bias, err = be.UploadF16(bBits); err != nil {
			t.Fatal(err)
		}
	}
	dst, _ := be.Alloc(s.Rows)
	if err := be.MatVec(dst, w, upload(t, be, x), bias); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, s.Rows)
	for r := range want {
		for c := 0; c < s.Cols; c++ {
			want[r] += wVals[r*s.Cols+c] * float64(x[c])
		}
		if withBias {
			want[r] += bVals[r]
		}
	}
	near(t, "MatVec", read(t, be, dst), want, tol)
}

func checkExpert(t *testing.T, be backend.Backend, rng *rand.Rand, s Shape, scheme qpack.Scheme, tol Tolerance) {
	// A record holding a single matrix is enough: use the gate slot of a
	// layout whose gate is [Rows, Cols].
	layout, err := qpack.NewRecordLayout(scheme, s.Cols, s.Rows)
	if err != nil {
		t.Fatal(err)
	}
	m := layout.Gate
	w := randF32(rng, s.Rows*s.Cols, 0.05)
	rec := make([]byte, layout.Size)
	var ref []float32
	switch scheme {
	case qpack.SchemeInt4:
		if _, err := qpack.QuantizeMatrix(rec[m.Offset:m.Offset+m.Bytes], w, s.Rows, s.Cols); err != nil {
			t.Fatal(err)
		}
		ref = make([]float32, s.Rows*s.Cols)
		qpack.DequantizeMatrix(ref, rec[m.Offset:m.Offset+m.Bytes], s.Rows, s.Cols)
	case qpack.SchemeFP16:
		if _, err := qpack.EncodeFP16Matrix(rec[m.Offset:m.Offset+m.Bytes], w); err != nil {
			t.Fatal(err)
		}
		ref = make([]float32, len(w))
		for i, v := range w {
			ref[i] = half.F16ToF32(half.F32ToF16(v))
		}
	}
	row, err := be.AllocBytes(len(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := be.WriteBytes(row, 0, rec); err != nil {
		t.Fatal(err)
	}
	x := randF32(rng, s.Cols, 1)
	dst, _ := be.Alloc(s.Rows)
	if err := be.ExpertMatVec(dst, row, m, scheme, upload(t, be, x)); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, s.Rows)
	for r := range want {
		for c := 0; c < s.Cols; c++ {
			want[r] += float64(ref[r*s.Cols+c]) * float64(x[c])
		}
	}
	near(t, "ExpertMatVec", read(t, be, dst), want, tol)
}

func checkRMSNorm(t *testing.T, be backend.Backend, rng *rand.Rand, tol Tolerance) {
	for _, groups := range []int{1, 4} {
		n, eps := 256, 1e-5
		x := randF32(rng, n, 2)
		wBits, wVals := randF16(rng, n/groups, 1)
		w, _ := be.UploadF16(wBits)
		dst, _ := be.Alloc(n)
		if err := be.RMSNorm(dst, upload(t, be, x), w, float32(eps)); err != nil {
			t.Fatal(err)
		}
		g := n / groups
		want := make([]float64, n)
		for lo := 0; lo < n; lo += g {
			var ss float64
			for _, v := range x[lo : lo+g] {
				ss += float64(v) * float64(v)
			}
			inv := 1 / math.Sqrt(ss/float64(g)+eps)
			for i := 0; i < g; i++ {
				want[lo+i] = float64(x[lo+i]) * inv * wVals[i]
			}
		}
		near(t, fmt.Sprintf("RMSNorm groups=%d", groups), read(t, be, dst), want, tol)
	}
}

func checkRoPE(t *testing.T, be backend.Backend, rng *rand.Rand, tol Tolerance) {
	for _, c := range []struct {
		heads, hd, pos int
		theta          float64
	}{{4, 64, 0, 1e4}, {4, 64, 37, 1e4}, {2, 128, 300, 1e6}} {
		x := randF32(rng, c.heads*c.hd, 1)
		xt := upload(t, be, x)
		if err := be.RoPE(xt, c.heads, c.hd, c.pos, c.theta); err != nil {
			t.Fatal(err)
		}
		half := c.hd / 2
		want := make([]float64, len(x))
		for h := 0; h < c.heads; h++ {
			for i := 0; i < half; i++ {
				f := float64(c.pos) / math.Pow(c.theta, float64(2*i)/float64(c.hd))
				a, b := float64(x[h*c.hd+i]), float64(x[h*c.hd+i+half])
				want[h*c.hd+i] = a*math.Cos(f) - b*math.Sin(f)
				want[h*c.hd+i+half] = b*math.Cos(f) + a*math.Sin(f)
			}
		}
		// FP32 phase error grows with pos: allow pos*2^-24 radians.
		tl := Tolerance{Abs: tol.Abs + float64(c.pos)*6e-8*4, Rel: tol.Rel}
		near(t, fmt.Sprintf("RoPE pos=%d", c.pos), read(t, be, xt), want, tl)
	}
}

// allocKV allocates a zeroed KV cache of n values of element type dt.
func allocKV(t *testing.T, be backend.Backend, n int, dt backend.DType) backend.Tensor {
	t.Helper()
	alloc := be.Alloc
	if dt == backend.F16 {
		alloc = be.AllocF16
	}
	c, err := alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// roundKV is what a cache of element type dt holds for x: x itself (F32)
// or x rounded to binary16 (F16).
func roundKV(x []float32, dt backend.DType) []float32 {
	if dt != backend.F16 {
		return x
	}
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = half.F16ToF32(half.F32ToF16(v))
	}
	return out
}

// checkAttention appends random K and V rows to caches of element type kv
// and compares Attention with a float64 reference over what the caches
// hold (for FP16 caches the rounded rows).
func checkAttention(t *testing.T, be backend.Backend, rng *rand.Rand, tol Tolerance, kv backend.DType) {
	for _, c := range []struct{ heads, kv, hd, n, maxT int }{{4, 4, 64, 1, 8}, {4, 4, 64, 7, 8}, {8, 2, 32, 33, 40}, {2, 1, 128, 1500, 1536}, {2, 2, 256, 100, 100},
		// more lengths: a range of the CUDA kernel's 16 holds 4, 5, 9 or 61 positions
		{4, 2, 128, 64, 72}, {4, 2, 128, 65, 72}, {2, 2, 64, 129, 130}, {2, 1, 128, 961, 1024}} {
		kvDim := c.kv * c.hd
		kc := allocKV(t, be, c.maxT*kvDim, kv)
		vc := allocKV(t, be, c.maxT*kvDim, kv)
		ks := make([][]float32, c.n)
		vs := make([][]float32, c.n)
		for p := 0; p < c.n; p++ {
			k, v := randF32(rng, kvDim, 1), randF32(rng, kvDim, 1)
			if err := be.KVAppend(kc, vc, upload(t, be, k), upload(t, be, v), p); err != nil {
				t.Fatal(err)
			}
			ks[p], vs[p] = roundKV(k, kv), roundKV(v, kv)
		}
		q := randF32(rng, c.heads*c.hd, 1)
		dst, _ := be.Alloc(len(q))
		if err := be.Attention(dst, upload(t, be, q), kc, vc, c.n, c.heads, c.kv, c.hd); err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(q))
		for h := 0; h < c.heads; h++ {
			off := (h / (c.heads / c.kv)) * c.hd
			sc := make([]float64, c.n)
			maxv := math.Inf(-1)
			for p := range sc {
				for i := 0; i < c.hd; i++ {
					sc[p] += float64(q[h*c.hd+i]) * float64(ks[p][off+i])
				}
				sc[p] /= math.Sqrt(float64(c.hd))
				maxv = math.Max(maxv, sc[p])
			}
			var sum float64
			for p := range sc {
				sc[p] = math.Exp(sc[p] - maxv)
				sum += sc[p]
			}
			for p := range sc {
				for i := 0; i < c.hd; i++ {
					want[h*c.hd+i] += sc[p] / sum * float64(vs[p][off+i])
				}
			}
		}
		near(t, fmt.Sprintf("Attention %v %+v", kv, c), read(t, be, dst), want, tol)
	}
}

// checkKVAppendF16 appends rows holding rounding ties, values that round to
// FP16 subnormals or to zero, and the largest finite FP16 values to FP16
// caches and checks the caches hold each value rounded to nearest even
// (half.F32ToF16), bit for bit, and that Attention over one position
// returns the stored V row exactly (its one weight is 1).
func checkKVAppendF16(t *testing.T, be backend.Backend, rng *rand.Rand) {
	edge := []float32{1 + 1.0/2048, 1 + 3.0/2048, -(1 + 1.0/2048), 2049, 2051, 65504, 65519, -65519,
		1.0 / (1 << 20), 3.0 / (1 << 25), 1.0 / (1 << 26), 1e-8, -1e-8, 0, 0.1, -0.3333333}
	const hd = 64
	k := randF32(rng, hd, 1)
	v := randF32(rng, hd, 1)
	copy(k, edge)
	copy(v[hd-len(edge):], edge)
	kc, vc := allocKV(t, be, 2*hd, backend.F16), allocKV(t, be, 2*hd, backend.F16)
	if err := be.KVAppend(kc, vc, upload(t, be, k), upload(t, be, v), 1); err != nil {
		t.Fatal(err)
	}
	wantK := append(make([]float32, hd), roundKV(k, backend.F16)...)
	wantV := append(make([]float32, hd), roundKV(v, backend.F16)...)
	sameBits(t, "FP16 K cache", read(t, be, kc), wantK)
	sameBits(t, "FP16 V cache", read(t, be, vc), wantV)
	// Position 0 of the caches now holds row 1's values too (KVAppend at 0).
	if err := be.KVAppend(kc, vc, upload(t, be, k), upload(t, be, v), 0); err != nil {
		t.Fatal(err)
	}
	q := randF32(rng, hd, 1)
	dst, _ := be.Alloc(hd)
	if err := be.Attention(dst, upload(t, be, q), kc, vc, 1, 1, 1, hd); err != nil {
		t.Fatal(err)
	}
	wantAtt := append([]float32(nil), wantV[hd:]...)
	for i, x := range wantAtt {
		if x == 0 {
			wantAtt[i] = 0 // the weighted sum starts at +0: +0 + 1*(-0) is +0
		}
	}
	sameBits(t, "Attention over one FP16 position", read(t, be, dst), wantAtt)
	f32, _ := be.Alloc(2 * hd)
	if err := be.KVAppend(kc, f32, upload(t, be, k), upload(t, be, v), 0); err == nil {
		t.Fatal("KVAppend into an FP16 K cache and an FP32 V cache: no error")
	}
}

func checkElementwise(t *testing.T, be backend.Backend, rng *rand.Rand, tol Tolerance) {
	n := 352
	a, b := randF32(rng, n, 2), randF32(rng, n, 2)
	at, bt := upload(t, be, a), upload(t, be, b)
	dst, _ := be.Alloc(n)
	want := make([]float64, n)

	if err := be.SiLUMul(dst, at, bt); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		g := float64(a[i])
		want[i] = g / (1 + math.Exp(-g)) * float64(b[i])
	}
	near(t, "SiLUMul", read(t, be, dst), want, tol)

	if err := be.Add(dst, at, bt); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i] = float64(a[i]) + float64(b[i])
	}
	near(t, "Add", read(t, be, dst), want, tol)

	acc := upload(t, be, a)
	if err := be.AddScaled(acc, bt, 0.375); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i] = float64(a[i]) + 0.375*float64(b[i])
	}
	near(t, "AddScaled", read(t, be, acc), want, tol)

	acc = upload(t, be, a)
	g := upload(t, be, []float32{-0.7})
	if err := be.AddGated(acc, bt, g); err != nil {
		t.Fatal(err)
	}
	s := 1 / (1 + math.Exp(0.7))
	for i := range want {
		want[i] = float64(a[i]) + s*float64(b[i])
	}
	near(t, "AddGated", read(t, be, acc), want, tol)
}

func checkTopK(t *testing.T, be backend.Backend, rng *rand.Rand, tol Tolerance) {
	for _, c := range []struct {
		e, k int
		norm bool
	}{{16, 4, false}, {64, 8, false}, {60, 4, true}} {
		l := randF32(rng, c.e, 1)
		ids, ws, err := be.TopK(upload(t, be, l), c.k, c.norm)
		if err != nil {
			t.Fatal(err)
		}
		// float64 softmax and a stable sort by descending probability.
		p := make([]float64, c.e)
		maxv := math.Inf(-1)
		for _, v := range l {
			maxv = math.Max(maxv, float64(v))
		}
		var sum float64
		for i, v := range l {
			p[i] = math.Exp(float64(v) - maxv)
			sum += p[i]
		}
		order := make([]int, c.e)
		for i := range order {
			order[i] = i
		}
		for i := 0; i < c.k; i++ {
			for j := i + 1; j < c.e; j++ {
				if p[order[j]] > p[order[i]] {
					order[i], order[j] = order[j], order[i]
				}
			}
		}
		var topSum float64
		for i := 0; i < c.k; i++ {
			topSum += p[order[i]] / sum
		}
		want := make([]float64, c.k)
		for i := 0; i < c.k; i++ {
			if ids[i] != order[i] {
				t.Fatalf("TopK %+v: ids %v, want prefix %v", c, ids, order[:c.k])
			}
			want[i] = p[order[i]] / sum
			if c.norm {
				want[i] /= topSum
			}
		}
		near(t, "TopK weights", ws, want, tol)
	}
	// Ties go to the lower index.
	ids, _, err := be.TopK(upload(t, be, []float32{1, 3, 3, 2, 3}), 2, false)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] != 1 || ids[1] != 2 {
		t.Fatalf("TopK ties: %v, want [1 2]", ids)
	}
}

func checkArgmax(t *testing.T, be backend.Backend) {
	cases := []struct {
		name   string
		logits []float32
		masked []int
		want   int
	}{
		{"plain", []float32{0, 5, 2}, nil, 1},
		{"tie picks lowest", []float32{7, 1, 7}, nil, 0},
		{"masked max", []float32{0, 5, 2}, []int{1}, 2},
		{"mask several", []float32{9, 5, 2, 8}, []int{0, 3}, 1},
	}
	for _, c := range cases {
		got, err := be.Argmax(upload(t, be, c.logits), c.masked)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("Argmax %s = %d, want %d", c.name, got, c.want)
		}
	}
}

func checkEmbed(t *testing.T, be backend.Backend, rng *rand.Rand) {
	bits, vals := randF16(rng, 10*8, 1)
	table, _ := be.UploadF16(bits)
	dst, _ := be.Alloc(8)
	if err := be.Embed(dst, table, 7); err != nil {
		t.Fatal(err)
	}
	near(t, "Embed", read(t, be, dst), vals[56:64], Tolerance{})
	if err := be.Embed(dst, table, 10); err == nil {
		t.Fatal("Embed of token 10 in a 10-row table: no error")
	}
}

func checkErrors(t *testing.T, be backend.Backend) {
	a, _ := be.Alloc(4)
	b, _ := be.Alloc(5)
	if err := be.Add(a, a, b); err == nil {
		t.Error("Add of 4 and 5 values: no error")
	}
	w, _ := be.UploadF16(make([]uint16, 12))
	if err := be.MatVec(a, w, b, nil); err == nil {
		t.Error("MatVec [4,?] with 12 weights and x of 5: no error")
	}
	if _, _, err := be.TopK(a, 5, false); err == nil {
		t.Error("TopK k=5 of 4: no error")
	}
	if err := be.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := be.Free(a); err == nil {
		t.Error("double free: no error")
	}
}
