package cache

import (
	"fmt"
	"runtime"
	"slices"
)

// miss runs one miss transaction for the routed group of lease s, of
// layer l. c.missMu is held; l.mu is taken only for bookkeeping, never
// across a device wait.
//
//  1. Under the layer lock: capture the published generation g; compute the
//     missing experts; choose victims with the policy among published
//     experts that are neither in the group nor leased.
//  2. Find spare rows in the pool the layers share: free spares first,
//     then retired rows (of any layer) whose leases are all released,
//     after waiting (outside the locks) for the compute event of their
//     last release.
//  3. Copy authority -> staging -> spare rows (staged transport) or
//     authority -> spare rows (registered) on the copy stream (load),
//     waiting for every copy's completion event.
//  4. Under the layer lock: publish g' = g - victims + missing, retire the
//     victims, commit the policy, count the evictions.
//  5. Still under the lock: query the compute events of retired rows
//     with no leases and turn finished ones into spares; then lease the
//     rows of the group that s does not hold yet (the loaded ones: the
//     experts published at Lease are leased already, so they were no
//     victims and kept their rows).
//
// It returns the group's hits (experts published in g) and misses (the
// experts loaded) for Serve to count, 0 and 0 when it changed nothing.
// Steps 1-3 never touch a published row, so a failure there aborts with
// g still published (rows whose copy the device could not confirm are
// quarantined) and nothing to count. A failure in step 5 happens after g'
// is visible: it is ambiguous, faults the cache, and the group still
// counts, its misses having been loaded.
func (c *Cache) miss(s *lease) (hits, misses int, err error) {
	l, ids := s.l, s.ids
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, 0, fmt.Errorf("cache: serve group %v of layer %d: %w", ids, l.index, ErrClosed)
	}
	g := l.gen.Load()
	var missing []int
	for _, e := range ids {
		if g.rowOf[e] < 0 {
			missing = append(missing, e)
		}
	}
	if len(missing) == 0 {
		// Another transaction loaded them while we waited for missMu.
		err := s.hitLocked(g)
		l.mu.Unlock()
		if err != nil {
			return 0, 0, err
		}
		return len(ids), 0, nil
	}
	nEvict := max(0, len(missing)-(c.opts.Capacity-g.size))
	victims := l.policy.Victims(nEvict, func(e int) bool {
		return !slices.Contains(ids, e) && l.rows[g.rowOf[e]].leases == 0
	})
	if len(victims) < nEvict {
		l.mu.Unlock()
		return 0, 0, fmt.Errorf("cache: layer %d: group %v misses %d experts, capacity %d leaves room for %d, and only %d of the other published experts are unleased: %w (release leases or raise the capacity)",
			l.index, ids, len(missing), c.opts.Capacity, c.opts.Capacity-g.size, len(victims), ErrNoVictim)
	}
	l.mu.Unlock()

	targets, err := c.reserve(l, len(missing))
	if err != nil {
		return 0, 0, fmt.Errorf("cache: layer %d: group %v: %w", l.index, ids, err)
	}
	jobs := make([]copyJob, len(missing))
	for i, e := range missing {
		jobs[i] = copyJob{layer: l, row: targets[i], expert: e}
	}
	if err := c.load(jobs); err != nil {
		return 0, 0, fmt.Errorf("cache: layer %d: load experts %v of group %v: %w (generation %d stays published)", l.index, missing, ids, err, g.seq)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := c.faultErr(); err != nil {
		// A release failed while we copied: do not publish into a
		// faulted cache.
		for _, r := range targets {
			c.toPool(l.rows[r])
		}
		return 0, 0, err
	}
	ng := c.publishLocked(l, g, victims, missing, targets)
	for _, v := range victims {
		l.policy.Remove(v)
	}
	for _, e := range ids {
		if slices.Contains(missing, e) {
			l.policy.Insert(e)
		} else {
			l.policy.Hit(e)
		}
	}
	hits, misses = len(ids)-len(missing), len(missing)
	l.counters.countEvictions(len(victims))

	if err := c.reclaimFinishedLocked(l); err != nil {
		return hits, misses, c.setFault(fmt.Errorf("layer %d: after publishing generation %d: %w", l.index, ng.seq, err))
	}
	if err := s.leaseLocked(ng); err != nil {
		return hits, misses, err
	}
	return hits, misses, nil
}

// publishLocked publishes g' = g - victims + missing (missing[i] loaded in
// row targets[i]), retiring the victims' rows, and returns g'. l.mu is
// held; the loads completed.
func (c *Cache) publishLocked(l *layer, g *generation, victims, missing, targets []int) *generation {
	ng := g.with(victims, missing, targets)
	for _, v := range victims {
		c.discard(l, int(g.rowOf[v]))
	}
	for i, e := range missing {
		r := l.rows[targets[i]]
		r.state, r.expert, r.read = rowPublished, e, nil
	}
	l.gen.Store(ng) // publication
	return ng
}

// discard evicts the published row r: it becomes retired, to be reused
// once its leases are released and its last compute event completed. This
// is the whole of eviction: the device copy is dropped, nothing is copied
// back (Device has no device-to-host method, so c.d2hExpertBytes and
// c.writebacks have no path to count) and the authority is not written.
// l.mu is held.
func (c *Cache) discard(l *layer, r int) {
	l.rows[r].state = rowRetired
	l.retired = append(l.retired, r)
}

// reclaimFinishedLocked turns retired rows of l without leases whose last
// compute event completed into spares of the shared pool, without
// blocking. l.mu and missMu are held.
func (c *Cache) reclaimFinishedLocked(l *layer) error {
	kept := l.retired[:0]
	var firstErr error
	for _, ri := range l.retired {
		r := l.rows[ri]
		done := false
		if r.leases == 0 && firstErr == nil {
			if r.read == nil {
				done = true
			} else {
				var err error
				done, err = r.read.Query()
				if err != nil {
					firstErr = fmt.Errorf("compute event of retired row %d (expert %d): %w", ri, r.expert, err)
					done = false
				}
			}
		}
		if done {
			c.toPool(r)
		} else {
			kept = append(kept, ri)
		}
	}
	l.retired = kept
	return firstErr
}

// reserve takes n spare rows from the shared pool for l, marked loading
// and owned by l. When too few are free it reclaims retired rows without
// leases from every layer: first those whose last compute event has
// completed (a query, no wait), then, if still short, the others, waiting
// for their compute events outside the layer locks. Within each kind it
// takes l's rows first, then the other layers' in order, oldest first in
// each. So a miss waits on the device only when every reclaimable row
// still has a reader in flight: with a pool of one group, the rows the
// previous transaction retired may belong to a layer whose compute was
// just issued, while another layer's retired row is long free. A failed
// wait leaves the row retired. Only a transaction (c.missMu, held) moves
// rows out of spare or retired or between owners, so what reserve sees
// stays true while it waits.
func (c *Cache) reserve(l *layer, n int) ([]int, error) {
	free := 0
	for _, r := range c.rows {
		if r.owner == poolOwner && r.state == rowSpare {
			free++
		}
	}
	type pending struct {
		l   *layer
		row int
		ev  Event // nil: its readers are done
	}
	var done, busy []pending
	leased, quarantined := 0, 0
	order := append([]*layer{l}, slices.DeleteFunc(slices.Clone(c.layers), func(x *layer) bool { return x == l })...)
	for _, ly := range order {
		ly.mu.Lock()
		for _, ri := range ly.retired {
			r := c.rows[ri]
			switch {
			case r.leases > 0:
				leased++
			case r.read == nil:
				done = append(done, pending{ly, ri, nil})
			default:
				// A query error counts as not done: the wait below
				// reports the event's failure if the row is needed.
				if ok, err := r.read.Query(); ok && err == nil {
					done = append(done, pending{ly, ri, nil})
				} else {
					busy = append(busy, pending{ly, ri, r.read})
				}
			}
		}
		ly.mu.Unlock()
	}
	need := max(0, n-free)
	waits := done[:min(need, len(done))]
	waits = append(waits, busy[:min(need-len(waits), len(busy))]...)
	for _, r := range c.rows {
		if r.state == rowQuarantined { // states change only under missMu
			quarantined++
		}
	}
	if free+len(waits) < n {
		return nil, fmt.Errorf("%d spare rows needed, %d free, %d retired rows reclaimable, %d retired rows still leased, %d quarantined: %w",
			n, free, len(waits), leased, quarantined, ErrNoSpare)
	}
	for _, w := range waits {
		if w.ev == nil {
			continue
		}
		if err := w.ev.Wait(); err != nil {
			return nil, fmt.Errorf("reclaim retired row %d of layer %d: compute event: %w", w.row, w.l.index, err)
		}
	}
	for _, w := range waits {
		w.l.mu.Lock()
		c.toPool(c.rows[w.row])
		w.l.retired = slices.DeleteFunc(w.l.retired, func(x int) bool { return x == w.row })
		w.l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, 0, n)
	for ri, r := range c.rows {
		if len(out) == n {
			break
		}
		if r.owner == poolOwner && r.state == rowSpare {
			r.state, r.owner = rowLoading, l.index
			out = append(out, ri)
		}
	}
	return out, nil
}

// copyJob is one record transfer of a transaction.
type copyJob struct {
	layer  *layer
	row    int
	expert int
	slot   *stagingSlot // nil with the registered transport
	// evs are the completion events of the job's copies, in the order
	// they were enqueued: one with the registered transport, one a staged
	// run (stageRun) with the staged one. Empty until the first is
	// enqueued.
	evs    []Event
	sent   int // bytes of the record whose copies were enqueued
	waited bool
	err    error // the first completion event's failure
}

// via names the job's source for error messages.
func (j *copyJob) via() string {
	if j.slot == nil {
		return "from the registered authority"
	}
	return fmt.Sprintf("through staging buffer %d", j.slot.index)
}

// wait waits for every copy of the job once and counts the record when
// all of it was sent and every copy succeeded; a failed copy quarantines
// its staging buffer, if it had one (the row is handled by load).
func (c *Cache) wait(j *copyJob) {
	if len(j.evs) == 0 || j.waited {
		return
	}
	j.waited = true
	for _, ev := range j.evs {
		if err := ev.Wait(); err != nil && j.err == nil {
			j.err = err
		}
	}
	if j.err != nil {
		if j.slot != nil {
			j.slot.bad = true
		}
		return
	}
	if j.sent == c.size {
		j.layer.counters.countCopy(c.size)
	}
}

// stagingSlot is one buffer of the staging ring. c.missMu guards it.
type stagingSlot struct {
	buf   Staging
	index int
	// pending is the copy of the current transaction that last read buf;
	// buf is rewritten only after that copy's completion event.
	pending *copyJob
	bad     bool // a copy from buf could not be confirmed: never reused
}

// stagingRing hands out staging buffers round robin.
type stagingRing struct {
	slots []*stagingSlot
	next  int
}

// usable counts the buffers not quarantined.
func (r *stagingRing) usable() int {
	n := 0
	for _, s := range r.slots {
		if !s.bad {
			n++
		}
	}
	return n
}

// take returns the next usable staging buffer, first waiting for the copy
// that last read it. An error reports that copy's failure, or that every
// buffer is quarantined.
func (c *Cache) take() (*stagingSlot, error) {
	r := &c.ring
	for range r.slots {
		s := r.slots[r.next]
		r.next = (r.next + 1) % len(r.slots)
		if s.bad {
			continue
		}
		if p := s.pending; p != nil {
			s.pending = nil
			c.wait(p)
			if p.err != nil {
				return nil, fmt.Errorf("copy of expert %d to row %d through staging buffer %d: %w", p.expert, p.row, s.index, p.err)
			}
		}
		return s, nil
	}
	return nil, fmt.Errorf("all %d staging buffers quarantined after device errors: %w", len(r.slots), ErrNoStaging)
}

// load copies each job's authority record into its row (marked loading)
// with the cache's transport and waits for every copy. On success the rows
// hold their records; publishing them is the caller's business. On
// failure it stops issuing, still waits for every copy it issued, puts
// rows whose copies were confirmed or never issued back to spare,
// quarantines rows whose copy the device could not confirm, and returns
// the first error. It never returns with a copy in flight.
func (c *Cache) load(jobs []copyJob) error {
	var firstErr error
	issued := 0
	if c.opts.Transport == TransportRegistered {
		for i := range jobs {
			if err := c.issueRegistered(&jobs[i]); err != nil {
				firstErr = err
				break
			}
			issued++
		}
	} else {
		issued, firstErr = c.issueStaged(jobs)
	}
	for i := range jobs[:issued] {
		j := &jobs[i]
		c.wait(j)
		if j.slot != nil {
			j.slot.pending = nil
		}
		if j.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("copy of expert %d to row %d %s: %w", j.expert, j.row, j.via(), j.err)
		}
	}
	if firstErr == nil {
		return nil
	}
	for i := range jobs {
		j := &jobs[i]
		l := j.layer
		l.mu.Lock()
		if j.err != nil {
			l.rows[j.row].state = rowQuarantined // it stays l's, never reused
		} else {
			c.toPool(l.rows[j.row])
		}
		l.mu.Unlock()
	}
	return firstErr
}

// issueRegistered enqueues the copy of one job from the page-locked
// authority to its row on the copy stream. An error means the job's copy
// was not enqueued.
func (c *Cache) issueRegistered(j *copyJob) error {
	dst := j.layer.rows[j.row].dev
	ev, err := c.dev.CopyHostToRow(dst, c.auth.Record(j.layer.index, j.expert), c.size)
	if err != nil {
		return fmt.Errorf("enqueue copy of expert %d to row %d %s: %w", j.expert, j.row, j.via(), err)
	}
	j.evs, j.sent = append(j.evs, ev), c.size
	return nil
}

// issueStaged enqueues the jobs' copies with the staged transport, in
// rounds of as many jobs as there are usable staging buffers. A round
// takes a buffer for each of its jobs (waiting for the copy that last read
// it: one of the previous round's), starts the host copies of all its
// records into them at once (startStaging: every core, record after
// record, piece by piece), and puts each record on the copy stream run by
// run (c.run bytes each, the last what is left) as its staged prefix grows: a
// record's transfer starts while the rest of it, and the round's later
// records, are still being copied on the host. It returns how many jobs
// have copies enqueued (the first issued, each with at least one event)
// and the error that stopped it; a job whose later run failed to enqueue
// still counts, since its earlier runs are in flight. The host copies
// have all finished when it returns.
func (c *Cache) issueStaged(jobs []copyJob) (issued int, err error) {
	for issued < len(jobs) {
		n := min(len(jobs)-issued, max(1, c.ring.usable()))
		round := jobs[issued : issued+n]
		slots := make([]*stagingSlot, 0, n)
		for range round {
			s, err := c.take()
			if err != nil {
				return issued, err
			}
			slots = append(slots, s)
		}
		dsts, srcs := make([][]byte, n), make([][]byte, n)
		for i := range round {
			j := &round[i]
			dsts[i], srcs[i] = slots[i].buf.Host()[:c.size], c.auth.Record(j.layer.index, j.expert)
		}
		// Two cores are left to this goroutine, which enqueues the runs,
		// and the device's own (CUDA: the owner thread that makes every
		// driver call); the copies are bound by memory bandwidth first.
		st := startStaging(dsts, srcs, max(1, runtime.GOMAXPROCS(0)-2))
		for i := range round {
			j, s := &round[i], slots[i]
			dst := j.layer.rows[j.row].dev
			for at, first := 0, true; first || at < c.size; first = false {
				end := min(st.prefix(i, at+c.run), at+c.run)
				if end == c.size {
					c.stagingBytes.Add(int64(c.size))
				}
				ev, err := c.dev.CopyToRow(dst, s.buf, at, end-at)
				if err != nil {
					st.wait()
					if len(j.evs) > 0 {
						issued++
					}
					part := ""
					if at > 0 || end < c.size {
						part = fmt.Sprintf(" (bytes %d..%d of %d)", at, end, c.size)
					}
					return issued, fmt.Errorf("enqueue copy of expert %d to row %d%s: %w", j.expert, j.row, part, err)
				}
				if len(j.evs) == 0 {
					j.slot = s
					s.pending = j
				}
				j.evs, j.sent = append(j.evs, ev), end
				at = end
			}
			issued++
		}
		st.wait()
	}
	return issued, nil
}
