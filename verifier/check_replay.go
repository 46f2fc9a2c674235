package verifier

import (
	"fmt"
	"slices"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/eviction"
)

// Check replay. From raw-record version 2 (editions.RawVersionTraces) a
// worker records the cache's routing trace of its warmup and of every
// measured request: each routed group leased and served and each
// predicted group prefetched, in call order. The cache's counters are a
// deterministic function of that sequence, the initial placement, the
// capacity and the policy, so the verifier replays the worker's whole
// sequence (warmup, then its requests in order) through eviction.Model,
// built from the record's setup (layers, experts per layer, top_k,
// capacity, policy, placement) and artifact.record_bytes, and demands
// every request's hits, misses, evictions, h2d_copies, h2d_bytes,
// layer_misses and, with prefetch on, prefetch counters exactly.
//
// A trace must also agree with the token counts: every position fed
// through the model (prompt_tokens + N - 1: the last token is never fed
// back; runtime/engine Generate) routes top_k distinct experts in every
// layer, either as a lease of one group (a position run alone) or as
// lookups of a batch event (a batched prefill's wave of distinct experts,
// eviction.KindBatch: its uses count the (token, slot) pairs), so each
// layer routes exactly positions x top_k lookups in a request (in the
// warmup, whose prompt length the record does not state, the same number
// in every layer, at least N x top_k). With prefetch on each lease
// predicts every layer but the first once (next-layer prefetch), and
// there are no batches (prefill then runs token at a time); with it off
// nothing is prefetched.
//
// Records of version 1 were written before traces: their counters cannot
// be replayed (a hint; check physics still holds them to the cache's
// arithmetic). The replay assumes what the cache documents of the
// sequential engine (eviction.Model): no other lease outstanding when a
// miss chooses victims, no spare-row shortage, no device error.

var (
	IDReplayMismatch = def("replay", "replay.mismatch", Error,
		"a request's cache counters (hits, misses, evictions, h2d_copies, h2d_bytes, layer_misses, prefetch) differ from the replay of the worker's routing traces from the declared placement with the declared policy and capacity; the finding names the first event after which they diverge")
	IDReplayTrace = def("replay", "replay.trace", Error,
		"a routing trace cannot be decoded (format, base64, event count) or contradicts the record: a layer's routed lookups (top_k a lease, the uses of a batched prefill's wave) differ from top_k x the positions fed (prompt_tokens + N - 1), a lease is not top_k distinct experts of the layer (a wave: more than top_k), a layer is out of range, prefetch events disagree with setup.prefetch, a wave appears with prefetch on, or the waves disagree with setup.prefill (waves under token, none under batched)")
	IDReplayMissing = def("replay", "replay.trace-missing", Error,
		"a raw record of version 2 or later lacks the routing trace of its warmup or of a request")
	IDReplaySetup = def("replay", "replay.setup", Error,
		"a traced record's setup cannot be modelled (unknown policy or placement, capacity outside top_k..experts)")
	IDReplayUnverified = def("replay", "replay.unverified", Hint,
		"raw records from before routing traces (version 1): their cache counters were not replayed (reported once, with the number of such workers)")
)

// checkReplay replays every traced worker.
func checkReplay(v *view, fs *findings) {
	untraced, first := 0, ""
	for _, pw := range physWorkers(v) {
		w := pw.w
		if w.rec.Version < editions.RawVersionTraces && !hasTraces(w.rec) {
			if untraced == 0 {
				first = w.path
			}
			untraced++
			continue
		}
		replayWorker(w, fs)
	}
	if untraced > 0 {
		fs.add(IDReplayUnverified, first, "", editions.RawVersionTraces, 1,
			"%d worker(s) were recorded before routing traces (raw record version 1, e.g. %s): their cache counters are held to the cache's arithmetic (check physics) but not replayed", untraced, first)
	}
}

// hasTraces reports whether any trace is present in r.
func hasTraces(r *editions.RawRecord) bool {
	if r.Warmup.RoutingTrace != nil {
		return true
	}
	for _, q := range r.Requests {
		if q.RoutingTrace != nil {
			return true
		}
	}
	return false
}

// tracedPart is one decoded trace of a worker: the warmup (req -1) or a
// request.
type tracedPart struct {
	req     int // request index in r.Requests, -1 for the warmup
	pointer string
	events  []eviction.Event
}

// decodeTraces decodes and validates every trace of a worker. ok is false
// (with findings) when any trace is missing or bad: the replay needs all.
func decodeTraces(w *worker, fs *findings) ([]tracedPart, bool) {
	r := w.rec
	m := r.Setup.Model
	prefetchOn := prefetchOf(r.Setup) != defaultPrefetch
	ok := true
	var parts []tracedPart
	one := func(req int, pointer string, t *editions.RoutingTrace, positions int, exact bool) {
		if t == nil {
			fs.add(IDReplayMissing, w.path, pointer, "a routing trace", nil,
				"%s: raw record version %d has no routing trace at %s", w.path, r.Version, pointer)
			ok = false
			return
		}
		bad := func(ptr string, expected, found any, format string, args ...any) {
			fs.add(IDReplayTrace, w.path, pointer+ptr, expected, found, "%s %s: %s", w.path, pointer, fmt.Sprintf(format, args...))
			ok = false
		}
		if t.Format != eviction.TraceFormat && t.Format != eviction.TraceFormatV1 {
			bad("/format", eviction.TraceFormat, t.Format, "routing trace format %q, this verifier reads %q and %q", t.Format, eviction.TraceFormat, eviction.TraceFormatV1)
			return
		}
		evs, err := eviction.DecodeFormat(t.Format, t.Data)
		if err != nil {
			bad("/data", nil, nil, "%v", err)
			return
		}
		if len(evs) != t.Events {
			bad("/events", len(evs), t.Events, "the trace holds %d events, its events field says %d", len(evs), t.Events)
			return
		}
		// A prefill mode leaves its mark on every trace: a batched prefill
		// serves the prompt in waves (batch events), token at a time never
		// does. (A record without the mode ran token at a time; it is not
		// held to it here, so older editions stay as they were.)
		waves := 0
		for _, ev := range evs {
			if ev.Kind == eviction.KindBatch {
				waves++
			}
		}
		switch {
		case r.Setup.Prefill == "token" && waves > 0:
			bad("/data", 0, waves, "the trace holds %d batched prefill waves, but setup.prefill is token", waves)
			return
		case r.Setup.Prefill == "batched" && waves == 0 && positions > 0:
			bad("/data", "at least one wave a layer", 0, "the trace holds no batched prefill wave, but setup.prefill is batched")
			return
		}
		leases := make([]int, m.Layers)  // lease events
		lookups := make([]int, m.Layers) // routed lookups: top_k a lease, the uses of a batch
		prefetches := make([]int, m.Layers)
		for i, ev := range evs {
			if ev.Layer >= m.Layers {
				bad("/data", m.Layers-1, ev.Layer, "event %d (%s) is of layer %d, the model has layers 0..%d", i, ev.Kind, ev.Layer, m.Layers-1)
				return
			}
			if ev.Kind == eviction.KindBatch && prefetchOn {
				bad("/data", nil, ev.Kind, "event %d is a batched prefill's wave of layer %d, but setup.prefetch is %s: a prefill with next-layer prefetch runs token at a time", i, ev.Layer, prefetchOf(r.Setup))
				return
			}
			if ev.Kind == eviction.KindLease && len(ev.IDs) != m.TopK || len(ev.IDs) > m.TopK {
				bad("/data", m.TopK, len(ev.IDs), "event %d (%s of layer %d, position %d) is a group of %d experts, top_k is %d", i, ev.Kind, ev.Layer, leases[ev.Layer], len(ev.IDs), m.TopK)
				return
			}
			for j, e := range ev.IDs {
				if e >= m.ExpertsPerLayer {
					bad("/data", m.ExpertsPerLayer-1, e, "event %d (%s of layer %d, position %d) routes expert %d, the layer has experts 0..%d", i, ev.Kind, ev.Layer, leases[ev.Layer], e, m.ExpertsPerLayer-1)
					return
				}
				if slices.Contains(ev.IDs[:j], e) {
					bad("/data", nil, ev.IDs, "event %d (%s of layer %d, position %d) names expert %d twice: %v", i, ev.Kind, ev.Layer, leases[ev.Layer], e, ev.IDs)
					return
				}
			}
			switch ev.Kind {
			case eviction.KindLease:
				leases[ev.Layer]++
			case eviction.KindPrefetch:
				prefetches[ev.Layer]++
			}
			lookups[ev.Layer] += ev.Lookups()
		}
		for l := range leases {
			want := positions * m.TopK
			switch {
			case exact && lookups[l] != want:
				bad("/events", want, lookups[l], "layer %d's leases and batches route %d lookups, but prompt_tokens + N - 1 = %d positions x top_k %d were fed through the model", l, lookups[l], positions, m.TopK)
				return
			case !exact && (lookups[l] != lookups[0] || lookups[l] < want):
				bad("/events", lookups[0], lookups[l], "layer %d's leases and batches route %d lookups, layer 0's %d; every layer routes every position once, and the warmup fed at least N = %d positions", l, lookups[l], lookups[0], positions)
				return
			}
			wantPF := 0
			if prefetchOn && l > 0 {
				wantPF = leases[l]
			}
			if prefetches[l] != wantPF {
				bad("/events", wantPF, prefetches[l], "layer %d has %d prefetch events with prefetch %s and %d leases (next-layer prefetch predicts every layer but the first once per position)", l, prefetches[l], prefetchOf(r.Setup), leases[l])
				return
			}
		}
		parts = append(parts, tracedPart{req: req, pointer: pointer, events: evs})
	}
	one(-1, "/warmup/routing_trace", r.Warmup.RoutingTrace, r.Warmup.N, false)
	for i, q := range r.Requests {
		one(i, fmt.Sprintf("/requests/%d/routing_trace", i), q.RoutingTrace, q.PromptTokens+q.N-1, true)
	}
	return parts, ok
}

// replayWorker replays one worker's traces and compares every request.
func replayWorker(w *worker, fs *findings) {
	parts, ok := decodeTraces(w, fs)
	if !ok {
		return
	}
	r := w.rec
	s, m := r.Setup, r.Setup.Model
	cfg := eviction.Config{Layers: m.Layers, Experts: m.ExpertsPerLayer, Capacity: s.Capacity, Policy: s.Policy,
		Placement: s.Placement, RecordBytes: r.Artifact.RecordBytes, GroupSize: m.TopK}
	if _, err := eviction.NewModel(cfg); err != nil {
		fs.add(IDReplaySetup, w.path, "/setup", nil, nil, "%s: cannot model the cache: %v", w.path, err)
		return
	}
	deltas, err := replay(cfg, parts, -1, nil)
	if err != nil {
		fs.add(IDReplayTrace, w.path, "", nil, nil, "%s: replay: %v", w.path, err)
		return
	}
	prefetchOn := prefetchOf(s) != defaultPrefetch
	for i, q := range r.Requests {
		d := deltas[i]
		diffs := compareCounters(q.Cache, d, prefetchOn)
		if len(diffs) == 0 {
			continue
		}
		first := diffs[0]
		where := divergence(cfg, parts, i, first)
		recorded, replayed := map[string]any{}, map[string]any{}
		for _, x := range diffs {
			recorded[x.name], replayed[x.name] = x.recorded, x.replayed
		}
		fs.add(IDReplayMismatch, w.path, fmt.Sprintf("/requests/%d/cache", i), replayed, recorded,
			"%s request %d (%s): %s recorded %v, the replay of the routing traces gives %v (%d counter(s) differ); %s",
			w.path, i, q.PromptID, first.name, first.recorded, first.replayed, len(diffs), where)
	}
}

// replay applies the warmup's and the requests' events in order and
// returns each request's counters. With watch >= 0, onEvent sees every
// event of request watch with the counters since the request began.
func replay(cfg eviction.Config, parts []tracedPart, watch int, onEvent func(i int, ev eviction.Event, since eviction.Counters)) ([]eviction.Counters, error) {
	model, err := eviction.NewModel(cfg)
	if err != nil {
		return nil, err
	}
	var out []eviction.Counters
	for _, p := range parts {
		start := model.Counters()
		for i, ev := range p.events {
			if err := model.Apply(ev); err != nil {
				return nil, fmt.Errorf("%s event %d: %w", p.pointer, i, err)
			}
			if p.req == watch && onEvent != nil {
				onEvent(i, ev, model.Counters().Sub(start))
			}
		}
		if p.req >= 0 {
			out = append(out, model.Counters().Sub(start))
		}
	}
	return out, nil
}

// counterDiff is one counter of a request that the replay does not
// reproduce; layer is the layer of a layer_misses entry (-1 otherwise).
type counterDiff struct {
	name               string
	layer              int
	recorded, replayed int64
	of                 func(eviction.Counters) int64
}

// compareCounters lists the request counters that differ, in a fixed
// order.
func compareCounters(rc editions.RequestCache, d eviction.Counters, prefetchOn bool) []counterDiff {
	var out []counterDiff
	add := func(name string, layer int, rec int64, of func(eviction.Counters) int64) {
		if got := of(d); got != rec {
			out = append(out, counterDiff{name: name, layer: layer, recorded: rec, replayed: got, of: of})
		}
	}
	for l := range max(len(rc.LayerMisses), len(d.LayerMisses)) {
		rec := int64(-1)
		if l < len(rc.LayerMisses) {
			rec = rc.LayerMisses[l]
		}
		add(fmt.Sprintf("layer_misses[%d]", l), l, rec, func(c eviction.Counters) int64 {
			if l < len(c.LayerMisses) {
				return c.LayerMisses[l]
			}
			return -1
		})
	}
	add("hits", -1, rc.Hits, func(c eviction.Counters) int64 { return c.Hits })
	add("misses", -1, rc.Misses, func(c eviction.Counters) int64 { return c.Misses })
	add("evictions", -1, rc.Evictions, func(c eviction.Counters) int64 { return c.Evictions })
	add("h2d_copies", -1, rc.H2DCopies, func(c eviction.Counters) int64 { return c.H2DCopies })
	add("h2d_bytes", -1, rc.H2DBytes, func(c eviction.Counters) int64 { return c.H2DBytes })
	if p := rc.Prefetch; prefetchOn && p != nil {
		add("prefetch.issued", -1, p.Issued, func(c eviction.Counters) int64 { return c.PrefetchIssued })
		add("prefetch.loaded", -1, p.Loaded, func(c eviction.Counters) int64 { return c.PrefetchLoaded })
		add("prefetch.used", -1, p.Used, func(c eviction.Counters) int64 { return c.PrefetchUsed })
		add("prefetch.h2d_bytes", -1, p.H2DBytes, func(c eviction.Counters) int64 { return c.PrefetchH2DBytes })
		add("prefetch.groups", -1, p.Groups, func(c eviction.Counters) int64 { return c.PrefetchGroups })
		add("prefetch.predicted", -1, p.Predicted, func(c eviction.Counters) int64 { return c.PrefetchPredicted })
		add("prefetch.routed", -1, p.Routed, func(c eviction.Counters) int64 { return c.PrefetchRouted })
		add("prefetch.overlap", -1, p.Overlap, func(c eviction.Counters) int64 { return c.PrefetchOverlap })
	}
	return out
}

// divergence locates the first event of request req after which counter
// x cannot match: where the replay's running count first exceeds the
// recorded one, or, when the replay ends below it, the request's last
// event of the layer (or of the request) that could have counted it.
func divergence(cfg eviction.Config, parts []tracedPart, req int, x counterDiff) string {
	type at struct {
		event, layer, position int
		ok                     bool
	}
	var over, last at
	positions := make([]int, cfg.Layers)
	_, _ = replay(cfg, parts, req, func(i int, ev eviction.Event, since eviction.Counters) {
		pos := positions[ev.Layer]
		if ev.Kind == eviction.KindLease {
			positions[ev.Layer]++
		}
		if x.layer >= 0 && ev.Layer != x.layer {
			return
		}
		last = at{i, ev.Layer, pos, true}
		if !over.ok && x.of(since) > x.recorded {
			over = at{i, ev.Layer, pos, true}
		}
	})
	switch {
	case over.ok:
		return fmt.Sprintf("they diverge at event %d of the request's trace (position %d, layer %d), where the replay's %s first exceeds the record's", over.event, over.position, over.layer, x.name)
	case last.ok:
		return fmt.Sprintf("the replay ends below the record: they diverge at or before event %d of the request's trace (position %d, layer %d), the last that could count %s", last.event, last.position, last.layer, x.name)
	}
	return "the request's trace has no event that could count it"
}
