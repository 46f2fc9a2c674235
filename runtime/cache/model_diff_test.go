package cache

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/eviction"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// modelCounters projects the cache's counters onto eviction.Counters.
func modelCounters(c Counters) eviction.Counters {
	return eviction.Counters{
		Hits: c.Hits, Misses: c.Misses, Evictions: c.Evictions, H2DCopies: c.H2DCopies, H2DBytes: c.H2DBytes,
		PrefetchIssued: c.PrefetchIssued, PrefetchLoaded: c.PrefetchLoaded, PrefetchUsed: c.PrefetchUsed,
		PrefetchH2DBytes: c.PrefetchH2DBytes, PrefetchGroups: c.PrefetchGroups, PrefetchPredicted: c.PrefetchPredicted,
		PrefetchRouted: c.PrefetchRouted, PrefetchOverlap: c.PrefetchOverlap,
		LayerHits: c.LayerHits, LayerMisses: c.LayerMisses, LayerEvictions: c.LayerEvictions,
		LayerH2DBytes: c.LayerH2DBytes, LayerH2DCopies: c.LayerH2DCopies,
	}
}

// groupSampler draws routed groups of k distinct experts of n.
type groupSampler func(r *rand.Rand, n, k int) []int

// uniformGroup draws k distinct experts uniformly.
func uniformGroup(r *rand.Rand, n, k int) []int { return r.Perm(n)[:k] }

// zipfGroup draws k distinct experts with P(e) ∝ 1/(e+1)^s, in draw
// order (most popular experts tend to come first, like a router's top-k).
func zipfGroup(s float64) groupSampler {
	return func(r *rand.Rand, n, k int) []int {
		w := make([]float64, n)
		for e := range w {
			w[e] = 1 / math.Pow(float64(e+1), s)
		}
		var out []int
		for len(out) < k {
			total := 0.0
			for e, x := range w {
				if !slices.Contains(out, e) {
					total += x
				}
			}
			u := r.Float64() * total
			for e, x := range w {
				if slices.Contains(out, e) {
					continue
				}
				if u -= x; u <= 0 || e == n-1 {
					out = append(out, e)
					break
				}
			}
			// Guard rounding: the last unchosen expert.
			if len(out) < k && u > 0 {
				for e := n - 1; e >= 0; e-- {
					if !slices.Contains(out, e) {
						out = append(out, e)
						break
					}
				}
			}
		}
		return out
	}
}

// TestCacheMatchesModel is the differential test of eviction.Model: random
// and Zipf-routed sequences of leases (each served and released, as the
// sequential engine does), batched prefill waves (LeaseBatch; without
// prefetch, as in the engine) and prefetches through the real cache on the CPU
// device, and the same events through the model, for every registered
// policy, both placements and several capacities (including capacity ==
// group size and full residency): the counters agree after every event,
// and the cache's own trace is the sequence that was applied.
func TestCacheMatchesModel(t *testing.T) {
	const layers, experts, k, size = 3, 12, 3, 64
	samplers := []struct {
		name string
		draw groupSampler
	}{
		{"uniform", uniformGroup},
		{"zipf", zipfGroup(1.1)},
	}
	for _, policy := range eviction.Policies() {
		for _, placement := range eviction.Placements() {
			for _, capacity := range []int{k, k + 1, 7, experts} {
				for _, sm := range samplers {
					for _, prefetch := range []bool{false, true} {
						name := fmt.Sprintf("%s/%s/c%d/%s/prefetch=%v", policy, placement, capacity, sm.name, prefetch)
						t.Run(name, func(t *testing.T) {
							seed := uint64(capacity*1000 + len(policy)*10 + len(placement))
							runDifferential(t, rand.New(rand.NewPCG(seed, 7)), layers, experts, k, size, capacity, policy, placement, sm.draw, prefetch)
						})
					}
				}
			}
		}
	}
}

func runDifferential(t *testing.T, r *rand.Rand, layers, experts, k, size, capacity int, policy, placement string, draw groupSampler, prefetch bool) {
	t.Helper()
	c, err := New(newCPUDevice(t), newFakeAuthority(t, layers, experts, size), layers, experts, Options{
		Capacity: capacity, Spares: k, Staging: 2, GroupSize: k, Policy: policy, Placement: placement, Trace: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := c.Counters() // initial placement: preparation, not in the model
	m, err := eviction.NewModel(eviction.Config{Layers: layers, Experts: experts, Capacity: capacity,
		Policy: policy, Placement: placement, RecordBytes: int64(size), GroupSize: k})
	if err != nil {
		t.Fatal(err)
	}
	var applied []eviction.Event
	const steps = 120
	for step := 0; step < steps; step++ {
		for l := 0; l < layers; l++ {
			ev := eviction.Event{Kind: eviction.KindLease, Layer: l, IDs: draw(r, experts, k)}
			switch {
			case prefetch && r.IntN(3) == 0:
				ev = eviction.Event{Kind: eviction.KindPrefetch, Layer: l, IDs: draw(r, experts, 1+r.IntN(k))}
			case !prefetch && r.IntN(3) == 0:
				// A batched prefill's wave: up to a group of experts,
				// each read by 1..5 lookups.
				ids := draw(r, experts, 1+r.IntN(k))
				uses := make([]int, len(ids))
				for i := range uses {
					uses[i] = 1 + r.IntN(5)
				}
				ev = eviction.Event{Kind: eviction.KindBatch, Layer: l, IDs: ids, Uses: uses}
			}
			switch ev.Kind {
			case eviction.KindLease:
				_, release, err := device.Acquire(c, l, ev.IDs)
				if err != nil {
					t.Fatalf("step %d: lease %v of layer %d: %v", step, ev.IDs, l, err)
				}
				release()
			case eviction.KindBatch:
				ls, err := c.LeaseBatch(l, ev.IDs, ev.Uses)
				if err != nil {
					t.Fatalf("step %d: batch %v of layer %d: %v", step, ev.IDs, l, err)
				}
				if _, err := ls.Serve(); err != nil {
					t.Fatalf("step %d: serve batch %v of layer %d: %v", step, ev.IDs, l, err)
				}
				ls.Release()
			case eviction.KindPrefetch:
				if err := c.Prefetch(l, ev.IDs); err != nil {
					t.Fatalf("step %d: prefetch %v of layer %d: %v", step, ev.IDs, l, err)
				}
				c.quiesce() // the transaction runs behind the call; the model applies it at once
			}
			if err := m.Apply(ev); err != nil {
				t.Fatalf("step %d: model: %v", step, err)
			}
			applied = append(applied, ev)
			got, want := modelCounters(c.Counters().Sub(base)), m.Counters()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, %s %v of layer %d: cache counters\n%+v\nmodel\n%+v", step, ev.Kind, ev.IDs, l, got, want)
			}
			if res, _ := c.Resident(l); !slices.Equal(res, m.Resident(l)) {
				t.Fatalf("step %d: layer %d resident %v, model %v", step, l, res, m.Resident(l))
			}
		}
	}
	if tr := c.TakeTrace(); !reflect.DeepEqual(tr, applied) {
		t.Fatalf("trace of %d events differs from the %d applied", len(tr), len(applied))
	}
	if tr := c.TakeTrace(); tr != nil {
		t.Fatalf("second TakeTrace: %d events", len(tr))
	}
}

// TestTraceOff: without Options.Trace nothing is recorded.
func TestTraceOff(t *testing.T) {
	c, err := New(newCPUDevice(t), newFakeAuthority(t, 1, 4, 16), 1, 4, Options{Capacity: 2, Spares: 1, Staging: 1, GroupSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, release, err := device.Acquire(c, 0, []int{3}); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
	if tr := c.TakeTrace(); tr != nil {
		t.Fatalf("trace with tracing off: %v", tr)
	}
}

// TestTraceAllocations: recording a lease costs no allocation beyond the
// amortised appends of the trace.
func TestTraceAllocations(t *testing.T) {
	c, err := New(newCPUDevice(t), newFakeAuthority(t, 1, 4, 16), 1, 4, Options{Capacity: 4, Spares: 2, Staging: 1, GroupSize: 2, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids := []int{1, 2}
	for i := 0; i < 1<<12; i++ { // grow the arenas first
		c.record(eviction.KindLease, 0, ids)
	}
	c.TakeTrace()
	allocs := testing.AllocsPerRun(1000, func() { c.record(eviction.KindLease, 0, ids) })
	if allocs > 0.1 {
		t.Fatalf("%.2f allocations per recorded event", allocs)
	}
}
