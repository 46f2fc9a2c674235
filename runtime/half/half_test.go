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
