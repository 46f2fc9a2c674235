package cache

import (
	"errors"
	"fmt"
	"slices"

	"github.com/horizon-runmap/horizon/eviction"
)

// Speculative prefetch. A consumer that can guess a layer's next routed
// group before it routes it (the engine runs layer L+1's router on layer
// L's input) calls Prefetch with the guess; the cache starts loading the
// guessed experts that are not published, and the consumer later routes
// for real and leases and serves the routed group as always (Lease, then
// Lease.Serve). A prefetched expert that the real group contains is then
// a hit; anything the guess missed is a miss, loaded by Serve exactly as
// without prefetch; a wrong guess costs copies and evictions, never
// correctness, because Serve serves exactly the group it was leased for.
// The Lease of the real group scores the guess (precision and recall
// counters) and waits for the layer's prefetch to finish (routed).
//
// A prefetch is an ordinary miss transaction without a lease: it holds
// missMu (so it is serialised with every miss, and a later Serve that
// misses waits for it), chooses victims with the layer's policy among
// published experts that are neither predicted nor leased, reserves spare
// rows, copies on the copy stream, waits for every copy's completion event
// and only then publishes a new generation. It is best effort: it loads
// only as many experts as there are victims for, and skips when no spare
// row can be reserved (capacity is never an error).
//
// Prefetch takes missMu before it returns and hands it to a goroutine
// that runs the transaction, so the caller's next work (the compute of
// layer L) overlaps the copies, and the order of transactions is the order
// of the calls: a miss issued after Prefetch returned runs after the
// prefetch transaction, whatever the goroutine scheduler does. A Prefetch
// issued while an earlier prefetch still runs waits for it.
//
// Lease waits for the layer's prefetch even when the routed group is
// already resident. Without that wait an all-hit Serve could touch the
// eviction order before or after the prefetch chose its victims and
// published, as the goroutines happen to run, and hits, misses and
// evictions would vary from run to run. With it, they are a function of
// the token stream. The price: a group that needs none of the copies
// still waits for them (the wrong part of a guess); a later version could
// order the policy updates instead.

// prefetchPolicy is a layer's eviction policy with its prefetch
// bookkeeping. The first Prefetch on a layer wraps the layer's policy in
// it (under the layer lock). Serve calls Policy.Hit exactly once for
// every routed expert it serves as a hit, and Remove for every eviction,
// so the wrapper sees when a prefetched expert is used, or evicted unused,
// without a hook in the hit path. The layer lock guards every field.
type prefetchPolicy struct {
	Policy
	counters *layerCounters
	// fresh[e]: a prefetch published expert e and no Serve has served it
	// since.
	fresh []bool
	// predicted is the layer's latest prediction not yet scored by a
	// Lease; nil when none.
	predicted []int
	// running is closed when the layer's prefetch transaction in flight
	// has finished (published or given up); nil when none runs.
	running chan struct{}
	// failed is an error of a prefetch transaction (a device error, not a
	// capacity shortfall) that the next Lease or Prefetch on the layer
	// returns.
	failed error
}

func (p *prefetchPolicy) Hit(e int) {
	if p.fresh[e] {
		p.fresh[e] = false
		p.counters.prefetchUsed.Add(1)
	}
	p.Policy.Hit(e)
}

func (p *prefetchPolicy) Remove(e int) {
	p.fresh[e] = false
	p.Policy.Remove(e)
}

// prefetchStateLocked returns the layer's prefetch bookkeeping, wrapping
// its policy on first use. l.mu is held.
func (c *Cache) prefetchStateLocked(l *layer) *prefetchPolicy {
	if p, ok := l.policy.(*prefetchPolicy); ok {
		return p
	}
	p := &prefetchPolicy{Policy: l.policy, counters: &l.counters, fresh: make([]bool, c.nexp)}
	l.policy = p
	return p
}

// Prefetch implements device.ExpertRows: it starts loading the experts of
// ids, a predicted routed group of layer, that are not published, and
// records ids as the layer's pending prediction, which the layer's next
// Lease scores. It returns once the transaction is ordered (it holds the
// transaction mutex) but before its copies complete; the experts become
// visible to leases when their generation is published. It never evicts a
// leased or predicted expert, and loads fewer experts, or none, when
// victims or spare rows are lacking. It leases nothing and counts no hit
// or miss (only the prefetch_* counters). ids is validated like a leased
// group. It returns the cache's fault, ErrClosed, or the device error of
// an earlier prefetch on this layer that no Lease returned (a prefetch
// runs after its call returned, so its error surfaces later).
func (c *Cache) Prefetch(layer int, ids []int) error {
	if err := c.faultErr(); err != nil {
		return err
	}
	l, err := c.checkGroup(layer, ids)
	if err != nil {
		return err
	}
	c.record(eviction.KindPrefetch, layer, ids)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	p := c.prefetchStateLocked(l)
	if err := p.failed; err != nil {
		p.failed = nil
		l.mu.Unlock()
		return err
	}
	ids = slices.Clone(ids)
	p.predicted = ids
	g := l.gen.Load()
	missing := slices.ContainsFunc(ids, func(e int) bool { return g.rowOf[e] < 0 })
	l.mu.Unlock()
	if !missing {
		return nil
	}
	c.missMu.Lock()
	if err := c.faultErr(); err != nil {
		c.missMu.Unlock()
		return err
	}
	done := make(chan struct{})
	l.mu.Lock()
	p.running = done
	l.mu.Unlock()
	go func() {
		err := c.prefetch(l, ids)
		l.mu.Lock()
		p.running = nil
		p.failed = errors.Join(p.failed, err)
		l.mu.Unlock()
		c.missMu.Unlock()
		close(done)
	}()
	return nil
}

// prefetch is the prefetch transaction of layer l for the predicted group
// ids; c.missMu is held. It follows miss (see there) with three
// differences: the number of experts to load is cut to what victims and
// free capacity allow, and a shortage of spare rows skips the prefetch;
// nothing is leased; nothing counts as a hit or a miss. A failure before
// publication leaves the previous generation published, as in miss.
func (c *Cache) prefetch(l *layer, ids []int) error {
	l.mu.Lock()
	if l.closed || c.faultErr() != nil {
		l.mu.Unlock()
		return nil
	}
	g := l.gen.Load()
	var missing []int
	for _, e := range ids {
		if g.rowOf[e] < 0 {
			missing = append(missing, e)
		}
	}
	if len(missing) == 0 {
		l.mu.Unlock()
		return nil
	}
	l.counters.prefetchIssued.Add(int64(len(missing)))
	room := max(0, c.opts.Capacity-g.size)
	victims := l.policy.Victims(max(0, len(missing)-room), func(e int) bool {
		return !slices.Contains(ids, e) && l.rows[g.rowOf[e]].leases == 0
	})
	// ids is in routing order (most probable first): keep the head.
	missing = missing[:min(len(missing), room+len(victims))]
	l.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}

	targets, err := c.reserve(l, len(missing))
	if errors.Is(err, ErrNoSpare) {
		return nil // best effort: the rows are still held by consumers
	}
	if err != nil {
		return fmt.Errorf("cache: layer %d: prefetch %v: %w", l.index, missing, err)
	}
	jobs := make([]copyJob, len(missing))
	for i, e := range missing {
		jobs[i] = copyJob{layer: l, row: targets[i], expert: e}
	}
	err = c.load(jobs)
	for i := range jobs {
		if j := &jobs[i]; j.waited && j.err == nil {
			l.counters.prefetchH2DBytes.Add(int64(c.size))
		}
	}
	if err != nil {
		return fmt.Errorf("cache: layer %d: prefetch experts %v: %w (generation %d stays published)", l.index, missing, err, g.seq)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := c.faultErr(); err != nil || l.closed {
		for _, r := range targets {
			c.toPool(l.rows[r])
		}
		return nil
	}
	p := c.prefetchStateLocked(l)
	ng := c.publishLocked(l, g, victims, missing, targets)
	for _, v := range victims {
		p.Remove(v)
	}
	for _, e := range missing {
		p.Insert(e)
		p.fresh[e] = true
	}
	l.counters.countEvictions(len(victims))
	l.counters.prefetchLoaded.Add(int64(len(missing)))
	if err := c.reclaimFinishedLocked(l); err != nil {
		c.setFault(fmt.Errorf("layer %d: after publishing prefetched generation %d: %w", l.index, ng.seq, err))
	}
	return nil
}

// routed is a Lease's view of prefetch: layer l routed actual. It scores
// the layer's pending prediction (the group of its latest Prefetch)
// against actual, adding to the prefetch_groups, prefetch_predicted,
// prefetch_routed and prefetch_overlap counters, clears it, and waits
// until the layer's prefetch transaction, if one is in flight, has
// finished, so that what the lease finds does not depend on goroutine
// timing (see above). It returns the device error of a failed prefetch of
// the layer, if any. Without a pending prediction it only waits; on a
// layer nobody prefetched into it does nothing.
func (c *Cache) routed(l *layer, actual []int) error {
	l.mu.Lock()
	p, ok := l.policy.(*prefetchPolicy)
	if !ok {
		l.mu.Unlock()
		return nil
	}
	if p.predicted != nil {
		overlap := 0
		for _, e := range actual {
			if slices.Contains(p.predicted, e) {
				overlap++
			}
		}
		l.counters.prefetchGroups.Add(1)
		l.counters.prefetchPredicted.Add(int64(len(p.predicted)))
		l.counters.prefetchRouted.Add(int64(len(actual)))
		l.counters.prefetchOverlap.Add(int64(overlap))
		p.predicted = nil
	}
	running := p.running
	l.mu.Unlock()
	if running != nil {
		<-running
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	err := p.failed
	p.failed = nil
	return err
}
