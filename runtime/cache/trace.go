package cache

import (
	"slices"

	"github.com/horizon-runmap/horizon/eviction"
)

// Routing traces. With Options.Trace the cache records what it was asked,
// in call order: every Lease (after its group was validated, before it
// scores the layer's prediction) as an eviction.KindLease event (a
// LeaseBatch as an eviction.KindBatch event, with its uses), and every
// Prefetch (after validation) as an eviction.KindPrefetch event. The
// counters are a function of that sequence, the initial placement, the
// capacity and the policy (eviction.Model reproduces them; the verifier
// replays recorded traces with it). Recording appends the ids to an arena
// (no allocation per event beyond the amortised appends) under its own
// mutex, which no other lock is taken under.

// record appends one event when tracing is on.
func (c *Cache) record(kind eviction.Kind, layer int, ids []int) {
	if !c.opts.Trace {
		return
	}
	c.traceMu.Lock()
	defer c.traceMu.Unlock()
	start := len(c.traceIDs)
	c.traceIDs = append(c.traceIDs, ids...)
	c.trace = append(c.trace, eviction.Event{Kind: kind, Layer: layer, IDs: c.traceIDs[start:len(c.traceIDs):len(c.traceIDs)]})
}

// recordBatch notes a LeaseBatch in the trace, when tracing is on.
func (c *Cache) recordBatch(layer int, ids, uses []int) {
	if !c.opts.Trace {
		return
	}
	c.traceMu.Lock()
	defer c.traceMu.Unlock()
	start := len(c.traceIDs)
	c.traceIDs = append(c.traceIDs, ids...)
	c.trace = append(c.trace, eviction.Event{Kind: eviction.KindBatch, Layer: layer,
		IDs: c.traceIDs[start:len(c.traceIDs):len(c.traceIDs)], Uses: slices.Clone(uses)})
}

// TakeTrace returns the events recorded since New or the previous
// TakeTrace and clears them (nil when tracing is off or nothing was
// recorded). The returned events are the caller's: the cache never writes
// to them again.
func (c *Cache) TakeTrace() []eviction.Event {
	c.traceMu.Lock()
	defer c.traceMu.Unlock()
	out := c.trace
	c.trace, c.traceIDs = nil, nil
	return out
}
