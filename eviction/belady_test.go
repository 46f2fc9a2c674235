package eviction

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// leases builds one-layer lease events, one group per argument.
func leases(layer int, groups ...[]int) []Event {
	out := make([]Event, len(groups))
	for i, g := range groups {
		out[i] = Event{Kind: KindLease, Layer: layer, IDs: g}
	}
	return out
}

func g(ids ...int) []int { return ids }

func TestBeladyHandComputed(t *testing.T) {
	cases := []struct {
		name              string
		experts, capacity int
		placement         string
		events            []Event
		misses, evictions int64
		eventMisses       []int
		err               error
	}{
		// {0,1}: 2 evicts 1 (next use at 2, 0's at 1); 0 hits; 1 evicts
		// 0 (next use 4, 2's 3); 2 hits; 0 evicts 1 (1 and 2 are never
		// used again: the lower id). LRU misses all five.
		{"single ids", 4, 2, "", leases(0, g(2), g(0), g(1), g(2), g(0)), 3, 3, []int{1, 0, 1, 0, 1}, nil},
		// {0,1,2}: [3 4] evicts 2 (next use 2) then 0 (tie with 1 at
		// event 1: the lower id); [0 1] evicts 4 (never again) for 0;
		// [2 3] evicts 0 (0 and 1 never again: the lower id) for 2.
		{"groups", 5, 3, "", leases(0, g(3, 4), g(0, 1), g(2, 3)), 4, 4, []int{2, 1, 1}, nil},
		{"never used again goes first", 3, 2, "", leases(0, g(2), g(1), g(2)), 1, 1, []int{1, 0, 0}, nil},
		{"room left: no eviction", 4, 4, "", leases(0, g(3), g(2)), 0, 0, []int{0, 0}, nil},
		// strided {0,2} of 4: 1 evicts 0 (never again), 3 evicts 1.
		{"strided placement", 4, 2, "strided", leases(0, g(1, 2), g(3, 2)), 2, 2, []int{1, 1}, nil},
		{"prefetch ignored", 4, 2, "", []Event{
			{Kind: KindLease, Layer: 0, IDs: g(2)}, {Kind: KindPrefetch, Layer: 0, IDs: g(1)},
			{Kind: KindLease, Layer: 0, IDs: g(0)}, {Kind: KindLease, Layer: 0, IDs: g(1)},
		}, 2, 2, []int{1, 0, 0, 1}, nil},
		{"group larger than capacity", 4, 1, "", leases(0, g(1, 2)), 0, 0, nil, ErrEvent},
		{"repeated expert", 4, 2, "", leases(0, g(3, 3)), 0, 0, nil, ErrEvent},
		{"layer out of range", 4, 2, "", leases(1, g(3)), 0, 0, nil, ErrEvent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Belady(Config{Layers: 1, Experts: tc.experts, Capacity: tc.capacity, Placement: tc.placement}, tc.events)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Misses != tc.misses || r.Evictions != tc.evictions || !slices.Equal(r.EventMisses, tc.eventMisses) {
				t.Errorf("misses %d evictions %d per event %v; want %d %d %v", r.Misses, r.Evictions, r.EventMisses, tc.misses, tc.evictions, tc.eventMisses)
			}
			if r.LayerMisses[0] != r.Misses || r.LayerEvictions[0] != r.Evictions {
				t.Errorf("layer counters %v %v, totals %d %d", r.LayerMisses, r.LayerEvictions, r.Misses, r.Evictions)
			}
		})
	}
}

// traceGen draws one routed group of k distinct experts of n.
type traceGen func(r *rand.Rand, step, n, k int) []int

// uniformGroups routes k distinct experts uniformly.
func uniformGroups(r *rand.Rand, _, n, k int) []int { return r.Perm(n)[:k] }

// zipfGroups routes k distinct experts with P(rank i) ~ 1/(i+1)^s over a
// fixed permutation of the ids (stationary: the same every step).
func zipfGroups(s float64, perm []int) traceGen {
	var cdf []float64
	return func(r *rand.Rand, _, n, k int) []int {
		if len(cdf) != n {
			cdf = make([]float64, n)
			sum := 0.0
			for i := range cdf {
				sum += 1 / math.Pow(float64(i+1), s)
				cdf[i] = sum
			}
			for i := range cdf {
				cdf[i] /= sum
			}
		}
		var out []int
		for len(out) < k {
			i, _ := slices.BinarySearch(cdf, r.Float64())
			e := perm[min(i, n-1)%len(perm)]
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
		return out
	}
}

// loopGroups cycles through all experts in groups of k (LRU's worst case
// when the loop is longer than the cache).
func loopGroups(_ *rand.Rand, step, n, k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = (step*k + i) % n
	}
	return out
}

// genTrace interleaves layers: step s routes every layer once.
func genTrace(r *rand.Rand, gen traceGen, layers, steps, n, k int) []Event {
	var out []Event
	for s := range steps {
		for l := range layers {
			out = append(out, Event{Kind: KindLease, Layer: l, IDs: gen(r, s, n, k)})
		}
	}
	return out
}

// TestBeladyBoundsOnlinePolicies: on random, Zipf and looping traces, at
// every capacity from the group size to the expert count, MIN misses no
// more than any declared policy replayed through Model, in every layer.
func TestBeladyBoundsOnlinePolicies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gens := []struct {
		name string
		gen  func(n int) traceGen
	}{
		{"uniform", func(int) traceGen { return uniformGroups }},
		{"zipf", func(n int) traceGen { return zipfGroups(1.1, r.Perm(n)) }},
		{"loop", func(int) traceGen { return loopGroups }},
	}
	for _, gn := range gens {
		for trial := range 12 {
			n, k := 4+r.IntN(20), 1+r.IntN(3)
			events := genTrace(r, gn.gen(n), 2, 150, n, k)
			for c := k; c <= n; c++ {
				cfg := Config{Layers: 2, Experts: n, Capacity: c, Placement: []string{"canonical", "strided"}[trial%2], GroupSize: k}
				opt, err := Belady(cfg, events)
				if err != nil {
					t.Fatal(err)
				}
				for _, pol := range Policies() {
					cfg.Policy = pol
					m, err := NewModel(cfg)
					if err != nil {
						t.Fatal(err)
					}
					for _, ev := range events {
						if err := m.Apply(ev); err != nil {
							t.Fatal(err)
						}
					}
					got := m.Counters()
					for l := range 2 {
						if opt.LayerMisses[l] > got.LayerMisses[l] {
							t.Errorf("%s trial %d E=%d k=%d c=%d layer %d: belady %d misses > %s %d", gn.name, trial, n, k, c, l, opt.LayerMisses[l], pol, got.LayerMisses[l])
						}
					}
					if c == n && (got.Misses != 0 || opt.Misses != 0) {
						t.Errorf("%s: full residency misses: %s %d, belady %d", gn.name, pol, got.Misses, opt.Misses)
					}
				}
			}
		}
	}
}
