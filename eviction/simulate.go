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

// Wave rules: how a simulation orders the waves of a batched prefill (a
// layer's consecutive batch events: one layer of one batch).
const (
	// WavesRecorded replays the batch events as the trace recorded them.
	WavesRecorded = "recorded"
	// WavesPublishedFirst replays each layer's batch with the experts the
	// model holds resident when the batch begins first and the others
	// after, each in their recorded order, cut again into waves of
	// cfg.GroupSize (the batch's largest recorded wave when 0): the rule
	// runtime/engine follows since session 42 (publishedFirst), under
	// which a batch misses exactly its experts that were not resident.
	// Applied to a trace recorded under it, it changes nothing. It assumes
	// a model of at least two layers, so that two batches of one layer
	// never follow one another in a trace.
	WavesPublishedFirst = "published-first"
)

// WaveRules lists the wave rules, sorted.
func WaveRules() []string { return []string{WavesPublishedFirst, WavesRecorded} }

// PublishedFirst returns the waves of batch (the consecutive batch events
// of one layer) reordered by WavesPublishedFirst's rule against resident,
// the layer's resident experts when the batch begins, in waves of at most
// group experts (0: the batch's largest wave).
func PublishedFirst(resident []int, batch []Event, group int) []Event {
	var ids, uses []int
	largest := 0
	for _, ev := range batch {
		ids, uses = append(ids, ev.IDs...), append(uses, ev.Uses...)
		largest = max(largest, len(ev.IDs))
	}
	if group <= 0 {
		group = largest
	}
	var oi, ou []int
	for _, pub := range []bool{true, false} {
		for i, e := range ids {
			if slices.Contains(resident, e) == pub {
				oi, ou = append(oi, e), append(ou, uses[i])
			}
		}
	}
	var out []Event
	for w := 0; w < len(oi); w += group {
		e := min(w+group, len(oi))
		out = append(out, Event{Kind: KindBatch, Layer: batch[0].Layer, IDs: oi[w:e:e], Uses: ou[w:e:e]})
	}
	return out
}

// Simulate replays every worker's trace under cfg (cfg.Policy a declared
// policy or PolicyBelady) and sums the counters: SimulateWaves with the
// waves as recorded.
func Simulate(cfg Config, prefetch bool, workers []Worker) (SimResult, error) {
	return SimulateWaves(cfg, prefetch, WavesRecorded, workers)
}

// SimulateWaves replays every worker's trace under cfg (cfg.Policy a
// declared policy or PolicyBelady) and sums the counters. Online policies replay
// through Model, the cache's own model, so that a replay of the recorded
// policy and capacity reproduces the recorded counters. With prefetch
// false, prefetch events are dropped before the replay (every policy then
// answers the same question, demand paging, which Belady's MIN bounds);
// with prefetch true the online policies replay them as the cache did
// (Belady ignores them either way). waves is a wave rule (WaveRules);
// Belady's MIN replays the recorded waves only, since which experts are
// resident when a batch begins depends on the policy.
func SimulateWaves(cfg Config, prefetch bool, waves string, workers []Worker) (SimResult, error) {
	if !slices.Contains(WaveRules(), waves) {
		return SimResult{}, fmt.Errorf("eviction: simulate: wave rule %q: want one of %v", waves, WaveRules())
	}
	if waves != WavesRecorded && cfg.Policy == PolicyBelady {
		return SimResult{}, fmt.Errorf("eviction: simulate: %s replays the recorded waves only, not %s", PolicyBelady, waves)
	}
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
			err = simulateModel(cfg, waves, warm, reqs, &res)
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

func simulateModel(cfg Config, waves string, warm, reqs []Event, res *SimResult) error {
	m, err := NewModel(cfg)
	if err != nil {
		return err
	}
	if err := replay(m, warm, waves, cfg.GroupSize); err != nil {
		return fmt.Errorf("warmup %w", err)
	}
	w := m.Counters()
	if err := replay(m, reqs, waves, cfg.GroupSize); err != nil {
		return fmt.Errorf("request %w (after the warmup)", err)
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

// replay applies evs to m under the wave rule waves.
func replay(m *Model, evs []Event, waves string, group int) error {
	for i := 0; i < len(evs); {
		ev := evs[i]
		if waves != WavesPublishedFirst || ev.Kind != KindBatch {
			if err := m.Apply(ev); err != nil {
				return fmt.Errorf("event %d: %w", i, err)
			}
			i++
			continue
		}
		j := i + 1
		for j < len(evs) && evs[j].Kind == KindBatch && evs[j].Layer == ev.Layer {
			j++
		}
		for _, w := range PublishedFirst(m.Resident(ev.Layer), evs[i:j], group) {
			if err := m.Apply(w); err != nil {
				return fmt.Errorf("event %d (a wave of the batch %d..%d, published first): %w", i, i, j-1, err)
			}
		}
		i = j
	}
	return nil
}
