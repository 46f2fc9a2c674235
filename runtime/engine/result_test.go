package engine

import "testing"

// TestResultFinishCapsPrefill: finish derives the timing summary from
// TokenNs and caps a device-timed prefill at the TTFT (clock rates), and
// leaves an untimed or shorter prefill as it is.
func TestResultFinishCapsPrefill(t *testing.T) {
	cases := []struct {
		name    string
		prefill float64
		timed   bool
		want    float64
	}{
		{"within", 1.5, true, 1.5},
		{"equal", 2.231614079, true, 2.231614079},
		{"past the ttft by drift", 2.231616134, true, 2.231614079},
		{"untimed", 0, false, 0},
		{"untimed value kept", 9, false, 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{TokenNs: []int64{2231614079, 2231614079 + 1e6}, PrefillSeconds: tc.prefill, PrefillTimed: tc.timed}.finish()
			if r.TTFTSeconds != 2.231614079 || r.DecodeSeconds != 0.001 {
				t.Fatalf("ttft %v decode %v", r.TTFTSeconds, r.DecodeSeconds)
			}
			if r.PrefillSeconds != tc.want {
				t.Fatalf("prefill %v, want %v", r.PrefillSeconds, tc.want)
			}
		})
	}
}
