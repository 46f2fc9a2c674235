package cuda

import (
	"math"
	"testing"
)

// TestSummariseAttLaunch: the trace summary's spans, spreads, late blocks
// and SM counts from hand-made launches (ns on the device clock).
func TestSummariseAttLaunch(t *testing.T) {
	b := func(entry, start, end uint64, sm int) attBlock {
		return attBlock{entry: entry, start: start, end: end, sm: sm}
	}
	for _, tc := range []struct {
		name   string
		blocks []attBlock
		want   attLaunch
	}{
		{"one wave, two SMs", []attBlock{b(1000, 2000, 6000, 0), b(1000, 2000, 7000, 0), b(1500, 2500, 6500, 1)},
			attLaunch{span: 6, run: 5, blockMean: 13.0 / 3, late: 0, maxPerSM: 2, sms: 2, startSpread: 0.5, endSpread: 1, firstStart: 2000, lastEnd: 7000}},
		{"a second wave", []attBlock{b(0, 1000, 3000, 0), b(0, 1000, 3000, 1), b(3100, 3200, 5200, 0)},
			attLaunch{span: 5.2, run: 4.2, blockMean: 2, late: 1, maxPerSM: 2, sms: 2, startSpread: 2.2, endSpread: 2.2, firstStart: 1000, lastEnd: 5200}},
		{"one block", []attBlock{b(10, 20, 30, 5)},
			attLaunch{span: 0.02, run: 0.01, blockMean: 0.01, late: 0, maxPerSM: 1, sms: 1, firstStart: 20, lastEnd: 30}},
		{"none", nil, attLaunch{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summariseAttLaunch(tc.blocks)
			near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
			w := tc.want
			if !near(got.span, w.span) || !near(got.run, w.run) || !near(got.blockMean, w.blockMean) ||
				!near(got.startSpread, w.startSpread) || !near(got.endSpread, w.endSpread) ||
				got.late != w.late || got.maxPerSM != w.maxPerSM || got.sms != w.sms || len(got.blocks) != len(tc.blocks) ||
				got.firstStart != w.firstStart || got.lastEnd != w.lastEnd {
				t.Fatalf("got span %.3f run %.3f block %.3f starts %.3f ends %.3f late %d max/SM %d SMs %d first start %d last end %d, want %+v",
					got.span, got.run, got.blockMean, got.startSpread, got.endSpread, got.late, got.maxPerSM, got.sms, got.firstStart, got.lastEnd, w)
			}
		})
	}
}

func TestAttBetween(t *testing.T) {
	l := func(start, end uint64) attLaunch { return attLaunch{firstStart: start, lastEnd: end} }
	for _, tc := range []struct {
		name string
		ls   []attLaunch
		want float64
	}{
		{"none", nil, 0},
		{"one layer", []attLaunch{l(0, 5000)}, 0},
		{"three layers", []attLaunch{l(0, 5000), l(7000, 9000), l(12500, 13000)}, 5.5},
		// a launch that starts before the last one ended (the clock's
		// order, not an error): a negative gap counts as negative
		{"overlap", []attLaunch{l(0, 5000), l(4000, 9000)}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := attBetween(tc.ls); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("attBetween = %v, want %v", got, tc.want)
			}
		})
	}
}
