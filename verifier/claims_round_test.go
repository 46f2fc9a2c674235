package verifier

import "testing"

func TestRoundHalfAway(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		d    int
		want float64
	}{
		{2.675, 2, 2.68},   // the float64 is 2.67499999...; the written decimal rounds up
		{1.005, 2, 1.01},   // likewise
		{-2.675, 2, -2.68}, // away from zero
		{2.5, 0, 3},
		{-2.5, 0, -3},
		{0.5, 0, 1},
		{0.49999999999999994, 0, 0},
		{23.004999, 2, 23},
		{9.995, 2, 10},
		{99.5, 0, 100},
		{123.456, 5, 123.456}, // fewer digits than asked: unchanged
		{1e21, 2, 1e21},
		{5e-324, 2, 0},
		{0, 3, 0},
		{61.26499999, 2, 61.26},
		{35.015, 2, 35.02},
	} {
		if got := roundHalfAway(tc.x, tc.d); got != tc.want {
			t.Errorf("roundHalfAway(%v, %d) = %v, want %v", tc.x, tc.d, got, tc.want)
		}
	}
}
