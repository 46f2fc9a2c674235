package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// runBatched checks a backend.Batched against its own per-token ops, bit
// for bit: MatMul's row t is MatVec of x[t], ExpertMatMul's scattered row
// is ExpertMatVec of its gathered input, and a Rows view reads and writes
// the parent's values. Token counts around the four-token blocking (1, 3,
// 4, 5, 9) and the tiny shapes, whose odd sizes (352 columns: a padded
// INT4 block; 3x5) exercise every tail.
func runBatched(t *testing.T, be backend.Backend, rng *rand.Rand, shapes []Shape) {
	bb, ok := be.(backend.Batched)
	if !ok {
		t.Skipf("%s does not run batched ops", be.Name())
	}
	t.Run("Rows", func(t *testing.T) { checkRows(t, be, bb) })
	for _, s := range shapes {
		if s.Rows > maxBatchedRows {
			continue // an lm_head: prefill runs it on the last position only
		}
		for _, T := range []int{1, 3, 4, 5, 9} {
			t.Run(fmt.Sprintf("MatMul/%dx%d/T%d", s.Rows, s.Cols, T), func(t *testing.T) {
				checkMatMul(t, be, bb, rng, s, T)
			})
			for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
				t.Run(fmt.Sprintf("ExpertMatMul/%s/%dx%d/T%d", scheme, s.Rows, s.Cols, T), func(t *testing.T) {
					checkExpertMatMul(t, be, bb, rng, s, scheme, T)
				})
			}
		}
		if g, ok := be.(backend.ExpertGroups); ok {
			for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
				t.Run(fmt.Sprintf("ExpertMatMulGroup/%s/%dx%d", scheme, s.Rows, s.Cols), func(t *testing.T) {
					checkExpertMatMulGroup(t, be, bb, g, rng, s, scheme)
				})
			}
		}
	}
}

// expertRecord quantizes (or encodes) a random [s.Rows, s.Cols] gate matrix
// into a record on be.
func expertRecord(t *testing.T, be backend.Backend, rng *rand.Rand, s Shape, scheme qpack.Scheme) (backend.Tensor, qpack.MatrixLayout) {
	t.Helper()
	layout, err := qpack.NewRecordLayout(scheme, s.Cols, s.Rows)
	if err != nil {
		t.Fatal(err)
	}
	m := layout.Gate
	rec := make([]byte, layout.Size)
	w := randF32(rng, s.Rows*s.Cols, 0.05)
	switch scheme {
	case qpack.SchemeInt4:
		_, err = qpack.QuantizeMatrix(rec[m.Offset:m.Offset+m.Bytes], w, s.Rows, s.Cols)
	case qpack.SchemeFP16:
		_, err = qpack.EncodeFP16Matrix(rec[m.Offset:m.Offset+m.Bytes], w)
	}
	if err != nil {
		t.Fatal(err)
	}
	row, err := be.AllocBytes(len(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := be.WriteBytes(row, 0, rec); err != nil {
		t.Fatal(err)
	}
	return row, m
}

// checkExpertMatMulGroup: one grouped call over four experts (pair counts
// 0, 1, 5 and 9, their inputs shuffled, their outputs disjoint rows of one
// tensor) gives the bits of one ExpertMatMul per expert; a mismatched
// argument list is an error.
func checkExpertMatMulGroup(t *testing.T, be backend.Backend, bb backend.Batched, g backend.ExpertGroups, rng *rand.Rand, s Shape, scheme qpack.Scheme) {
	counts := []int{5, 0, 9, 1}
	recs := make([]backend.Tensor, len(counts))
	var m qpack.MatrixLayout
	for j := range recs {
		recs[j], m = expertRecord(t, be, rng, s, scheme)
	}
	const nx = 12
	x := upload(t, be, randF32(rng, nx*s.Cols, 1))
	total := 0
	for _, c := range counts {
		total += c
	}
	out := rng.Perm(total + 2)
	xRows, dstRows := make([][]int, len(counts)), make([][]int, len(counts))
	for j, c := range counts {
		xRows[j], dstRows[j] = make([]int, c), out[:c]
		out = out[c:]
		for i := range c {
			xRows[j][i] = rng.IntN(nx)
		}
	}
	grouped := upload(t, be, make([]float32, (total+2)*s.Rows))
	if err := g.ExpertMatMulGroup(grouped, dstRows, recs, m, scheme, x, xRows); err != nil {
		t.Fatal(err)
	}
	each := upload(t, be, make([]float32, (total+2)*s.Rows))
	for j := range recs {
		if err := bb.ExpertMatMul(each, dstRows[j], recs[j], m, scheme, x, xRows[j]); err != nil {
			t.Fatal(err)
		}
	}
	sameBits(t, "ExpertMatMulGroup against one ExpertMatMul per expert", read(t, be, grouped), read(t, be, each))
	if err := g.ExpertMatMulGroup(grouped, dstRows[:3], recs, m, scheme, x, xRows); err == nil {
		t.Fatal("ExpertMatMulGroup with 3 destination row lists for 4 experts: no error")
	}
}

// maxBatchedRows bounds the shapes the batched ops are checked on: prefill
// batches the layers' projections and experts (at most a few thousand
// rows), never the lm_head, whose real shapes would cost minutes of host
// arithmetic here for nothing the batched path runs.
const maxBatchedRows = 16384

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d = %g (%08x), the per-token op gives %g (%08x)", what, i,
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

func rows(t *testing.T, bb backend.Batched, tn backend.Tensor, width, lo, n int) backend.Tensor {
	t.Helper()
	v, err := bb.Rows(tn, width, lo, n)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func checkRows(t *testing.T, be backend.Backend, bb backend.Batched) {
	x := upload(t, be, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	v := rows(t, bb, x, 4, 1, 2)
	if got := read(t, be, v); fmt.Sprint(got) != "[4 5 6 7 8 9 10 11]" {
		t.Fatalf("rows 1..2 of width 4: %v", got)
	}
	if err := be.WriteF32(v, []float32{-1, -1, -1, -1, -2, -2, -2, -2}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, be, x); fmt.Sprint(got) != "[0 1 2 3 -1 -1 -1 -1 -2 -2 -2 -2]" {
		t.Fatalf("a write through the view left %v", got)
	}
	for _, c := range [][3]int{{4, 2, 2}, {0, 0, 1}, {5, 0, 3}, {4, -1, 1}} {
		if _, err := bb.Rows(x, c[0], c[1], c[2]); err == nil {
			t.Fatalf("Rows(width %d, lo %d, n %d) of 12 values: no error", c[0], c[1], c[2])
		}
	}
}

func checkMatMul(t *testing.T, be backend.Backend, bb backend.Batched, rng *rand.Rand, s Shape, T int) {
	wBits, _ := randF16(rng, s.Rows*s.Cols, 0.05)
	bBits, _ := randF16(rng, s.Rows, 0.1)
	w, err := be.UploadF16(wBits)
	if err != nil {
		t.Fatal(err)
	}
	bias, err := be.UploadF16(bBits)
	if err != nil {
		t.Fatal(err)
	}
	x := upload(t, be, randF32(rng, T*s.Cols, 1))
	for _, b := range []backend.Tensor{nil, bias} {
		dst, _ := be.Alloc(T * s.Rows)
		if err := bb.MatMul(dst, w, x, b, T); err != nil {
			t.Fatal(err)
		}
		got := read(t, be, dst)
		one, _ := be.Alloc(s.Rows)
		for tok := range T {
			if err := be.MatVec(one, w, rows(t, bb, x, s.Cols, tok, 1), b); err != nil {
				t.Fatal(err)
			}
			sameBits(t, fmt.Sprintf("MatMul token %d (bias %v)", tok, b != nil), got[tok*s.Rows:(tok+1)*s.Rows], read(t, be, one))
		}
	}
}

func checkExpertMatMul(t *testing.T, be backend.Backend, bb backend.Batched, rng *rand.Rand, s Shape, scheme qpack.Scheme, T int) {
	layout, err := qpack.NewRecordLayout(scheme, s.Cols, s.Rows)
	if err != nil {
		t.Fatal(err)
	}
	m := layout.Gate
	rec := make([]byte, layout.Size)
	w := randF32(rng, s.Rows*s.Cols, 0.05)
	switch scheme {
	case qpack.SchemeInt4:
		_, err = qpack.QuantizeMatrix(rec[m.Offset:m.Offset+m.Bytes], w, s.Rows, s.Cols)
	case qpack.SchemeFP16:
		_, err = qpack.EncodeFP16Matrix(rec[m.Offset:m.Offset+m.Bytes], w)
	}
	if err != nil {
		t.Fatal(err)
	}
	row, err := be.AllocBytes(len(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := be.WriteBytes(row, 0, rec); err != nil {
		t.Fatal(err)
	}
	// Inputs: T+2 rows, of which T are gathered in a shuffled order and
	// scattered to a shuffled set of T of T+3 output rows.
	x := upload(t, be, randF32(rng, (T+2)*s.Cols, 1))
	xRows, dstRows := rng.Perm(T + 2)[:T], rng.Perm(T + 3)[:T]
	dst := upload(t, be, make([]float32, (T+3)*s.Rows))
	if err := bb.ExpertMatMul(dst, dstRows, row, m, scheme, x, xRows); err != nil {
		t.Fatal(err)
	}
	got := read(t, be, dst)
	one, _ := be.Alloc(s.Rows)
	written := map[int]bool{}
	for i := range xRows {
		if err := be.ExpertMatVec(one, row, m, scheme, rows(t, bb, x, s.Cols, xRows[i], 1)); err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("ExpertMatMul input row %d -> output row %d", xRows[i], dstRows[i]),
			got[dstRows[i]*s.Rows:(dstRows[i]+1)*s.Rows], read(t, be, one))
		written[dstRows[i]] = true
	}
	for r := range T + 3 {
		if written[r] {
			continue
		}
		for _, v := range got[r*s.Rows : (r+1)*s.Rows] {
			if v != 0 {
				t.Fatalf("ExpertMatMul wrote output row %d, which no input maps to", r)
			}
		}
	}
	if err := bb.ExpertMatMul(dst, dstRows[:1], row, m, scheme, x, xRows[:1]); err != nil {
		t.Fatal(err)
	}
	if err := bb.ExpertMatMul(dst, []int{T + 3}, row, m, scheme, x, xRows[:1]); err == nil {
		t.Fatal("ExpertMatMul to an output row past the end: no error")
	}
}
