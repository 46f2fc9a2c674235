package cache

import "sync/atomic"

// Counters are the cache's observations. Every field is a counter some
// code really increments (or, for the two device-to-host fields, a counter
// no code path can increment; see below). Units are in the names.
//
//   - hits, misses: routed experts requested through Acquire that were /
//     were not published when their group was served; counted when the
//     group is served (an acquire that fails before publication counts
//     neither).
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
//
// The layer_* arrays split the first five by routed layer.
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

// layerCounters are one layer's counters; atomics so Counters can read
// them without the layer lock.
type layerCounters struct {
	hits, misses, evictions, h2dBytes, h2dCopies atomic.Int64
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
// BeginRequest restarts the measurement.
func (c *Cache) BeginRequest() {
	snap := c.Counters()
	c.reqMu.Lock()
	c.reqStart = snap
	c.inRequest = true
	c.reqMu.Unlock()
}

// EndRequest returns the counters accumulated since BeginRequest.
func (c *Cache) EndRequest() (Counters, error) {
	now := c.Counters()
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	if !c.inRequest {
		return Counters{}, errNoRequest
	}
	c.inRequest = false
	return now.Sub(c.reqStart), nil
}
