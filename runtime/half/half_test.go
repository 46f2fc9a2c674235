package half

import (
	"math"
	"testing"
)

func TestF16RoundTrip(t *testing.T) {
	for i := 0; i < 65536; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := F32ToF16(f); got != h {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, got)
		}
	}
}

func TestF32ToF16Sat(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want uint16
		sat  bool
	}{
		{"one", 1, 0x3c00, false},
		{"max", 65504, 0x7bff, false},
		{"rounds up past max", 65520, 0x7bff, true},
		{"huge", 1e10, 0x7bff, true},
		{"huge negative", -1e10, 0xfbff, true},
		{"inf", float32(math.Inf(1)), 0x7bff, true},
		{"tiny to zero", 1e-10, 0x0000, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, sat := F32ToF16Sat(c.in)
			if got != c.want || sat != c.sat {
				t.Fatalf("F32ToF16Sat(%g) = %#04x,%v want %#04x,%v", c.in, got, sat, c.want, c.sat)
			}
		})
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"half-way rounds to even (down)", math.Float32frombits(0x3f808000), 0x3f80},
		{"half-way rounds to even (up)", math.Float32frombits(0x3f818000), 0x3f82},
		{"above half rounds up", math.Float32frombits(0x3f808001), 0x3f81},
		{"negative", -2, 0xc000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := F32ToBF16(c.in); got != c.want {
				t.Fatalf("F32ToBF16(%g) = %#04x want %#04x", c.in, got, c.want)
			}
			if back := BF16ToF32(c.want); F32ToBF16(back) != c.want {
				t.Fatalf("BF16 round trip of %#04x failed", c.want)
			}
		})
	}
	if !math.IsNaN(float64(BF16ToF32(F32ToBF16(float32(math.NaN()))))) {
		t.Fatal("NaN did not survive BF16")
	}
}

// TestF32ToF16RoundsToNearestEven pins the rounding the FP16 KV cache
// relies on (CUDA's __float2half_rn): ties to even, gradual underflow,
// and the largest finite value.
func TestF32ToF16RoundsToNearestEven(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},               // tie between 1 and 1+2^-10: even (1)
		{1 + 3.0/2048, 0x3c02},               // tie: even (1+2^-9)
		{-(1 + 1.0/2048), 0xbc00},            // the same below zero
		{1 + 1.0/2048 + 1.0/(1<<20), 0x3c01}, // above the tie: up
		{2049, 0x6800},                       // tie at ulp 2: 2048
		{2051, 0x6802},                       // tie between 2050 (odd) and 2052 (even): 2052
		{65519, 0x7bff},                      // below the overflow threshold: 65504
		{3.0 / (1 << 25), 0x0002},            // 1.5 subnormal ulps: 2
		{1.0 / (1 << 26), 0x0000},            // a quarter ulp: +0
		{-1e-8, 0x8000},                      // -0
	} {
		if got := F32ToF16(c.in); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestRowShiftF16(t *testing.T) {
	cases := []struct {
		name  string
		in    []float32
		want  []float32
		shift int
	}{
		// max 1.0: E = 127, s = 14; 1 + 2^-11 is halfway between FP16
		// neighbours 1 and 1 + 2^-10 and rounds to even (1).
		{"unit row", []float32{1, -0.5, 1 + 1.0/2048, 0.25}, []float32{1, -0.5, 1, 0.25}, 14},
		// max 3: the row keeps 11 bits relative to 2 (spacing 2^-9 at 2,
		// 2^-10 in [1, 2)); 1 + 2^-11 rounds to 1.
		{"three", []float32{3, 1 + 1.0/2048, 1 + 3.0/2048}, []float32{3, 1, 1 + 2.0/1024}, 13},
		// FP16's smallest subnormal, 2^-24, is 2^-38 of the largest's
		// binade at the shift: 2^-40 of it rounds to zero, 2^-30 is a
		// subnormal kept exactly (a power of two), and 2^-30·1.1 keeps 9
		// bits (2^-16·1.1 in units of 2^-24 is 281.6: 282/256).
		{"below the subnormals", []float32{1, float32(math.Ldexp(1, -40))}, []float32{1, 0}, 14},
		{"subnormal kept", []float32{1, float32(math.Ldexp(1, -30))}, []float32{1, float32(math.Ldexp(1, -30))}, 14},
		{"subnormal rounded", []float32{1, float32(math.Ldexp(1.1, -30))}, []float32{1, float32(math.Ldexp(282.0/256, -30))}, 14},
		{"zero row", []float32{0, 0}, []float32{0, 0}, 126},
		// A large row: max 2^20 (E = 147), s = -6: 1 + 2^-4 and 3 are
		// exact at 2^-6 (FP16's spacing in [1, 2) is 2^-10).
		{"large", []float32{1 << 20, 1 + 1.0/16, 3}, []float32{1 << 20, 1 + 1.0/16, 3}, -6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := append([]float32(nil), c.in...)
			if s := RowShiftF16(row); s != c.shift {
				t.Errorf("shift %d, want %d", s, c.shift)
			}
			for i := range row {
				if row[i] != c.want[i] {
					t.Errorf("value %d: %g -> %g, want %g", i, c.in[i], row[i], c.want[i])
				}
			}
		})
	}
}

func TestRowShiftF16Properties(t *testing.T) {
	// Every rounded value is within half an FP16 step of its input at the
	// row's shift, and rounding twice changes nothing.
	row := make([]float32, 2048)
	for i := range row {
		row[i] = float32(math.Sin(float64(i)*0.37)) * float32(math.Exp(float64(i%17)-8))
	}
	orig := append([]float32(nil), row...)
	s := RowShiftF16(row)
	var mx float64
	for _, v := range orig {
		mx = math.Max(mx, math.Abs(float64(v)))
	}
	step := math.Ldexp(1, 4-s) // the spacing of FP16 in [2^14, 2^15), the largest binade, at 2^-s
	for i := range row {
		if d := math.Abs(float64(row[i]) - float64(orig[i])); d > step/2 {
			t.Fatalf("value %d: %g -> %g, off by %g (> half a step %g)", i, orig[i], row[i], d, step/2)
		}
	}
	again := append([]float32(nil), row...)
	if s2 := RowShiftF16(again); s2 != s {
		t.Fatalf("shift %d the second time, %d the first", s2, s)
	}
	for i := range row {
		if again[i] != row[i] {
			t.Fatalf("value %d: %g rounds again to %g", i, row[i], again[i])
		}
	}
}

func TestChunkShiftF16(t *testing.T) {
	// Each 32-value chunk keeps its own shift: a chunk of small values next
	// to one of large values keeps 11 bits, where one shift for the row
	// (RowShiftF16) would flush it.
	cases := []struct {
		name string
		n    int
		at   func(i int) float32
	}{
		{"two binades apart", 64, func(i int) float32 {
			if i < 32 {
				return 1 << 20
			}
			return float32(math.Ldexp(1+float64(i)/1024, -30))
		}},
		{"ragged tail", 70, func(i int) float32 { return float32(math.Sin(float64(i)*0.71)) * float32(math.Exp(float64(i%9)-4)) }},
		{"zeros", 40, func(int) float32 { return 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := make([]float32, c.n)
			for i := range row {
				row[i] = c.at(i)
			}
			got := append([]float32(nil), row...)
			ChunkShiftF16(got)
			for lo := 0; lo < c.n; lo += ChunkF16 {
				want := append([]float32(nil), row[lo:min(lo+ChunkF16, c.n)]...)
				RowShiftF16(want)
				for j, w := range want {
					if got[lo+j] != w {
						t.Fatalf("value %d: %g -> %g, want %g (its chunk rounded alone)", lo+j, row[lo+j], got[lo+j], w)
					}
				}
			}
		})
	}
	// The small chunk of the first case is exact at its own shift and
	// would lose every bit at the row's.
	row := make([]float32, 64)
	for i := range row {
		row[i] = cases[0].at(i)
	}
	chunked, whole := append([]float32(nil), row...), append([]float32(nil), row...)
	ChunkShiftF16(chunked)
	RowShiftF16(whole)
	if chunked[40] != row[40] || whole[40] != 0 {
		t.Fatalf("value 40 (%g): chunked %g (want it kept), whole-row %g (want 0)", row[40], chunked[40], whole[40])
	}
}
