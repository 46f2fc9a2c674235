package cache

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/eviction"
	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// The consumer protocol (device.ExpertRows): every step mode, miss/hit
// overlap and prefetch reach the cache through it.
//
//   - Snapshot(layer): the layer's published generation (rows by expert,
//     sequence number, pinned at full residency). Counts nothing.
//   - Lease(layer, ids): scores the layer's pending prediction against the
//     routed group, waits for the layer's prefetch in flight and returns a
//     failed prefetch's error (routed, prefetch.go), then leases the rows
//     of the group's experts published now (Lease.Resident). Counts
//     nothing and leaves the eviction policy alone.
//   - Serve: an all-published group is served under the layer lock
//     (policy hits); otherwise a miss transaction (cache_miss.go) loads and
//     publishes the missing experts and leases their rows. The group's
//     hits and misses are counted once, in Serve, whatever path served it.
//   - Release: records one compute event covering every read of the
//     lease's rows issued before it and drops the leases (at full
//     residency, where rows never move, it only drops them).

var _ device.ExpertRows = (*Cache)(nil)

// errReleased: Serve of a lease already released.
var errReleased = errors.New("lease already released")

// Snapshot implements device.ExpertRows: layer's published generation,
// the row of every published expert (indexed by expert, nil where not
// published) with the generation's sequence number, which changes whenever
// the layer's residency does. Pinned is set at full residency (Capacity
// equal to the expert count): every expert is published at construction
// and no row ever moves, so a device may read the rows through a table of
// its own (graph-full steps) and needs a lease only to count its groups. A
// device that keeps a table of published rows at partial residency
// (graph-wait steps) rebuilds it when Seq changed. It takes no lease and
// counts nothing.
func (c *Cache) Snapshot(layer int) (device.Snapshot, error) {
	if layer < 0 || layer >= len(c.layers) {
		return device.Snapshot{}, fmt.Errorf("cache: snapshot: layer %d outside 0..%d", layer, len(c.layers)-1)
	}
	l := c.layers[layer]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return device.Snapshot{}, fmt.Errorf("cache: snapshot of layer %d: %w", layer, ErrClosed)
	}
	g := l.gen.Load()
	pinned := c.fullResidency()
	rows := make([]backend.Tensor, c.nexp)
	for e := range rows {
		r := g.rowOf[e]
		if r < 0 {
			if pinned {
				return device.Snapshot{}, fmt.Errorf("cache: snapshot of layer %d: expert %d is not published at full residency", layer, e)
			}
			continue
		}
		rows[e] = l.rows[r].tensor
	}
	return device.Snapshot{Layer: layer, Seq: g.seq, Rows: rows, Pinned: pinned}, nil
}

// Lease implements device.ExpertRows: it takes a lease on ids, the group
// layer routed, validated like every group (1..GroupSize distinct experts
// of the layer). First it scores the layer's pending prediction against
// ids (the prefetch_groups, _predicted, _routed and _overlap counters),
// waits for the layer's prefetch transaction in flight and returns the
// device error of a failed prefetch of the layer, if any (see prefetch.go:
// what the lease finds is then a function of the token stream, not of
// goroutine timing). Then, under the layer lock, it leases the rows of the
// group's experts published now: Resident returns them, and a leased row
// is never a victim, so they stay the experts' rows until Release. It
// counts no hit or miss and leaves the eviction policy alone; Serve does
// both.
//
// A lease belongs to the goroutine that took it (Resident and Serve);
// Release may be called from any goroutine.
func (c *Cache) Lease(layer int, ids []int) (device.Lease, error) {
	return c.lease(layer, ids, nil)
}

// LeaseBatch implements device.ExpertRows: Lease for a batched prefill's
// wave, whose Serve counts sum(uses) lookups (the trace records it as an
// eviction.KindBatch event).
func (c *Cache) LeaseBatch(layer int, ids []int, uses []int) (device.Lease, error) {
	if len(uses) != len(ids) {
		return nil, fmt.Errorf("cache: batch of layer %d: %d uses for %d experts", layer, len(uses), len(ids))
	}
	for i, u := range uses {
		if u < 1 {
			return nil, fmt.Errorf("cache: batch of layer %d: expert %d has %d uses, want at least 1", layer, ids[i], u)
		}
	}
	return c.lease(layer, ids, uses)
}

// lease is Lease (uses nil) and LeaseBatch.
func (c *Cache) lease(layer int, ids []int, uses []int) (device.Lease, error) {
	if err := c.faultErr(); err != nil {
		return nil, err
	}
	l, err := c.checkGroup(layer, ids)
	if err != nil {
		return nil, err
	}
	reuse := 0
	if uses != nil {
		c.recordBatch(layer, ids, uses)
		for _, u := range uses {
			reuse += u - 1
		}
	} else {
		c.record(eviction.KindLease, layer, ids)
	}
	if err := c.routed(l, ids); err != nil {
		return nil, fmt.Errorf("cache: lease of layer %d after its prefetch failed: %w", layer, err)
	}
	n := len(ids)
	ints := make([]int, 2*n)
	tensors := make([]backend.Tensor, 2*n)
	s := &lease{c: c, l: l, ids: ints[:n:n], idx: ints[n:], resident: tensors[:n:n], rows: tensors[n:], reuse: reuse}
	copy(s.ids, ids)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("cache: lease of layer %d: %w", layer, ErrClosed)
	}
	g := l.gen.Load()
	for i, e := range s.ids {
		r := int(g.rowOf[e])
		s.idx[i] = r
		if r >= 0 {
			l.rows[r].leases++
			s.resident[i] = l.rows[r].tensor
		}
	}
	return s, nil
}

// lease is one routed group's hold on its rows (device.Lease).
type lease struct {
	c   *Cache
	l   *layer
	ids []int // the routed group (Lease's ids, copied)
	// reuse is a batch's lookups beyond one per expert (LeaseBatch),
	// counted as hits by Serve.
	reuse int

	// Guarded by l.mu.
	idx      []int            // idx[i]: the row leased for ids[i], -1 while none
	resident []backend.Tensor // the rows published at Lease, nil for the others
	rows     []backend.Tensor // every row of the group, once served
	served   bool
	released bool
}

// Resident implements device.Lease: the rows, in the order of the group,
// of the experts published when the lease was taken (nil for the others).
// The caller must not modify the slice.
func (s *lease) Resident() []backend.Tensor { return s.resident }

// Serve implements device.Lease: it returns every row of the group, in its
// order. A group whose experts are all published is served from the
// current generation under the layer lock (the policy sees each hit);
// otherwise a miss transaction, serialised with every other miss and
// prefetch, loads the experts not published, publishes them and leases
// their rows (see miss). The group is counted here and only here: hits for
// the experts published when it was served, misses for those the
// transaction loaded. A second Serve returns the same rows and counts
// nothing; a Serve that fails before publication changes nothing and may
// be retried. It returns the cache's fault, ErrClosed, or the miss's error
// (ErrNoVictim, ErrNoSpare, a device error).
func (s *lease) Serve() ([]backend.Tensor, error) {
	c, l := s.c, s.l
	l.mu.Lock()
	served, released := s.served, s.released
	l.mu.Unlock()
	switch {
	case released:
		return nil, fmt.Errorf("cache: serve group %v of layer %d: %w", s.ids, l.index, errReleased)
	case served:
		return s.rows, nil
	}
	if err := c.faultErr(); err != nil {
		return nil, err
	}
	hits, misses, err := c.serve(s)
	if hits+misses > 0 {
		hits += s.reuse
		// The one count of a routed group, whatever served it (every
		// step mode goes through here; TestCountersHaveOneIncrement).
		l.counters.countGroup(hits, misses)
	}
	if err != nil {
		return nil, err
	}
	return s.rows, nil
}

// Release implements device.Lease: it ends the lease (idempotent). At
// partial residency it records a compute event, under the layer lock so
// that the event stored on a row is always the latest recorded, and the
// rows are reused only after it completed; a failure to record faults the
// cache (the reads may still be running and no event covers them). At
// full residency no row is ever retired or rewritten, so no event is
// needed: Release only drops the leases, and Close records the one event
// that covers every read before it frees the rows.
func (s *lease) Release() {
	c, l := s.c, s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	held := false
	for _, r := range s.idx {
		held = held || r >= 0
	}
	if !held {
		return
	}
	var ev Event
	if !c.fullResidency() {
		var err error
		if ev, err = c.dev.RecordCompute(); err != nil {
			err = fmt.Errorf("layer %d: record compute event at release: %w", l.index, err)
			c.setFault(err)
			ev = errEvent{err}
		}
	}
	for _, r := range s.idx {
		if r < 0 {
			continue
		}
		rw := l.rows[r]
		rw.leases--
		if ev != nil {
			rw.read = ev
		}
	}
}

// errEvent is an event that could not be recorded: it never reports
// success, so its row is never reclaimed.
type errEvent struct{ err error }

func (e errEvent) Wait() error          { return e.err }
func (e errEvent) Query() (bool, error) { return false, e.err }

// serve serves s's group: from the published generation when every expert
// is published (serveHit), else by a miss transaction. It returns the
// hits and misses Serve counts: together the group's size once the group
// was served or its misses published (even when a failure after
// publication faulted the cache), 0 and 0 when nothing changed.
func (c *Cache) serve(s *lease) (hits, misses int, err error) {
	ok, err := c.serveHit(s)
	if err != nil {
		return 0, 0, err
	}
	if ok {
		return len(s.ids), 0, nil
	}
	c.missMu.Lock()
	defer c.missMu.Unlock()
	if err := c.faultErr(); err != nil {
		return 0, 0, err
	}
	return c.miss(s)
}

// serveHit serves s when every expert of its group is published in the
// current generation, under the layer lock, which is never held across a
// device wait. ok is false, and nothing changed, when some expert is not
// published. No miss or prefetch of this layer can publish or evict while
// the lock is held.
func (c *Cache) serveHit(s *lease) (ok bool, err error) {
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, fmt.Errorf("cache: serve group %v of layer %d: %w", s.ids, l.index, ErrClosed)
	}
	g := l.gen.Load()
	for _, e := range s.ids {
		if g.rowOf[e] < 0 {
			return false, nil
		}
	}
	return true, s.hitLocked(g)
}

// hitLocked serves s's group, every expert of which g publishes, as hits:
// it leases the rows not leased yet and lets the policy see each hit.
// l.mu is held and g is the current generation.
func (s *lease) hitLocked(g *generation) error {
	if err := s.leaseLocked(g); err != nil {
		return err
	}
	for _, e := range s.ids {
		s.l.policy.Hit(e)
	}
	return nil
}

// leaseLocked leases the row in g of every expert of the group that holds
// no lease yet (none when the group was all published at Lease: its rows
// cannot have moved, being leased) and marks s served. Every expert of the
// group is published in g, the current generation. l.mu is held.
func (s *lease) leaseLocked(g *generation) error {
	l := s.l
	if s.released {
		return fmt.Errorf("cache: serve group %v of layer %d: %w", s.ids, l.index, errReleased)
	}
	for i, e := range s.ids {
		if s.idx[i] < 0 {
			r := int(g.rowOf[e])
			s.idx[i] = r
			l.rows[r].leases++
		}
		s.rows[i] = l.rows[s.idx[i]].tensor
	}
	s.served = true
	return nil
}
