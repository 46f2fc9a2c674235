package verifier

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Cache physics. A request routes top_k experts per routed layer for every
// position fed through the model: the prompt and every generated token but
// the last (which is never fed back), so positions = prompt_tokens + N - 1
// (verified on every committed edition). Each lookup is a hit or a miss;
// each miss (and, with prefetch on, each prefetched record loaded) is one
// copy of one artifact record; after the initial placement the cache's
// published rows are full at partial residency, so every load evicts one
// row; at full residency nothing misses.
//
// The placement fills each published row once: capacity x layers copies of
// record_bytes each, from a host authority of experts x layers records.
//
// Identical cache settings give identical counters: the routing of a greedy
// stream depends only on the checkpoint, the expert format and the
// numerics, and which experts miss only on the routing, the capacity, the
// placement, the policy, the prefetch mode and the spare rows. Transport,
// staging, executor (within a numerics family), overlap and step mode
// change how a miss is served and when, never which experts miss
// (residency-ablation's c30 staged, registered and overlap configurations
// have identical counters). The device and the numerics family (see check
// consistency) are kept in the key too: different numerics may route
// differently. A configuration whose settings no other configuration
// shares has only its own blocks to agree with: a forger who changes every
// block of it alike passes this check, and only trace replay (a later
// issue) or a reproduction (Options.Reproduction) catches that.

var (
	IDPhysCacheRouted = def("physics", "physics.cache-routed", Error,
		"a request's hits + misses differ from layers x top_k x positions routed (positions = prompt_tokens + N - 1: the last token is never fed back), or a counter is negative")
	IDPhysH2DBytes = def("physics", "physics.h2d-bytes", Error,
		"a request's h2d_bytes differ from h2d_copies x artifact.record_bytes (or its prefetch h2d_bytes from prefetch.loaded x record_bytes)")
	IDPhysH2DCopies = def("physics", "physics.h2d-copies", Error,
		"a request's h2d_copies differ from its misses plus the records its prefetch loaded")
	IDPhysLayerMisses = def("physics", "physics.layer-misses", Error,
		"a layer's misses are negative or exceed the lookups one layer routes (top_k x positions); recompute.layer-misses holds their sum and length")
	IDPhysEvictions = def("physics", "physics.evictions", Error,
		"at partial residency a request's evictions differ from misses + prefetch.loaded (every load into the full published rows evicts one)")
	IDPhysFullResidency = def("physics", "physics.full-residency", Error,
		"at full residency (capacity = experts per layer) a request has misses, evictions or H2D copies")
	IDPhysPrefetch = def("physics", "physics.prefetch", Error,
		"prefetch counters are absent where setup.prefetch is on, present where it is off, or impossible (loaded > issued, overlap > predicted or routed, routed > lookups, a negative counter)")
	IDPhysPlacement = def("physics", "physics.placement", Error,
		"preparation h2d_copies differ from capacity x layers, or h2d_bytes from capacity x layers x record_bytes (the placement fills every published row once)")
	IDPhysAuthority = def("physics", "physics.authority-bytes", Error,
		"preparation authority_bytes differ from experts per layer x layers x record_bytes")
	IDPhysCacheIdentity = def("physics", "physics.cache-identity", Error,
		"a worker's per-request cache counters differ from the majority of workers with identical cache settings (checkpoint, expert format, capacity, placement, policy, prefetch, spares, prefill mode, device, numerics family, prompts), reported once per deviating worker")
)

// checkCachePhysics holds each worker's counters to the cache's physics.
func checkCachePhysics(ws []physWorker, fs *findings) {
	for _, pw := range ws {
		w := pw.w
		r := w.rec
		s := r.Setup
		m := s.Model
		rb := r.Artifact.RecordBytes
		layers, topK, experts, capa := int64(m.Layers), int64(m.TopK), int64(m.ExpertsPerLayer), int64(s.Capacity)
		full := s.Capacity == m.ExpertsPerLayer
		prefetchOn := prefetchOf(s) != defaultPrefetch

		p := r.Preparation
		if p.H2DCopies != capa*layers || p.H2DBytes != capa*layers*rb {
			fs.add(IDPhysPlacement, w.path, "/preparation",
				map[string]int64{"h2d_copies": capa * layers, "h2d_bytes": capa * layers * rb},
				map[string]int64{"h2d_copies": p.H2DCopies, "h2d_bytes": p.H2DBytes},
				"the initial placement copies each of capacity %d x %d layers rows once, %d bytes each", capa, layers, rb)
		}
		if want := experts * layers * rb; p.AuthorityBytes != want {
			fs.add(IDPhysAuthority, w.path, "/preparation/authority_bytes", want, p.AuthorityBytes,
				"the host authority holds %d experts x %d layers records of %d bytes", experts, layers, rb)
		}

		for i, q := range r.Requests {
			c := q.Cache
			base := ptr("requests", i, "cache")
			positions := int64(q.PromptTokens + q.N - 1)
			lookups := layers * topK * positions
			if c.Hits < 0 || c.Misses < 0 || c.Evictions < 0 || c.H2DCopies < 0 || c.H2DBytes < 0 {
				fs.add(IDPhysCacheRouted, w.path, base, "non-negative counters",
					map[string]int64{"hits": c.Hits, "misses": c.Misses, "evictions": c.Evictions, "h2d_copies": c.H2DCopies, "h2d_bytes": c.H2DBytes},
					"request %d: a cache counter is negative", i)
			} else if c.Hits+c.Misses != lookups {
				fs.add(IDPhysCacheRouted, w.path, base+"/hits", lookups, c.Hits+c.Misses,
					"request %d: hits %d + misses %d must be the %d lookups routed (%d layers x top_k %d x %d positions = prompt_tokens %d + N %d - 1)",
					i, c.Hits, c.Misses, lookups, layers, topK, positions, q.PromptTokens, q.N)
			}

			var loaded int64
			switch pf := c.Prefetch; {
			case prefetchOn && pf == nil:
				fs.add(IDPhysPrefetch, w.path, base+"/prefetch", "prefetch counters", nil,
					"request %d: setup.prefetch is %s but the request has no prefetch counters", i, s.Prefetch)
			case !prefetchOn && pf != nil:
				fs.add(IDPhysPrefetch, w.path, base+"/prefetch", nil, "prefetch counters",
					"request %d: prefetch counters where setup.prefetch is off", i)
			case pf != nil:
				loaded = pf.Loaded
				var bad []string
				if min(pf.Issued, pf.Loaded, pf.Used, pf.H2DBytes, pf.Groups, pf.Predicted, pf.Routed, pf.Overlap) < 0 {
					bad = append(bad, "a negative counter")
				}
				if pf.Loaded > pf.Issued {
					bad = append(bad, fmt.Sprintf("loaded %d > issued %d", pf.Loaded, pf.Issued))
				}
				if pf.Overlap > pf.Predicted || pf.Overlap > pf.Routed {
					bad = append(bad, fmt.Sprintf("overlap %d > predicted %d or routed %d", pf.Overlap, pf.Predicted, pf.Routed))
				}
				if pf.Routed > lookups {
					bad = append(bad, fmt.Sprintf("routed %d > the %d lookups of the request", pf.Routed, lookups))
				}
				if len(bad) > 0 {
					fs.add(IDPhysPrefetch, w.path, base+"/prefetch", nil, nil, "request %d: impossible prefetch counters: %s", i, strings.Join(bad, "; "))
				}
				if want := pf.Loaded * rb; pf.H2DBytes != want {
					fs.add(IDPhysH2DBytes, w.path, base+"/prefetch/h2d_bytes", want, pf.H2DBytes,
						"request %d: %d prefetched records of %d bytes", i, pf.Loaded, rb)
				}
			}
			if want := c.H2DCopies * rb; c.H2DBytes != want {
				fs.add(IDPhysH2DBytes, w.path, base+"/h2d_bytes", want, c.H2DBytes,
					"request %d: %d copies of %d-byte records", i, c.H2DCopies, rb)
			}
			if want := c.Misses + loaded; c.H2DCopies != want {
				fs.add(IDPhysH2DCopies, w.path, base+"/h2d_copies", want, c.H2DCopies,
					"request %d: one copy per miss (%d) and per prefetched record loaded (%d)", i, c.Misses, loaded)
			}
			if full {
				if c.Misses != 0 || c.Evictions != 0 || c.H2DCopies != 0 {
					fs.add(IDPhysFullResidency, w.path, base, map[string]int64{"misses": 0, "evictions": 0, "h2d_copies": 0},
						map[string]int64{"misses": c.Misses, "evictions": c.Evictions, "h2d_copies": c.H2DCopies},
						"request %d: at full residency (capacity %d of %d) every expert is resident", i, s.Capacity, m.ExpertsPerLayer)
				}
			} else if want := c.Misses + loaded; c.Evictions != want {
				fs.add(IDPhysEvictions, w.path, base+"/evictions", want, c.Evictions,
					"request %d: at partial residency every load (%d misses + %d prefetched) evicts one published row", i, c.Misses, loaded)
			}
			for l, x := range c.LayerMisses {
				if x < 0 || x > topK*positions {
					fs.add(IDPhysLayerMisses, w.path, ptr("requests", i, "cache", "layer_misses", l), "0.."+fmt.Sprint(topK*positions), x,
						"request %d: layer %d routes top_k %d x %d positions", i, l, topK, positions)
					break
				}
			}
		}
	}
}

// cacheCounters are the counters identical cache settings must reproduce.
// The required-zero observations are left to check invariants.
type cacheCounters struct {
	Hits        int64            `json:"hits"`
	Misses      int64            `json:"misses"`
	Evictions   int64            `json:"evictions"`
	H2DBytes    int64            `json:"h2d_bytes"`
	H2DCopies   int64            `json:"h2d_copies"`
	LayerMisses []int64          `json:"layer_misses"`
	Prefetch    *json.RawMessage `json:"prefetch,omitempty"`
}

func countersOf(w *worker, i int) (cacheCounters, string) {
	c := w.rec.Requests[i].Cache
	cc := cacheCounters{Hits: c.Hits, Misses: c.Misses, Evictions: c.Evictions, H2DBytes: c.H2DBytes, H2DCopies: c.H2DCopies, LayerMisses: c.LayerMisses}
	if c.Prefetch != nil {
		b, _ := json.Marshal(c.Prefetch)
		raw := json.RawMessage(b)
		cc.Prefetch = &raw
	}
	b, _ := json.Marshal(cc)
	return cc, string(b)
}

// cacheSettings is the key under which workers must have identical
// counters.
func cacheSettings(v *view, w *worker) string {
	r := w.rec
	s := r.Setup
	k := keyOf(v, w)
	prompts := make([]string, len(r.Requests))
	for i, q := range r.Requests {
		prompts[i] = q.PromptID
	}
	// The prefill mode decides which experts a prompt leases together (a
	// batched prefill's waves against one group per position), so it is a
	// cache setting. Records from before the field ran token at a time
	// (physics_env.go), so a missing mode is that one: dropping the field
	// cannot move a worker out of its group.
	return fmt.Sprintf("checkpoint %s, format %s, capacity %d, placement %s, policy %s, prefetch %s, spares %d, prefill %s, device %s, %s, prompts %s",
		k.checkpoint, k.format, s.Capacity, s.Placement, s.Policy, prefetchOf(s), s.Spares, orDefault(s.Prefill, "token"), k.device, k.family, strings.Join(prompts, ","))
}

// checkCacheIdentity requires every worker's per-request counters to equal
// the majority of the workers that share its cache settings.
func checkCacheIdentity(v *view, ws []physWorker, fs *findings) {
	var order []string
	groups := map[string][]*worker{}
	for _, pw := range ws {
		k := cacheSettings(v, pw.w)
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], pw.w)
	}
	for _, k := range order {
		g := groups[k]
		if len(g) < 2 {
			continue
		}
		n := 0
		for _, w := range g {
			n = max(n, len(w.rec.Requests))
		}
		// The majority of each request position.
		ref := make([]*worker, n)
		for i := 0; i < n; i++ {
			var keys []string
			var who []*worker
			for _, w := range g {
				if i < len(w.rec.Requests) {
					_, fp := countersOf(w, i)
					keys = append(keys, fp)
					who = append(who, w)
				}
			}
			ref[i] = who[majorityIndex(keys)]
		}
		for _, w := range g {
			for i := range w.rec.Requests {
				want, wfp := countersOf(ref[i], i)
				got, gfp := countersOf(w, i)
				if wfp == gfp {
					continue
				}
				fs.add(IDPhysCacheIdentity, w.path, ptr("requests", i, "cache"), want, got,
					"request %d (%s): cache counters differ from the majority of the %d workers with identical cache settings (e.g. %s); transport, staging, executor, overlap and step mode never change which experts miss, so they must be identical",
					i, w.rec.Requests[i].PromptID, len(g), ref[i].path)
				break
			}
		}
	}
}
