package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/eviction"
)

// modelRouting is what an edition's routing traces say of one model
// (checkpoint): how concentrated its routing is at the skew capacity, what
// the recorded configurations missed there, and its measured requests'
// misses replayed under every policy (eviction.Simulate).
type modelRouting struct {
	label     string
	synthetic bool
	experts   int
	// capacity is the skew capacity C: the smallest partial capacity of
	// the model in the edition, or experts/2 when it has none (partial
	// false).
	capacity int
	partial  bool
	// shareMin and shareMax are, over layers, the share of the measured
	// lease lookups that went to the layer's capacity most used experts.
	shareMin, shareMax float64
	// recPolicy, recMisses and recLookups are the recorded counters of
	// the model's configurations at capacity without prefetch (recPolicy
	// "" when there is none).
	recPolicy             string
	recMisses, recLookups int64
	// replay is the configuration whose traces the replays use; curves
	// its misses per policy at each of caps.
	replay string
	caps   []int
	curves []policyCurve
}

// policyCurve is one policy's replayed misses at each capacity.
type policyCurve struct {
	policy string
	misses []int64
}

// routingPolicies are the policies replayed for the misses figure: every
// declared online policy and Belady's MIN.
func routingPolicies() []string { return append(eviction.Policies(), eviction.PolicyBelady) }

// recordWorker returns a record's worker trace (warmup, then its
// requests); false when the record carries no trace at all (written before
// traces were recorded).
func recordWorker(r *editions.RawRecord) (eviction.Worker, bool, error) {
	reqs := make([]*editions.RoutingTrace, len(r.Requests))
	for i := range r.Requests {
		reqs[i] = r.Requests[i].RoutingTrace
	}
	return editions.TraceWorker(r.Warmup.RoutingTrace, reqs)
}

// prefetchOff reports whether a configuration ran without prefetch.
func prefetchOff(s editions.Setup) bool { return s.Prefetch == "" || s.Prefetch == "off" }

// editionRouting reads the routing traces of an edition's records, per
// model in the order of docs; nil when no record carries one. A
// configuration whose records carry traces only in part is an error.
func editionRouting(c *Campaign, records map[string][]*editions.RawRecord, docs []editions.ConfigDoc) ([]modelRouting, error) {
	type traced struct {
		doc     *editions.ConfigDoc
		setup   editions.Setup
		rb      int64
		workers []eviction.Worker
	}
	var labels []string
	byModel := map[string][]*editions.ConfigDoc{}
	tracedBy := map[string][]traced{}
	for i := range docs {
		d := &docs[i]
		label := editions.CheckpointLabel(d.Checkpoint)
		if byModel[label] == nil {
			labels = append(labels, label)
		}
		byModel[label] = append(byModel[label], d)
		var ws []eviction.Worker
		recs := records[d.ID]
		for _, r := range recs {
			w, ok, err := recordWorker(r)
			if err != nil {
				return nil, fmt.Errorf("configuration %s block %d: %w", d.ID, r.Block, err)
			}
			if ok {
				ws = append(ws, w)
			}
		}
		switch {
		case len(ws) == 0:
			continue
		case len(ws) != len(recs):
			return nil, fmt.Errorf("configuration %s: %d of its %d records carry routing traces", d.ID, len(ws), len(recs))
		}
		tracedBy[label] = append(tracedBy[label], traced{doc: d, setup: recs[0].Setup, rb: recs[0].Artifact.RecordBytes, workers: ws})
	}
	var out []modelRouting
	for _, label := range labels {
		ts := tracedBy[label]
		if len(ts) == 0 {
			continue
		}
		m := ts[0].setup.Model
		mr := modelRouting{label: label, synthetic: ts[0].doc.Checkpoint.Kind == "synthetic", experts: m.ExpertsPerLayer,
			capacity: max(1, m.ExpertsPerLayer/2)}
		recorded := []int{}
		for _, d := range byModel[label] {
			recorded = append(recorded, d.Capacity)
			if d.Capacity < d.ExpertsPerLayer && (!mr.partial || d.Capacity < mr.capacity) {
				mr.capacity, mr.partial = d.Capacity, true
			}
		}
		// Skew: lease lookups of the measured requests per layer and
		// expert, over every traced configuration of the model.
		// Leases are the decode steps' (and token-at-a-time prefill's)
		// lookups; a batched prefill's waves count Uses[i] lookups of
		// IDs[i]. The skew is the leases' where there are any (as editions
		// made before batched prefill counted it), else the waves' (one
		// output token per request: every lookup is the prefill's).
		counts, waves := make([][]int64, m.Layers), make([][]int64, m.Layers)
		leased := false
		for l := range counts {
			counts[l], waves[l] = make([]int64, m.ExpertsPerLayer), make([]int64, m.ExpertsPerLayer)
		}
		for _, t := range ts {
			for _, w := range t.workers {
				for _, q := range w.Requests {
					for _, ev := range q {
						if ev.Layer >= m.Layers {
							continue
						}
						for i, e := range ev.IDs {
							switch {
							case e >= m.ExpertsPerLayer:
							case ev.Kind == eviction.KindLease:
								counts[ev.Layer][e]++
								leased = true
							case ev.Kind == eviction.KindBatch && i < len(ev.Uses):
								waves[ev.Layer][e] += int64(ev.Uses[i])
							}
						}
					}
				}
			}
		}
		if !leased {
			counts = waves
		}
		first := true
		for _, cs := range counts {
			var total, top int64
			sorted := slices.Clone(cs)
			slices.SortFunc(sorted, func(a, b int64) int { return int(b - a) })
			for i, n := range sorted {
				total += n
				if i < mr.capacity {
					top += n
				}
			}
			if total == 0 {
				continue
			}
			s := float64(top) / float64(total)
			if first {
				mr.shareMin, mr.shareMax, first = s, s, false
			}
			mr.shareMin, mr.shareMax = min(mr.shareMin, s), max(mr.shareMax, s)
		}
		// Recorded misses at the skew capacity, without prefetch (lru
		// preferred); the replay uses the first such traced configuration.
		var pick []*editions.ConfigDoc
		for _, pref := range []bool{true, false} {
			for _, d := range byModel[label] {
				recs := records[d.ID]
				if d.Capacity == mr.capacity && len(recs) > 0 && prefetchOff(recs[0].Setup) && (!pref || d.Policy == "lru") {
					pick = append(pick, d)
				}
			}
			if len(pick) > 0 {
				break
			}
		}
		if len(pick) > 0 {
			mr.recPolicy = pick[0].Policy
			for _, d := range pick {
				if d.Policy != mr.recPolicy {
					continue
				}
				mr.recMisses += d.Metrics.Misses
				mr.recLookups += d.Metrics.Misses + d.Metrics.Hits
			}
		}
		ref := ts[0]
		for _, t := range ts {
			if t.doc.Capacity == mr.capacity && prefetchOff(t.setup) && (mr.recPolicy == "" || t.doc.Policy == mr.recPolicy) {
				ref = t
				break
			}
		}
		mr.replay = ref.doc.ID
		mr.caps = missCapacities(m.TopK, m.ExpertsPerLayer, append(recorded, mr.capacity))
		for _, pol := range routingPolicies() {
			pc := policyCurve{policy: pol}
			for _, capacity := range mr.caps {
				cfg := eviction.Config{Layers: m.Layers, Experts: m.ExpertsPerLayer, Capacity: capacity, Policy: pol,
					Placement: ref.setup.Placement, RecordBytes: ref.rb, GroupSize: m.TopK}
				res, err := eviction.Simulate(cfg, false, ref.workers)
				if err != nil {
					return nil, fmt.Errorf("configuration %s: %w", ref.doc.ID, err)
				}
				pc.misses = append(pc.misses, res.Misses)
			}
			mr.curves = append(mr.curves, pc)
		}
		out = append(out, mr)
	}
	return out, nil
}

// missCapacities are the capacities the misses figure replays, sorted:
// the recorded ones, top-k, every multiple of experts/8 from top-k on and
// the expert count (horizon-bench simulate's default sweep).
func missCapacities(topK, experts int, recorded []int) []int {
	caps := []int{topK, experts}
	step := max(1, experts/8)
	for n := step; n <= experts; n += step {
		if n >= topK {
			caps = append(caps, n)
		}
	}
	for _, n := range recorded {
		if n >= topK && n <= experts {
			caps = append(caps, n)
		}
	}
	slices.Sort(caps)
	return slices.Compact(caps)
}

// pct formats a ratio as a percentage with one decimal.
func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// caveat is the model's "Read this first" line on its routing.
func (mr *modelRouting) caveat() string {
	var b strings.Builder
	uniform := float64(mr.capacity) / float64(mr.experts)
	b.WriteString(mr.label + ": routing is ")
	if mr.shareMax > uniform+0.05 {
		b.WriteString("not uniform")
	} else {
		b.WriteString("close to uniform")
	}
	if mr.synthetic {
		b.WriteString(" (synthetic router)")
	}
	at := "the smallest partial capacity in this edition"
	if !mr.partial {
		at = "half the experts (no partial capacity in this edition)"
	}
	fmt.Fprintf(&b, ": at capacity %d of %d experts (%s), the %d most used experts of a layer take %s-%s of the measured lookups (uniform: %d/%d = %s)",
		mr.capacity, mr.experts, at, mr.capacity, pct(mr.shareMin), pct(mr.shareMax), mr.capacity, mr.experts, pct(uniform))
	if mr.recPolicy != "" && mr.recLookups > 0 {
		fmt.Fprintf(&b, "; %s misses %s of lookups (recorded)", strings.ToUpper(mr.recPolicy), pct(float64(mr.recMisses)/float64(mr.recLookups)))
	} else if lru := mr.replayed("lru"); lru >= 0 {
		fmt.Fprintf(&b, "; LRU would miss %d at this capacity (replayed from %s; no configuration recorded it)", lru, mr.replay)
	}
	b.WriteString(".")
	if mr.synthetic {
		b.WriteString(" Real routers differ.")
	}
	return b.String()
}

// replayed returns the replayed misses of policy at the skew capacity, -1
// when not replayed.
func (mr *modelRouting) replayed(policy string) int64 {
	i := slices.Index(mr.caps, mr.capacity)
	for _, c := range mr.curves {
		if c.policy == policy && i >= 0 {
			return c.misses[i]
		}
	}
	return -1
}
