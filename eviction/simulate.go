package eviction

import (
	"fmt"
	"slices"
)

// PolicyBelady names Belady's MIN among the policies a simulation
// replays. It is not a declared cache policy (NewPolicy refuses it): it
// needs the future.
const PolicyBelady = "belady"

// Worker is one worker's routing: the warmup trace, then the measured
// requests' traces in the order the worker served them. A worker starts
// with a fresh cache and keeps it across its warmup and requests.
type Worker struct {
	Warmup   []Event
	Requests [][]Event
}

// SimResult is a simulation's counters, summed over workers. Lookups,
// Misses, Evictions and LayerMisses count the measured requests (the
// records' counters leave the warmup out); the warmup's own are apart.
type SimResult struct {
	Lookups, Misses, Evictions  int64
	LayerMisses                 []int64
	WarmupLookups, WarmupMisses int64
}

// MissRatio is Misses / Lookups (0 with no lookups).
func (r SimResult) MissRatio() float64 {
	if r.Lookups == 0 {
		return 0
	}
	return float64(r.Misses) / float64(r.Lookups)
}

// Simulate replays every worker's trace under cfg (cfg.Policy a declared
// policy or PolicyBelady) and sums the counters. Online policies replay
// through Model, the cache's own model, so that a replay of the recorded
// policy and capacity reproduces the recorded counters. With prefetch
// false, prefetch events are dropped before the replay (every policy then
// answers the same question, demand paging, which Belady's MIN bounds);
// with prefetch true the online policies replay them as the cache did
// (Belady ignores them either way).
func Simulate(cfg Config, prefetch bool, workers []Worker) (SimResult, error) {
	res := SimResult{LayerMisses: make([]int64, max(0, cfg.Layers))}
	for w, wk := range workers {
		warm := keep(wk.Warmup, prefetch)
		var reqs []Event
		for _, q := range wk.Requests {
			reqs = append(reqs, keep(q, prefetch)...)
		}
		var err error
		if cfg.Policy == PolicyBelady {
			err = simulateBelady(cfg, warm, reqs, &res)
		} else {
			err = simulateModel(cfg, warm, reqs, &res)
		}
		if err != nil {
			return SimResult{}, fmt.Errorf("eviction: simulate %s at capacity %d, worker %d: %w", cfg.Policy, cfg.Capacity, w+1, err)
		}
	}
	return res, nil
}

// keep returns the events, without the prefetch events unless prefetch.
func keep(evs []Event, prefetch bool) []Event {
	if prefetch {
		return evs
	}
	return slices.DeleteFunc(slices.Clone(evs), func(ev Event) bool { return ev.Kind == KindPrefetch })
}

func simulateModel(cfg Config, warm, reqs []Event, res *SimResult) error {
	m, err := NewModel(cfg)
	if err != nil {
		return err
	}
	for i, ev := range warm {
		if err := m.Apply(ev); err != nil {
			return fmt.Errorf("warmup event %d: %w", i, err)
		}
	}
	w := m.Counters()
	for i, ev := range reqs {
		if err := m.Apply(ev); err != nil {
			return fmt.Errorf("request event %d (after the warmup): %w", i, err)
		}
	}
	d := m.Counters().Sub(w)
	res.WarmupLookups += w.Hits + w.Misses
	res.WarmupMisses += w.Misses
	res.Lookups += d.Hits + d.Misses
	res.Misses += d.Misses
	res.Evictions += d.Evictions
	for l, n := range d.LayerMisses {
		res.LayerMisses[l] += n
	}
	return nil
}

func simulateBelady(cfg Config, warm, reqs []Event, res *SimResult) error {
	all := slices.Concat(warm, reqs)
	b, err := Belady(cfg, all)
	if err != nil {
		return err
	}
	for i, ev := range all {
		if ev.Kind == KindPrefetch {
			continue
		}
		if i < len(warm) {
			res.WarmupLookups += int64(ev.Lookups())
			res.WarmupMisses += int64(b.EventMisses[i])
			continue
		}
		res.Lookups += int64(ev.Lookups())
		res.Misses += int64(b.EventMisses[i])
		res.Evictions += int64(b.EventEvictions[i])
		res.LayerMisses[ev.Layer] += int64(b.EventMisses[i])
	}
	return nil
}
