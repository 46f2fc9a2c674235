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
