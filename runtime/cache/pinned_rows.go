package cache

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// Full residency (Capacity equal to the expert count) publishes every expert
// of every layer at construction and never evicts: a miss cannot happen, so
// no row is ever retired and every published row stays where it is for the
// life of the cache. That is what lets a device read expert rows through a
// table it holds (a captured decode step routes on the GPU and gathers the
// rows' addresses itself) instead of through a lease per routed group.
// PinnedRows hands out that table; RecordHits does the accounting Acquire
// would have done for the groups such a step routed.

// FullResidency reports whether every expert of every layer is published
// for good (Capacity equals the expert count).
func (c *Cache) FullResidency() bool { return c.opts.Capacity == c.nexp }

// PinnedRows returns the row of every expert of layer, indexed by expert, at
// full residency. It fails at partial residency, where rows move.
func (c *Cache) PinnedRows(layer int) ([]backend.Tensor, error) {
	if !c.FullResidency() {
		return nil, fmt.Errorf("cache: pinned rows need full residency (capacity %d of %d experts)", c.opts.Capacity, c.nexp)
	}
	if layer < 0 || layer >= len(c.layers) {
		return nil, fmt.Errorf("cache: layer %d outside 0..%d", layer, len(c.layers)-1)
	}
	l := c.layers[layer]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	g := l.gen.Load()
	rows := make([]backend.Tensor, c.nexp)
	for e := range rows {
		r := g.rowOf[e]
		if r < 0 {
			return nil, fmt.Errorf("cache: layer %d: expert %d is not published at full residency", layer, e)
		}
		rows[e] = l.rows[r].tensor
	}
	return rows, nil
}

// RecordHits accounts a routed group that a device step served from
// PinnedRows: the policy sees the hits and the hit counter grows by the
// group's size, exactly as Acquire's hit path, without a lease (rows never
// move at full residency). It validates the group like Acquire and fails at
// partial residency.
func (c *Cache) RecordHits(layer int, ids []int) error {
	if err := c.faultErr(); err != nil {
		return err
	}
	if !c.FullResidency() {
		return fmt.Errorf("cache: RecordHits needs full residency (capacity %d of %d experts)", c.opts.Capacity, c.nexp)
	}
	l, err := c.checkGroup(layer, ids)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	g := l.gen.Load()
	for _, e := range ids {
		if g.rowOf[e] < 0 {
			return fmt.Errorf("cache: layer %d: expert %d routed by a device step is not published", layer, e)
		}
	}
	for _, e := range ids {
		l.policy.Hit(e)
	}
	l.counters.countGroup(len(ids), 0)
	return nil
}

// PublishedRows returns the row of every published expert of layer
// (indexed by expert, nil where the expert is not published) and the
// generation's sequence number, which changes whenever the layer's
// residency does. A device that gathers rows through a table of its own
// (graph-wait steps) rebuilds that table from it after a miss.
func (c *Cache) PublishedRows(layer int) ([]backend.Tensor, uint64, error) {
	if layer < 0 || layer >= len(c.layers) {
		return nil, 0, fmt.Errorf("cache: layer %d outside 0..%d", layer, len(c.layers)-1)
	}
	l := c.layers[layer]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, 0, ErrClosed
	}
	g := l.gen.Load()
	rows := make([]backend.Tensor, c.nexp)
	for e := range rows {
		if r := g.rowOf[e]; r >= 0 {
			rows[e] = l.rows[r].tensor
		}
	}
	return rows, g.seq, nil
}
