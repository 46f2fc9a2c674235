//go:build cuda

package cuda

import (
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// tuningMirrors are the backend's copies of its tuning that other
// goroutines read (atomics); setTuning writes them.
func tuningMirrors(b *Backend) [2]bool {
	return [2]bool{b.routeOff.Load(), b.attnInRowsOff.Load()}
}

// TestFreshBackendRunsTheDefaultTuning: a backend as Open returns it, one
// setTuning never touched (every worker's, generate's), runs what the
// tests and benchmarks call the default (tuning{}): its mirrors equal
// those setTuning(tuning{}) writes, and a batched prefill at full
// residency routes on the device (RouteRows). Until session 37 the mirror of device routing was false on
// a fresh backend, so every edition's prefill read each layer's routing
// back while BenchmarkPrefillModes (which sets a tuning) did not.
func TestFreshBackendRunsTheDefaultTuning(t *testing.T) {
	be, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := be.Close(); err != nil {
			t.Error(err)
		}
	}()
	fresh := tuningMirrors(be)
	if !be.RoutesOnDevice(qpack.SchemeInt4) {
		t.Errorf("a fresh backend does not route int4 experts on the device")
	}
	art := testArtifact(t, "olmoe-tiny", qpack.SchemeInt4)
	prompt := promptIDs(strings.Repeat("A fresh backend routes on the device. ", 2))
	req := engine.Request{Prompt: prompt, Tokens: 4, SuppressEOS: true}
	generate(t, be, be.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", Prefill: engine.PrefillBatched}, req)
	var routes int
	if err := be.o.do(func() error { routes = be.routeLaunches; return nil }); err != nil {
		t.Fatal(err)
	}
	if routes == 0 {
		t.Errorf("a fresh backend's batched prefill at full residency launched no RouteRows (it read the routing back)")
	}
	if err := be.o.do(func() error { return be.setTuning(tuning{}) }); err != nil {
		t.Fatal(err)
	}
	if got := tuningMirrors(be); got != fresh {
		t.Errorf("setTuning(tuning{}) sets the mirrors %v; a fresh backend has %v", got, fresh)
	}
}
