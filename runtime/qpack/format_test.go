package qpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/half"
)

// TestQuantizeGolden pins the byte layout: nibble order, q+8 offset,
// round-half-even, zero padding, the all-zero block and scale placement.
func TestQuantizeGolden(t *testing.T) {
	const rows, cols = 3, 8 // padded to 256: one block per row
	w := []float32{
		// row 0: max 7 -> s = 1 (FP16 0x3c00)
		1, 2, -1, 7, -7, 0.5, 1.5, 2.5,
		// row 1: all zero -> s = 0, every nibble 8
		0, 0, 0, 0, 0, 0, 0, 0,
		// row 2: max 3.5 -> s = 0.5 (0x3800); w/s = -7 -1 1 3 -5 0.5 1.5 7 -> q = -7 -1 1 3 -5 0 2 7
		-3.5, -0.5, 0.5, 1.5, -2.5, 0.25, 0.75, 3.5,
	}
	want := make([]byte, 0, Int4MatrixBytes(rows, cols))
	pad := bytes.Repeat([]byte{0x88}, 124) // bytes 4..127: padding values q = 0
	// row 0: u = 9,10 | 7,15 | 1,8 | 10,10
	want = append(want, 0xA9, 0xF7, 0x81, 0xAA)
	want = append(want, pad...)
	// row 1
	want = append(want, 0x88, 0x88, 0x88, 0x88)
	want = append(want, pad...)
	// row 2: q = -7,-1 | 1,3 | -5,0 | 2,7 -> u = 1,7 | 9,11 | 3,8 | 10,15
	want = append(want, 0x71, 0xB9, 0x83, 0xFA)
	want = append(want, pad...)
	// scales, row-major, little endian
	want = append(want, 0x00, 0x3c, 0x00, 0x00, 0x00, 0x38)

	if got := Int4MatrixBytes(rows, cols); got != len(want) || got != 3*128+3*2 {
		t.Fatalf("Int4MatrixBytes(3, 8) = %d, golden has %d", got, len(want))
	}
	dst := make([]byte, len(want))
	st, err := QuantizeMatrix(dst, w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, want) {
		t.Fatalf("packed bytes differ from the golden vector\n got %x\nwant %x", dst, want)
	}
	wantStats := QuantStats{Values: 24, PaddedValues: 3 * 248, ZeroBlocks: 1, MaxAbsErr: 0.5}
	if st != wantStats {
		t.Errorf("stats = %+v, want %+v", st, wantStats)
	}
	deq := make([]float32, rows*cols)
	DequantizeMatrix(deq, dst, rows, cols)
	wantDeq := []float32{1, 2, -1, 7, -7, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, -3.5, -0.5, 0.5, 1.5, -2.5, 0, 1, 3.5}
	for i := range deq {
		if deq[i] != wantDeq[i] {
			t.Errorf("dequant[%d] = %v, want %v", i, deq[i], wantDeq[i])
		}
	}
	if got := ScaleBits(dst, rows, cols, 2, 0); got != 0x3800 {
		t.Errorf("ScaleBits(row 2) = %#04x, want 0x3800", got)
	}
}

// TestQuantizeRoundTrip checks the error bound on many shapes and value
// distributions: every non-clamped value dequantises within s/2 of the
// original, with s the stored FP16 scale of its block.
func TestQuantizeRoundTrip(t *testing.T) {
	normal := func(std float64) func(r *rand.Rand, row, col int) float32 {
		return func(r *rand.Rand, _, _ int) float32 { return float32(r.NormFloat64() * std) }
	}
	cases := []struct {
		name       string
		rows, cols int
		gen        func(r *rand.Rand, row, col int) float32
		// expectations on the stats
		wantClamped, wantSatScales, wantZeroBlocks, wantUnderflow bool
	}{
		{name: "normal 0.02", rows: 16, cols: 512, gen: normal(0.02)},
		{name: "normal cols 352 (qwen-tiny down)", rows: 8, cols: 352, gen: normal(0.02)},
		{name: "normal cols 1408 (qwen down)", rows: 4, cols: 1408, gen: normal(0.02)},
		{name: "cols 1", rows: 5, cols: 1, gen: normal(1)},
		{name: "cols 257", rows: 3, cols: 257, gen: normal(1)},
		{name: "uniform", rows: 8, cols: 768, gen: func(r *rand.Rand, _, _ int) float32 { return float32(r.Float64()*2 - 1) }},
		{name: "outliers", rows: 8, cols: 1024, gen: func(r *rand.Rand, _, _ int) float32 {
			if r.IntN(200) == 0 {
				return float32(r.NormFloat64() * 5)
			}
			return float32(r.NormFloat64() * 0.02)
		}},
		{name: "zero blocks", rows: 6, cols: 1000, wantZeroBlocks: true, gen: func(r *rand.Rand, row, col int) float32 {
			if (row+col/256)%2 == 0 {
				return 0
			}
			return float32(r.NormFloat64())
		}},
		{name: "sparse", rows: 4, cols: 512, gen: func(r *rand.Rand, _, _ int) float32 {
			if r.IntN(50) != 0 {
				return 0
			}
			return float32(r.NormFloat64())
		}},
		{name: "subnormal scales", rows: 8, cols: 512, gen: normal(2e-7), wantClamped: true},
		{name: "underflowing scales", rows: 2, cols: 256, gen: normal(1e-10), wantUnderflow: true},
		{name: "saturated scales", rows: 2, cols: 256, gen: normal(1e6), wantClamped: true, wantSatScales: true},
		{name: "exact multiples", rows: 4, cols: 256, gen: func(r *rand.Rand, _, _ int) float32 {
			return float32(r.IntN(15)-7) * 0.125 // q*s exactly, with s = 0.125 when a 7 is present
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(i), 42))
			w := make([]float32, tc.rows*tc.cols)
			for row := 0; row < tc.rows; row++ {
				for col := 0; col < tc.cols; col++ {
					w[row*tc.cols+col] = tc.gen(r, row, col)
				}
			}
			dst := make([]byte, Int4MatrixBytes(tc.rows, tc.cols))
			st, err := QuantizeMatrix(dst, w, tc.rows, tc.cols)
			if err != nil {
				t.Fatal(err)
			}
			deq := make([]float32, len(w))
			DequantizeMatrix(deq, dst, tc.rows, tc.cols)

			cp := PaddedCols(tc.cols)
			blocks := cp / BlockSize
			var want QuantStats
			want.Values = int64(len(w))
			want.PaddedValues = int64(tc.rows * (cp - tc.cols))
			for row := 0; row < tc.rows; row++ {
				for b := 0; b < blocks; b++ {
					bits := ScaleBits(dst, tc.rows, tc.cols, row, b)
					s := half.F16ToF32(bits)
					if math.IsInf(float64(s), 0) || s != s || s < 0 {
						t.Fatalf("row %d block %d: scale %v is not a finite non-negative FP16", row, b, s)
					}
					var maxAbs float32
					for c := b * BlockSize; c < min((b+1)*BlockSize, tc.cols); c++ {
						maxAbs = max(maxAbs, float32(math.Abs(float64(w[row*tc.cols+c]))))
					}
					wantBits, sat := half.F32ToF16Sat(maxAbs / 7)
					if bits != wantBits {
						t.Fatalf("row %d block %d: scale bits %#04x, want FP16(max|w|/7 = %g) = %#04x", row, b, bits, maxAbs/7, wantBits)
					}
					if sat {
						want.SaturatedScales++
					}
					switch {
					case maxAbs == 0:
						want.ZeroBlocks++
					case s == 0:
						want.UnderflowBlocks++
					}
					// padding nibbles hold q = 0
					for c := tc.cols; c < (b+1)*BlockSize; c++ {
						if c < b*BlockSize {
							continue
						}
						v := dst[row*cp/2+c/2]
						if c&1 == 1 {
							v >>= 4
						}
						if v&15 != 8 {
							t.Fatalf("row %d padding col %d: nibble %d, want 8", row, c, v&15)
						}
					}
					for c := b * BlockSize; c < min((b+1)*BlockSize, tc.cols); c++ {
						x, got := w[row*tc.cols+c], deq[row*tc.cols+c]
						e := math.Abs(float64(got) - float64(x))
						want.MaxAbsErr = max(want.MaxAbsErr, e)
						if s == 0 {
							if got != 0 {
								t.Fatalf("[%d,%d]: scale 0 but dequantised %v", row, c, got)
							}
							continue
						}
						if q := math.RoundToEven(float64(x / s)); q > 7 || q < -8 {
							want.ClampedValues++
							if want := float32(max(-8, min(7, q))) * s; got != want {
								t.Fatalf("[%d,%d]: clamped value %v dequantised to %v, want %v", row, c, x, got, want)
							}
							continue
						}
						if bound := float64(s)/2 + float64(s)*1e-6; e > bound {
							t.Fatalf("[%d,%d]: |%v - %v| = %g > s/2 = %g (s = %g)", row, c, got, x, e, float64(s)/2, s)
						}
					}
				}
			}
			if st != want {
				t.Errorf("stats = %+v\n       want %+v", st, want)
			}
			if tc.wantClamped != (st.ClampedValues > 0) || tc.wantSatScales != (st.SaturatedScales > 0) ||
				tc.wantZeroBlocks != (st.ZeroBlocks > 0) || tc.wantUnderflow != (st.UnderflowBlocks > 0) {
				t.Errorf("stats %+v do not exercise what the case is for (clamped %v, saturated %v, zero %v, underflow %v)",
					st, tc.wantClamped, tc.wantSatScales, tc.wantZeroBlocks, tc.wantUnderflow)
			}
		})
	}
}

func TestQuantizeRejects(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	cases := []struct {
		name       string
		rows, cols int
		w          []float32
		dstLen     int // 0 means the right size
		wantErr    string
		nonFinite  bool
	}{
		{name: "NaN", rows: 2, cols: 300, w: withAt(2*300, 300+257, nan), wantErr: "row 1 col 257", nonFinite: true},
		{name: "+Inf", rows: 1, cols: 4, w: withAt(4, 3, inf), wantErr: "row 0 col 3", nonFinite: true},
		{name: "-Inf", rows: 1, cols: 4, w: withAt(4, 0, -inf), wantErr: "row 0 col 0", nonFinite: true},
		{name: "short weights", rows: 2, cols: 4, w: make([]float32, 7), wantErr: "7 weights"},
		{name: "wrong dst", rows: 1, cols: 4, w: make([]float32, 4), dstLen: 10, wantErr: "dst has 10 bytes"},
		{name: "bad shape", rows: 0, cols: 4, w: nil, wantErr: "bad shape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.dstLen
			if n == 0 && tc.rows > 0 {
				n = Int4MatrixBytes(tc.rows, tc.cols)
			}
			_, err := QuantizeMatrix(make([]byte, n), tc.w, tc.rows, tc.cols)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrNonFinite); got != tc.nonFinite {
				t.Errorf("errors.Is(err, ErrNonFinite) = %v, want %v", got, tc.nonFinite)
			}
		})
	}
}

func withAt(n, i int, v float32) []float32 {
	w := make([]float32, n)
	for j := range w {
		w[j] = 0.01 * float32(j%7)
	}
	w[i] = v
	return w
}

func TestEncodeFP16Matrix(t *testing.T) {
	cases := []struct {
		name    string
		w       []float32
		want    []uint16
		sat     int64
		wantErr string
	}{
		{name: "exact", w: []float32{0, 1, -2, 0.5, 65504, 6.1035156e-05}, want: []uint16{0, 0x3c00, 0xc000, 0x3800, 0x7bff, 0x0400}},
		{name: "round half even", w: []float32{1 + 1.0/2048, 1 + 3.0/2048}, want: []uint16{0x3c00, 0x3c02}},
		{name: "saturate", w: []float32{1e5, -1e9, 65519}, want: []uint16{0x7bff, 0xfbff, 0x7bff}, sat: 2},
		{name: "NaN", w: []float32{1, float32(math.NaN())}, wantErr: "index 1"},
		{name: "Inf", w: []float32{float32(math.Inf(-1))}, wantErr: "index 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, 2*len(tc.w))
			sat, err := EncodeFP16Matrix(dst, tc.w)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrNonFinite) {
					t.Fatalf("err = %v, want ErrNonFinite containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sat != tc.sat {
				t.Errorf("saturated = %d, want %d", sat, tc.sat)
			}
			for i, w := range tc.want {
				if got := binary.LittleEndian.Uint16(dst[2*i:]); got != w {
					t.Errorf("value %d (%v): bits %#04x, want %#04x", i, tc.w[i], got, w)
				}
			}
			back := make([]float32, len(tc.w))
			DecodeFP16Matrix(back, dst)
			for i := range back {
				if back[i] != half.F16ToF32(tc.want[i]) {
					t.Errorf("decode %d: %v", i, back[i])
				}
			}
		})
	}
}

func TestRecordLayout(t *testing.T) {
	cases := []struct {
		name        string
		scheme      Scheme
		hidden, ffn int
		want        RecordLayout
	}{
		{
			name: "olmoe-1b-7b int4", scheme: SchemeInt4, hidden: 2048, ffn: 1024,
			want: RecordLayout{Scheme: SchemeInt4,
				Gate: MatrixLayout{Rows: 1024, Cols: 2048, ColsPadded: 2048, Offset: 0, Bytes: 1064960, ScalesOffset: 1048576},
				Up:   MatrixLayout{Rows: 1024, Cols: 2048, ColsPadded: 2048, Offset: 1064960, Bytes: 1064960, ScalesOffset: 1048576},
				Down: MatrixLayout{Rows: 2048, Cols: 1024, ColsPadded: 1024, Offset: 2129920, Bytes: 1064960, ScalesOffset: 1048576},
				Size: 3194880},
		},
		{
			name: "qwen15-moe-a27b int4 (down padded 1408->1536)", scheme: SchemeInt4, hidden: 2048, ffn: 1408,
			want: RecordLayout{Scheme: SchemeInt4,
				Gate: MatrixLayout{Rows: 1408, Cols: 2048, ColsPadded: 2048, Offset: 0, Bytes: 1464320, ScalesOffset: 1441792},
				Up:   MatrixLayout{Rows: 1408, Cols: 2048, ColsPadded: 2048, Offset: 1464320, Bytes: 1464320, ScalesOffset: 1441792},
				Down: MatrixLayout{Rows: 2048, Cols: 1408, ColsPadded: 1536, Offset: 2928640, Bytes: 1597440, ScalesOffset: 1572864},
				Size: 4526080},
		},
		{
			name: "qwen2moe-tiny int4 (gate not 256-aligned)", scheme: SchemeInt4, hidden: 256, ffn: 352,
			want: RecordLayout{Scheme: SchemeInt4,
				Gate: MatrixLayout{Rows: 352, Cols: 256, ColsPadded: 256, Offset: 0, Bytes: 45760, ScalesOffset: 45056},
				Up:   MatrixLayout{Rows: 352, Cols: 256, ColsPadded: 256, Offset: 45824, Bytes: 45760, ScalesOffset: 45056},
				Down: MatrixLayout{Rows: 256, Cols: 352, ColsPadded: 512, Offset: 91648, Bytes: 66560, ScalesOffset: 65536},
				Size: 158208},
		},
		{
			name: "olmoe-1b-7b fp16", scheme: SchemeFP16, hidden: 2048, ffn: 1024,
			want: RecordLayout{Scheme: SchemeFP16,
				Gate: MatrixLayout{Rows: 1024, Cols: 2048, ColsPadded: 2048, Offset: 0, Bytes: 4194304},
				Up:   MatrixLayout{Rows: 1024, Cols: 2048, ColsPadded: 2048, Offset: 4194304, Bytes: 4194304},
				Down: MatrixLayout{Rows: 2048, Cols: 1024, ColsPadded: 1024, Offset: 8388608, Bytes: 4194304},
				Size: 12582912},
		},
		{
			name: "odd fp16", scheme: SchemeFP16, hidden: 100, ffn: 3,
			want: RecordLayout{Scheme: SchemeFP16,
				Gate: MatrixLayout{Rows: 3, Cols: 100, ColsPadded: 100, Offset: 0, Bytes: 600},
				Up:   MatrixLayout{Rows: 3, Cols: 100, ColsPadded: 100, Offset: 768, Bytes: 600},
				Down: MatrixLayout{Rows: 100, Cols: 3, ColsPadded: 3, Offset: 1536, Bytes: 600},
				Size: 2304},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewRecordLayout(tc.scheme, tc.hidden, tc.ffn)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("layout\n got %+v\nwant %+v", got, tc.want)
			}
			end := 0
			for i, m := range got.Matrices() {
				if m.Offset%256 != 0 || m.Offset < end {
					t.Errorf("matrix %d at %d: not 256-aligned or overlaps the previous one (ends %d)", i, m.Offset, end)
				}
				end = m.Offset + m.Bytes
				rowBytes := m.Cols * 2
				if tc.scheme == SchemeInt4 {
					rowBytes = m.ColsPadded / 2
					if m.ScalesOffset != m.Rows*rowBytes || m.Bytes != m.ScalesOffset+m.Rows*m.Blocks()*2 {
						t.Errorf("matrix %d: scales at %d, bytes %d inconsistent", i, m.ScalesOffset, m.Bytes)
					}
				}
				if m.RowBytes() != rowBytes {
					t.Errorf("matrix %d: RowBytes %d, want %d", i, m.RowBytes(), rowBytes)
				}
			}
			if got.Size%256 != 0 || got.Size < end || got.Size-end >= 256 {
				t.Errorf("record size %d: want the first multiple of 256 at or after %d", got.Size, end)
			}
		})
	}
	for _, bad := range []struct {
		s           Scheme
		hidden, ffn int
	}{{"int8", 256, 256}, {SchemeInt4, 0, 256}, {SchemeFP16, 256, -1}} {
		if _, err := NewRecordLayout(bad.s, bad.hidden, bad.ffn); err == nil {
			t.Errorf("NewRecordLayout(%q, %d, %d): no error", bad.s, bad.hidden, bad.ffn)
		}
	}
}

func TestPaddedCols(t *testing.T) {
	for _, c := range []struct{ in, want int }{{1, 256}, {255, 256}, {256, 256}, {257, 512}, {352, 512}, {1408, 1536}, {2048, 2048}} {
		if got := PaddedCols(c.in); got != c.want {
			t.Errorf("PaddedCols(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestParseScheme(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Scheme
		ok   bool
	}{{"int4", SchemeInt4, true}, {"qpack-int4-b256-v1", SchemeInt4, true}, {"fp16", SchemeFP16, true}, {"int8", "", false}, {"", "", false}} {
		got, err := ParseScheme(c.in)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("ParseScheme(%q) = %q, %v", c.in, got, err)
		}
	}
}
