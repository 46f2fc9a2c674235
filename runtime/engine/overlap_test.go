package engine

import (
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestOverlapOptions: overlap off ("" or "off") loads and reports off;
// hit-compute needs graph-segmented steps, which the CPU backend never
// runs, so every way of asking for it here is a clear error naming
// graph-segmented, and an unknown mode names the modes.
func TestOverlapOptions(t *testing.T) {
	for _, mode := range []string{"", OverlapOff} {
		for _, capacity := range []int{0, 6} {
			l := loadEngine(t, "olmoe-tiny", qpack.SchemeInt4, LoadOptions{Capacity: capacity, Overlap: mode})
			if got := l.OverlapMode(); got != OverlapOff {
				t.Errorf("overlap %q, capacity %d: runs overlap %s", mode, capacity, got)
			}
			if l.StepMode() != StepOps {
				t.Errorf("overlap %q, capacity %d: step mode %s on the CPU", mode, capacity, l.StepMode())
			}
		}
	}
	if l := loadEngine(t, "olmoe-tiny", qpack.SchemeInt4, LoadOptions{Capacity: 6, Overlap: OverlapOff, Prefetch: PrefetchNextLayer}); l.OverlapMode() != OverlapOff || l.PrefetchMode() != PrefetchNextLayer {
		t.Errorf("overlap off with prefetch next-layer runs overlap %s, prefetch %s", l.OverlapMode(), l.PrefetchMode())
	}

	cases := []struct {
		name string
		o    LoadOptions
		want []string
	}{
		{"cpu backend, default step mode", LoadOptions{Capacity: 6, Overlap: OverlapHitCompute}, []string{OverlapHitCompute, StepGraphSegmented}},
		{"cpu backend, auto", LoadOptions{Capacity: 6, Overlap: OverlapHitCompute, StepMode: "auto"}, []string{OverlapHitCompute, StepGraphSegmented}},
		{"cpu backend, graph-segmented", LoadOptions{Capacity: 6, Overlap: OverlapHitCompute, StepMode: StepGraphSegmented}, []string{OverlapHitCompute, StepGraphSegmented}},
		{"cpu backend, full residency", LoadOptions{Overlap: OverlapHitCompute}, []string{OverlapHitCompute, StepGraphSegmented}},
		{"step mode ops", LoadOptions{Capacity: 6, Overlap: OverlapHitCompute, StepMode: StepOps}, []string{OverlapHitCompute, StepGraphSegmented, StepOps}},
		{"step mode graph-full", LoadOptions{Capacity: 6, Overlap: OverlapHitCompute, StepMode: StepGraphFull}, []string{OverlapHitCompute, StepGraphSegmented, StepGraphFull}},
		{"step mode graph-wait", LoadOptions{Capacity: 6, Overlap: OverlapHitCompute, StepMode: StepGraphWait}, []string{OverlapHitCompute, StepGraphSegmented, StepGraphWait}},
		{"prefetch next-layer", LoadOptions{Capacity: 6, Overlap: OverlapHitCompute, Prefetch: PrefetchNextLayer}, []string{OverlapHitCompute, "graph-segmented", PrefetchNextLayer}},
		{"unknown", LoadOptions{Capacity: 6, Overlap: "bogus"}, []string{`overlap "bogus": want one of [off hit-compute]`}},
	}
	be := cpu.New(1)
	dev := cache.NewCPUDevice(be)
	defer dev.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Load(be, dev, testArtifact(t, "olmoe-tiny", qpack.SchemeInt4), c.o)
			if err == nil {
				l.Close()
				t.Fatalf("loaded (overlap %s)", l.OverlapMode())
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

// TestParseOverlap: "" is off; the modes parse to themselves.
func TestParseOverlap(t *testing.T) {
	for in, want := range map[string]string{"": OverlapOff, OverlapOff: OverlapOff, OverlapHitCompute: OverlapHitCompute} {
		if got, err := ParseOverlap(in); err != nil || got != want {
			t.Errorf("ParseOverlap(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseOverlap("hit"); err == nil || !strings.Contains(err.Error(), "hit-compute") {
		t.Errorf("ParseOverlap(%q): %v, want an error naming the modes", "hit", err)
	}
}
