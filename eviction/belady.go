package eviction

import (
	"fmt"
	"math"
	"slices"
)

// BeladyResult is what Belady's MIN does on a trace: the misses and
// evictions of its lease events, in total, per layer and per event.
type BeladyResult struct {
	Lookups, Misses, Evictions  int64
	LayerMisses, LayerEvictions []int64
	// EventMisses[i] is the misses of events[i] (0 for a prefetch
	// event), so that a caller can count a stretch of the trace (the
	// measured requests after the warmup); EventEvictions likewise.
	EventMisses, EventEvictions []int
}

// Belady replays the lease events of a trace under Belady's MIN
// (L. A. Belady, "A study of replacement algorithms for a virtual-storage
// computer", IBM Systems Journal 5(2), 1966), the offline optimum: every
// layer starts from cfg's initial placement at cfg.Capacity; a lease
// event's resident experts are hits, its others misses, loaded all
// together; when they do not fit, the victims are the resident experts
// outside the event's group whose next use in the layer is farthest
// (never used again first), ties broken by the lower expert id.
//
// Farthest-next-use is optimal for groups too: any schedule can be
// rearranged into MIN's without more misses (the exchange argument of
// Belady and Mattson et al. 1970 is unchanged when a whole group must be
// resident at once, since MIN never evicts a member of the current
// group). So MIN's misses bound from below the misses of every online
// policy on the same lease events from the same placement.
//
// Prefetch events are ignored: MIN counts demand loads only, and is the
// bound for replays without prefetch (a prefetch turns a demand miss
// into an earlier load, which these misses do not count). cfg.Policy and
// cfg.RecordBytes are not used. Invalid events (as Model.Apply rejects
// them) are errors wrapping ErrEvent.
func Belady(cfg Config, events []Event) (BeladyResult, error) {
	if cfg.Layers < 1 || cfg.Experts < 1 {
		return BeladyResult{}, fmt.Errorf("eviction: belady: %d layers x %d experts", cfg.Layers, cfg.Experts)
	}
	placed, err := InitialPlacement(cfg.Placement, cfg.Experts, cfg.Capacity)
	if err != nil {
		return BeladyResult{}, fmt.Errorf("eviction: belady: %w", err)
	}
	maxGroup := cfg.GroupSize
	if maxGroup <= 0 {
		maxGroup = cfg.Capacity
	}
	// uses[l][e] lists the lease events of layer l that route expert e,
	// in order; next[l][e] indexes the first not yet passed.
	uses := make([][][]int, cfg.Layers)
	for l := range uses {
		uses[l] = make([][]int, cfg.Experts)
	}
	for i, ev := range events {
		if ev.Kind != KindLease && ev.Kind != KindPrefetch && ev.Kind != KindBatch {
			return BeladyResult{}, fmt.Errorf("eviction: belady: %w: event %d: kind %d", ErrEvent, i, ev.Kind)
		}
		if err := checkUses(ev); err != nil {
			return BeladyResult{}, fmt.Errorf("eviction: belady: event %d: %w", i, err)
		}
		if ev.Layer < 0 || ev.Layer >= cfg.Layers {
			return BeladyResult{}, fmt.Errorf("eviction: belady: %w: event %d: layer %d outside 0..%d", ErrEvent, i, ev.Layer, cfg.Layers-1)
		}
		if len(ev.IDs) == 0 || len(ev.IDs) > maxGroup {
			return BeladyResult{}, fmt.Errorf("eviction: belady: %w: event %d (layer %d): group of %d experts, want 1..%d", ErrEvent, i, ev.Layer, len(ev.IDs), maxGroup)
		}
		for j, e := range ev.IDs {
			if e < 0 || e >= cfg.Experts {
				return BeladyResult{}, fmt.Errorf("eviction: belady: %w: event %d (layer %d): expert %d outside 0..%d", ErrEvent, i, ev.Layer, e, cfg.Experts-1)
			}
			if slices.Contains(ev.IDs[:j], e) {
				return BeladyResult{}, fmt.Errorf("eviction: belady: %w: event %d (layer %d): expert %d twice in group %v", ErrEvent, i, ev.Layer, e, ev.IDs)
			}
			if ev.Kind != KindPrefetch {
				uses[ev.Layer][e] = append(uses[ev.Layer][e], i)
			}
		}
	}
	next := make([][]int, cfg.Layers)
	resident := make([][]bool, cfg.Layers)
	size := make([]int, cfg.Layers)
	for l := range resident {
		next[l] = make([]int, cfg.Experts)
		resident[l] = make([]bool, cfg.Experts)
		for _, e := range placed {
			resident[l][e] = true
		}
		size[l] = len(placed)
	}
	nextUse := func(l, e int) int {
		if u := uses[l][e]; next[l][e] < len(u) {
			return u[next[l][e]]
		}
		return math.MaxInt
	}
	res := BeladyResult{LayerMisses: make([]int64, cfg.Layers), LayerEvictions: make([]int64, cfg.Layers), EventMisses: make([]int, len(events)), EventEvictions: make([]int, len(events))}
	for i, ev := range events {
		if ev.Kind == KindPrefetch {
			continue
		}
		l := ev.Layer
		for _, e := range ev.IDs {
			next[l][e]++ // past event i: nextUse is now the use after this one
		}
		missing := 0
		for _, e := range ev.IDs {
			if !resident[l][e] {
				missing++
			}
		}
		evict := max(0, missing-(cfg.Capacity-size[l]))
		for range evict {
			victim, far := -1, -1
			for e, r := range resident[l] {
				if !r || slices.Contains(ev.IDs, e) {
					continue
				}
				if n := nextUse(l, e); n > far {
					victim, far = e, n
				}
			}
			if victim < 0 {
				return BeladyResult{}, fmt.Errorf("eviction: belady: %w: event %d (layer %d): group %v does not fit in capacity %d", ErrEvent, i, l, ev.IDs, cfg.Capacity)
			}
			resident[l][victim] = false
			size[l]--
			res.Evictions++
			res.LayerEvictions[l]++
		}
		for _, e := range ev.IDs {
			if !resident[l][e] {
				resident[l][e] = true
				size[l]++
			}
		}
		res.Lookups += int64(ev.Lookups())
		res.Misses += int64(missing)
		res.LayerMisses[l] += int64(missing)
		res.EventMisses[i] = missing
		res.EventEvictions[i] = evict
	}
	return res, nil
}
