package cache

import "sync/atomic"

// Counters are the cache's observations. Every field is a counter some
// code really increments (or, for the two device-to-host fields, a counter
// no code path can increment; see below). Units are in the names.
//
//   - hits, misses: routed experts of a leased group that were / were not
//     published when the group was served; counted once per lease, by
//     Lease.Serve, whatever path served it (a Serve that fails before
//     publication counts neither, a second Serve nothing, and a Lease
//     alone nothing).
//   - evictions: published experts discarded to make room.
//   - h2d_bytes, h2d_copies: host-to-device copies whose completion event
//     reported success, including initial placement (before admission)
//     and copies of a transaction that later aborted: they are bytes that
//     really crossed.
//   - d2h_expert_bytes, writebacks: expert bytes copied back from the
//     device / records written back. Device has no device-to-host method
//     and eviction (Cache.discard) only drops the row, so no code path
//     increments them: their zero is structural, and these fields are where
//     a writeback path would have to count.
//   - staging_bytes: authority bytes copied into staging buffers by the
//     host cores (staged transport, Cache.issue), counted when copied, so
//     it includes copies whose transfer later failed. Always 0 with the
//     registered transport, which copies from the authority directly.
//   - host_registered_bytes, host_register_ns: the authority bytes New
//     page-locked for the registered transport and the wall time
//     Device.RegisterHost took; preparation work (see Preparation), 0
//     with the staged transport and in every request.
//   - authority_writes, request_hash_bytes, request_artifact_reads: work
//     the host authority did after admission (records written into it,
//     bytes hashed, artifact reads), from the authority's own counters
//     (Authority.fill, the only writer and artifact reader, and
//     Authority.Verify).
//   - prefetch_*: speculative prefetch (see Prefetch), absent from the JSON
//     while zero (a cache nobody prefetches into). prefetch_issued counts
//     predicted experts that were not published when their prefetch
//     transaction ran (requested to load); prefetch_loaded those it
//     published (the rest were skipped for want of a victim or spare row);
//     prefetch_used those of them that a later Serve of their layer
//     served as a hit before they were evicted (counted at that hit, so a
//     request's delta can include experts loaded in an earlier request;
//     since New, used <= loaded <= issued). prefetch_h2d_bytes are the
//     prefetch copies' bytes, which h2d_bytes and h2d_copies also count:
//     h2d_bytes = (misses + prefetch_loaded) * record size when no copy
//     failed. prefetch_groups counts routed groups scored against a
//     prediction (by their Lease); prefetch_predicted and prefetch_routed
//     sum the sizes of those predictions and groups, prefetch_overlap their
//     intersections: precision = overlap / predicted, recall = overlap /
//     routed (PrefetchPrecision, PrefetchRecall).
//
// The layer_* arrays split the first five by routed layer. Hits and misses
// stay the routed lookups: an expert a prefetch published is a hit when it
// is routed, and prefetch copies are not misses.
type Counters struct {
	Hits                 int64 `json:"hits"`
	Misses               int64 `json:"misses"`
	Evictions            int64 `json:"evictions"`
	H2DBytes             int64 `json:"h2d_bytes"`
	H2DCopies            int64 `json:"h2d_copies"`
	StagingBytes         int64 `json:"staging_bytes"`
	HostRegisteredBytes  int64 `json:"host_registered_bytes"`
	HostRegisterNs       int64 `json:"host_register_ns"`
	D2HExpertBytes       int64 `json:"d2h_expert_bytes"`
	Writebacks           int64 `json:"writebacks"`
	AuthorityWrites      int64 `json:"authority_writes"`
	RequestHashBytes     int64 `json:"request_hash_bytes"`
	RequestArtifactReads int64 `json:"request_artifact_reads"`

	PrefetchIssued    int64 `json:"prefetch_issued,omitempty"`
	PrefetchLoaded    int64 `json:"prefetch_loaded,omitempty"`
	PrefetchUsed      int64 `json:"prefetch_used,omitempty"`
	PrefetchH2DBytes  int64 `json:"prefetch_h2d_bytes,omitempty"`
	PrefetchGroups    int64 `json:"prefetch_groups,omitempty"`
	PrefetchPredicted int64 `json:"prefetch_predicted,omitempty"`
	PrefetchRouted    int64 `json:"prefetch_routed,omitempty"`
	PrefetchOverlap   int64 `json:"prefetch_overlap,omitempty"`

	LayerHits      []int64 `json:"layer_hits"`
	LayerMisses    []int64 `json:"layer_misses"`
	LayerEvictions []int64 `json:"layer_evictions"`
	LayerH2DBytes  []int64 `json:"layer_h2d_bytes"`
	LayerH2DCopies []int64 `json:"layer_h2d_copies"`
}

// Sub returns c - base field by field: the work done between two
// snapshots of the same cache.
func (c Counters) Sub(base Counters) Counters {
	d := Counters{
		Hits:                 c.Hits - base.Hits,
		Misses:               c.Misses - base.Misses,
		Evictions:            c.Evictions - base.Evictions,
		H2DBytes:             c.H2DBytes - base.H2DBytes,
		H2DCopies:            c.H2DCopies - base.H2DCopies,
		StagingBytes:         c.StagingBytes - base.StagingBytes,
		HostRegisteredBytes:  c.HostRegisteredBytes - base.HostRegisteredBytes,
		HostRegisterNs:       c.HostRegisterNs - base.HostRegisterNs,
		D2HExpertBytes:       c.D2HExpertBytes - base.D2HExpertBytes,
		Writebacks:           c.Writebacks - base.Writebacks,
		AuthorityWrites:      c.AuthorityWrites - base.AuthorityWrites,
		RequestHashBytes:     c.RequestHashBytes - base.RequestHashBytes,
		RequestArtifactReads: c.RequestArtifactReads - base.RequestArtifactReads,
		PrefetchIssued:       c.PrefetchIssued - base.PrefetchIssued,
		PrefetchLoaded:       c.PrefetchLoaded - base.PrefetchLoaded,
		PrefetchUsed:         c.PrefetchUsed - base.PrefetchUsed,
		PrefetchH2DBytes:     c.PrefetchH2DBytes - base.PrefetchH2DBytes,
		PrefetchGroups:       c.PrefetchGroups - base.PrefetchGroups,
		PrefetchPredicted:    c.PrefetchPredicted - base.PrefetchPredicted,
		PrefetchRouted:       c.PrefetchRouted - base.PrefetchRouted,
		PrefetchOverlap:      c.PrefetchOverlap - base.PrefetchOverlap,
	}
	sub := func(a, b []int64) []int64 {
		out := make([]int64, len(a))
		for i := range a {
			out[i] = a[i]
			if i < len(b) {
				out[i] -= b[i]
			}
		}
		return out
	}
	d.LayerHits = sub(c.LayerHits, base.LayerHits)
	d.LayerMisses = sub(c.LayerMisses, base.LayerMisses)
	d.LayerEvictions = sub(c.LayerEvictions, base.LayerEvictions)
	d.LayerH2DBytes = sub(c.LayerH2DBytes, base.LayerH2DBytes)
	d.LayerH2DCopies = sub(c.LayerH2DCopies, base.LayerH2DCopies)
	return d
}

// PrefetchPrecision is prefetch_overlap / prefetch_predicted: the share of
// predicted experts that the routing then used. ok is false when nothing
// was predicted.
func (c Counters) PrefetchPrecision() (p float64, ok bool) {
	if c.PrefetchPredicted <= 0 {
		return 0, false
	}
	return float64(c.PrefetchOverlap) / float64(c.PrefetchPredicted), true
}

// PrefetchRecall is prefetch_overlap / prefetch_routed: the share of routed
// experts (of groups that had a prediction) that had been predicted. ok is
// false when no group was scored.
func (c Counters) PrefetchRecall() (r float64, ok bool) {
	if c.PrefetchRouted <= 0 {
		return 0, false
	}
	return float64(c.PrefetchOverlap) / float64(c.PrefetchRouted), true
}

// layerCounters are one layer's counters; atomics so Counters can read
// them without the layer lock.
type layerCounters struct {
	hits, misses, evictions, h2dBytes, h2dCopies atomic.Int64

	// Speculative prefetch (prefetch.go).
	prefetchIssued, prefetchLoaded, prefetchUsed, prefetchH2DBytes     atomic.Int64
	prefetchGroups, prefetchPredicted, prefetchRouted, prefetchOverlap atomic.Int64
}

// The group counters have one increment each, in these methods, and
// countGroup has one caller, Lease.Serve, whatever served the group (the
// all-hit path under the layer lock, a miss transaction, a miss
// transaction that found the group loaded by another) and whatever step
// mode leased it (op by op, graph-full at full residency, graph-segmented
// with or without overlap, graph-wait). Evictions are counted by whatever
// evicted (a miss transaction, a prefetch), copies where their completion
// is waited for. TestCountersHaveOneIncrement holds the package to it, so
// that no path can count differently.

// countGroup counts one served routed group: hits for the experts that
// were resident, misses for the ones its miss transaction copied in.
func (k *layerCounters) countGroup(hits, misses int) {
	k.hits.Add(int64(hits))
	k.misses.Add(int64(misses))
}

// countEvictions counts experts discarded to make room.
func (k *layerCounters) countEvictions(n int) { k.evictions.Add(int64(n)) }

// countCopy counts one host-to-device record copy that completed.
func (k *layerCounters) countCopy(bytes int) {
	k.h2dBytes.Add(int64(bytes))
	k.h2dCopies.Add(1)
}

// Counters returns the totals since New (initial placement included; see
// Preparation and BeginRequest for the split).
func (c *Cache) Counters() Counters {
	n := len(c.layers)
	out := Counters{
		LayerHits:      make([]int64, n),
		LayerMisses:    make([]int64, n),
		LayerEvictions: make([]int64, n),
		LayerH2DBytes:  make([]int64, n),
		LayerH2DCopies: make([]int64, n),
	}
	for i, l := range c.layers {
		k := &l.counters
		out.LayerHits[i] = k.hits.Load()
		out.LayerMisses[i] = k.misses.Load()
		out.LayerEvictions[i] = k.evictions.Load()
		out.LayerH2DBytes[i] = k.h2dBytes.Load()
		out.LayerH2DCopies[i] = k.h2dCopies.Load()
		out.Hits += out.LayerHits[i]
		out.Misses += out.LayerMisses[i]
		out.Evictions += out.LayerEvictions[i]
		out.H2DBytes += out.LayerH2DBytes[i]
		out.H2DCopies += out.LayerH2DCopies[i]
		out.PrefetchIssued += k.prefetchIssued.Load()
		out.PrefetchLoaded += k.prefetchLoaded.Load()
		out.PrefetchUsed += k.prefetchUsed.Load()
		out.PrefetchH2DBytes += k.prefetchH2DBytes.Load()
		out.PrefetchGroups += k.prefetchGroups.Load()
		out.PrefetchPredicted += k.prefetchPredicted.Load()
		out.PrefetchRouted += k.prefetchRouted.Load()
		out.PrefetchOverlap += k.prefetchOverlap.Load()
	}
	out.StagingBytes = c.stagingBytes.Load()
	out.HostRegisteredBytes = c.registeredBytes
	out.HostRegisterNs = c.registerNs
	out.D2HExpertBytes = c.d2hExpertBytes.Load()
	out.Writebacks = c.writebacks.Load()
	ac := c.auth.Counters()
	out.AuthorityWrites = ac.RequestWrites
	out.RequestHashBytes = ac.RequestHashBytes
	out.RequestArtifactReads = ac.RequestArtifactReads
	return out
}

// Admit marks the end of preparation: the authority's later work counts
// as request-time, and the counters so far are kept as Preparation.
// Calling it again does nothing.
func (c *Cache) Admit() {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	if c.admitted {
		return
	}
	c.admitted = true
	c.auth.admit()
	c.prep = c.Counters()
}

// Admitted reports whether Admit was called.
func (c *Cache) Admitted() bool {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	return c.admitted
}

// Preparation returns the counters at Admit (zero values before it): the
// initial placement's copies (and staging), the registration of the
// authority (registered transport), and nothing else.
func (c *Cache) Preparation() Counters {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	return c.prep
}

// BeginRequest snapshots the counters at the start of a request. Workers
// serve one request at a time (the contract's concurrency is 1); a second
// BeginRequest restarts the measurement. Like EndRequest it first waits for
// a prefetch transaction still in flight (see quiesce).
func (c *Cache) BeginRequest() {
	c.quiesce()
	snap := c.Counters()
	c.reqMu.Lock()
	c.reqStart = snap
	c.inRequest = true
	c.reqMu.Unlock()
}

// EndRequest returns the counters accumulated since BeginRequest, after
// waiting for a prefetch transaction still in flight, so that a request's
// counters hold the whole of every prefetch it issued.
func (c *Cache) EndRequest() (Counters, error) {
	c.quiesce()
	now := c.Counters()
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	if !c.inRequest {
		return Counters{}, errNoRequest
	}
	c.inRequest = false
	return now.Sub(c.reqStart), nil
}

// quiesce waits until no miss or prefetch transaction runs: a prefetch
// holds missMu from the Prefetch call that starts it until it published or
// gave up, and only a Lease of the prefetched layer waits for it. Between requests that is at most the prefetch issued for the last
// routed layer in the request's last step; without the wait its counters
// could straddle two requests.
func (c *Cache) quiesce() {
	c.missMu.Lock()
	c.missMu.Unlock()
}
