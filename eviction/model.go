package eviction

import (
	"errors"
	"fmt"
	"slices"
)

// Model is a deterministic model of the residency cache's counters
// (runtime/cache): the same initial placement, the same policy calls in
// the same order, the same victim choice and the same counting, without
// rows, devices, staging or goroutines. Applying a recorded routing trace
// to a Model built from the record's setup reproduces the cache's hits,
// misses, evictions, copies and prefetch counters exactly; the verifier
// replays recorded traces with it, the simulator asks it what another
// policy or capacity would have done, and runtime/cache holds itself to it
// with a differential test.
//
// Assumptions, true of the sequential engine (one request at a time, one
// layer at a time; leases are released per layer) and stated here because
// the model depends on them:
//
//   - When a lease's miss (or a prefetch) chooses victims, no other lease
//     of the layer is outstanding: only the routed (or predicted) group
//     itself is unevictable. The cache also refuses leased rows; with no
//     other lease held the two rules agree.
//   - A lease event is the lease and its serve, with no other call on the
//     layer between them.
//   - No spare-row shortage (ErrNoSpare) happens: every retired row is
//     unleased and reclaimable when a transaction reserves rows, and the
//     spare pool the layers share holds at least a group's worth.
//   - No device error: every copy completes and is counted.
//
// Every layer has its own state, so only the order of events within a
// layer matters.
type Model struct {
	cfg    Config
	layers []modelLayer
	c      Counters
}

// Config is the cache shape a Model reproduces.
type Config struct {
	Layers, Experts, Capacity int
	// Policy and Placement name the eviction policy and the initial
	// placement; "" selects DefaultPolicy and DefaultPlacement.
	Policy, Placement string
	// RecordBytes is the size of one expert record: the bytes of one
	// host-to-device copy.
	RecordBytes int64
	// GroupSize, when positive, is the largest group an event may carry
	// (the cache's Options.GroupSize, the model's top-k); 0 allows up to
	// Capacity.
	GroupSize int
}

// Counters mirror runtime/cache's counters of routed lookups, copies and
// prefetch, counted from NewModel on (the initial placement's copies are
// preparation, not counted: the cache counts them before Admit, and the
// worker's request counters start after it).
type Counters struct {
	Hits, Misses, Evictions, H2DCopies, H2DBytes int64

	PrefetchIssued, PrefetchLoaded, PrefetchUsed, PrefetchH2DBytes     int64
	PrefetchGroups, PrefetchPredicted, PrefetchRouted, PrefetchOverlap int64

	LayerHits, LayerMisses, LayerEvictions, LayerH2DBytes, LayerH2DCopies []int64
}

// Sub returns c - base field by field (the counters of a stretch of
// events between two snapshots).
func (c Counters) Sub(base Counters) Counters {
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
	return Counters{
		Hits: c.Hits - base.Hits, Misses: c.Misses - base.Misses, Evictions: c.Evictions - base.Evictions,
		H2DCopies: c.H2DCopies - base.H2DCopies, H2DBytes: c.H2DBytes - base.H2DBytes,
		PrefetchIssued: c.PrefetchIssued - base.PrefetchIssued, PrefetchLoaded: c.PrefetchLoaded - base.PrefetchLoaded,
		PrefetchUsed: c.PrefetchUsed - base.PrefetchUsed, PrefetchH2DBytes: c.PrefetchH2DBytes - base.PrefetchH2DBytes,
		PrefetchGroups: c.PrefetchGroups - base.PrefetchGroups, PrefetchPredicted: c.PrefetchPredicted - base.PrefetchPredicted,
		PrefetchRouted: c.PrefetchRouted - base.PrefetchRouted, PrefetchOverlap: c.PrefetchOverlap - base.PrefetchOverlap,
		LayerHits:      sub(c.LayerHits, base.LayerHits),
		LayerMisses:    sub(c.LayerMisses, base.LayerMisses),
		LayerEvictions: sub(c.LayerEvictions, base.LayerEvictions),
		LayerH2DBytes:  sub(c.LayerH2DBytes, base.LayerH2DBytes),
		LayerH2DCopies: sub(c.LayerH2DCopies, base.LayerH2DCopies),
	}
}

// clone returns a deep copy.
func (c Counters) clone() Counters {
	c.LayerHits = slices.Clone(c.LayerHits)
	c.LayerMisses = slices.Clone(c.LayerMisses)
	c.LayerEvictions = slices.Clone(c.LayerEvictions)
	c.LayerH2DBytes = slices.Clone(c.LayerH2DBytes)
	c.LayerH2DCopies = slices.Clone(c.LayerH2DCopies)
	return c
}

// modelLayer is one layer's residency: what is published, the policy's
// order, and the prefetch bookkeeping (runtime/cache prefetchPolicy).
type modelLayer struct {
	resident  []bool
	size      int
	policy    Policy
	fresh     []bool // published by a prefetch and not served since
	predicted []int  // the latest prediction no lease scored yet; nil when none
}

// ErrEvent is wrapped by Apply's errors for events the cache would have
// refused (validation) or could not have served.
var ErrEvent = errors.New("invalid cache event")

// NewModel returns the model of a cache just after New: every layer holds
// the initial placement, inserted into the policy in load order, and every
// counter is zero.
func NewModel(cfg Config) (*Model, error) {
	if cfg.Layers < 1 || cfg.Experts < 1 {
		return nil, fmt.Errorf("eviction: model of %d layers x %d experts", cfg.Layers, cfg.Experts)
	}
	if cfg.GroupSize < 0 || cfg.GroupSize > cfg.Capacity {
		return nil, fmt.Errorf("eviction: group size %d outside 0..%d (capacity)", cfg.GroupSize, cfg.Capacity)
	}
	if cfg.RecordBytes < 0 {
		return nil, fmt.Errorf("eviction: record bytes %d", cfg.RecordBytes)
	}
	placed, err := InitialPlacement(cfg.Placement, cfg.Experts, cfg.Capacity)
	if err != nil {
		return nil, fmt.Errorf("eviction: model: %w", err)
	}
	m := &Model{cfg: cfg, layers: make([]modelLayer, cfg.Layers)}
	for i := range m.layers {
		p, err := NewPolicy(cfg.Policy, cfg.Experts)
		if err != nil {
			return nil, fmt.Errorf("eviction: model: %w", err)
		}
		l := modelLayer{resident: make([]bool, cfg.Experts), fresh: make([]bool, cfg.Experts), policy: p}
		for _, e := range placed {
			l.resident[e] = true
			p.Insert(e)
		}
		l.size = len(placed)
		m.layers[i] = l
	}
	n := cfg.Layers
	m.c = Counters{
		LayerHits: make([]int64, n), LayerMisses: make([]int64, n), LayerEvictions: make([]int64, n),
		LayerH2DBytes: make([]int64, n), LayerH2DCopies: make([]int64, n),
	}
	return m, nil
}

// Config returns the configuration the model was built with.
func (m *Model) Config() Config { return m.cfg }

// Counters returns the totals since NewModel (a copy).
func (m *Model) Counters() Counters { return m.c.clone() }

// Resident returns the experts published in a layer, sorted (nil for a
// layer out of range).
func (m *Model) Resident(layer int) []int {
	if layer < 0 || layer >= len(m.layers) {
		return nil
	}
	var out []int
	for e, r := range m.layers[layer].resident {
		if r {
			out = append(out, e)
		}
	}
	return out
}

// Apply applies one event exactly as the cache does it: a KindLease is
// Lease (scoring the layer's pending prediction) followed by Serve; a
// KindPrefetch is Prefetch with its transaction. An event the cache would
// have refused (layer or expert out of range, a group too large, empty or
// with a duplicate) changes nothing and returns an error wrapping
// ErrEvent.
func (m *Model) Apply(ev Event) error {
	if err := m.check(ev); err != nil {
		return err
	}
	switch ev.Kind {
	case KindLease:
		return m.lease(ev.Layer, ev.IDs)
	case KindBatch:
		if err := m.lease(ev.Layer, ev.IDs); err != nil {
			return err
		}
		extra := int64(ev.Lookups() - len(ev.IDs))
		m.c.Hits += extra
		m.c.LayerHits[ev.Layer] += extra
		return nil
	case KindPrefetch:
		m.prefetch(ev.Layer, ev.IDs)
		return nil
	}
	return fmt.Errorf("eviction: %w: kind %d", ErrEvent, ev.Kind)
}

// check validates an event like the cache's checkGroup.
func (m *Model) check(ev Event) error {
	if ev.Kind != KindLease && ev.Kind != KindPrefetch && ev.Kind != KindBatch {
		return fmt.Errorf("eviction: %w: kind %d", ErrEvent, ev.Kind)
	}
	if err := checkUses(ev); err != nil {
		return err
	}
	if ev.Layer < 0 || ev.Layer >= len(m.layers) {
		return fmt.Errorf("eviction: %w: %s of layer %d outside 0..%d", ErrEvent, ev.Kind, ev.Layer, len(m.layers)-1)
	}
	maxGroup := m.cfg.GroupSize
	if maxGroup == 0 {
		maxGroup = m.cfg.Capacity
	}
	if len(ev.IDs) == 0 || len(ev.IDs) > maxGroup {
		return fmt.Errorf("eviction: %w: %s of layer %d: group of %d experts, want 1..%d", ErrEvent, ev.Kind, ev.Layer, len(ev.IDs), maxGroup)
	}
	for i, e := range ev.IDs {
		if e < 0 || e >= m.cfg.Experts {
			return fmt.Errorf("eviction: %w: %s of layer %d: expert %d outside 0..%d", ErrEvent, ev.Kind, ev.Layer, e, m.cfg.Experts-1)
		}
		if slices.Contains(ev.IDs[:i], e) {
			return fmt.Errorf("eviction: %w: %s of layer %d: expert %d twice in group %v", ErrEvent, ev.Kind, ev.Layer, e, ev.IDs)
		}
	}
	return nil
}

// checkUses checks a batch's uses (one of at least 1 per id) and that no
// other kind carries any.
func checkUses(ev Event) error {
	if ev.Kind != KindBatch {
		if ev.Uses != nil {
			return fmt.Errorf("eviction: %w: %s of layer %d carries uses", ErrEvent, ev.Kind, ev.Layer)
		}
		return nil
	}
	if len(ev.Uses) != len(ev.IDs) {
		return fmt.Errorf("eviction: %w: batch of layer %d: %d uses for %d experts", ErrEvent, ev.Layer, len(ev.Uses), len(ev.IDs))
	}
	for i, u := range ev.Uses {
		if u < 1 {
			return fmt.Errorf("eviction: %w: batch of layer %d: expert %d has %d uses", ErrEvent, ev.Layer, ev.IDs[i], u)
		}
	}
	return nil
}

// hit is Policy.Hit through the cache's prefetch wrapper: the first hit
// of a prefetched expert counts as used.
func (m *Model) hit(l *modelLayer, e int) {
	if l.fresh[e] {
		l.fresh[e] = false
		m.c.PrefetchUsed++
	}
	l.policy.Hit(e)
}

// evict is Policy.Remove through the wrapper, and the unpublication.
func (m *Model) evict(l *modelLayer, e int) {
	l.fresh[e] = false
	l.policy.Remove(e)
	l.resident[e] = false
	l.size--
}

// copies counts n completed host-to-device copies of layer li.
func (m *Model) copies(li, n int) {
	b := int64(n) * m.cfg.RecordBytes
	m.c.H2DCopies += int64(n)
	m.c.H2DBytes += b
	m.c.LayerH2DCopies[li] += int64(n)
	m.c.LayerH2DBytes[li] += b
}

// lease is Cache.Lease (routed: score the pending prediction) then
// lease.Serve (serveHit, or the miss transaction).
func (m *Model) lease(li int, ids []int) error {
	l := &m.layers[li]
	if l.predicted != nil {
		overlap := 0
		for _, e := range ids {
			if slices.Contains(l.predicted, e) {
				overlap++
			}
		}
		m.c.PrefetchGroups++
		m.c.PrefetchPredicted += int64(len(l.predicted))
		m.c.PrefetchRouted += int64(len(ids))
		m.c.PrefetchOverlap += int64(overlap)
		l.predicted = nil
	}
	var missing []int
	for _, e := range ids {
		if !l.resident[e] {
			missing = append(missing, e)
		}
	}
	if len(missing) == 0 {
		for _, e := range ids {
			m.hit(l, e)
		}
		m.c.Hits += int64(len(ids))
		m.c.LayerHits[li] += int64(len(ids))
		return nil
	}
	nEvict := max(0, len(missing)-(m.cfg.Capacity-l.size))
	victims := l.policy.Victims(nEvict, func(e int) bool { return !slices.Contains(ids, e) })
	if len(victims) < nEvict {
		return fmt.Errorf("eviction: %w: layer %d: group %v misses %d experts and only %d others can be evicted (capacity %d)",
			ErrEvent, li, ids, len(missing), len(victims), m.cfg.Capacity)
	}
	m.copies(li, len(missing))
	for _, v := range victims {
		m.evict(l, v)
	}
	for _, e := range ids {
		if slices.Contains(missing, e) {
			l.policy.Insert(e)
			l.resident[e] = true
			l.size++
		} else {
			m.hit(l, e)
		}
	}
	hits, misses := int64(len(ids)-len(missing)), int64(len(missing))
	m.c.Hits += hits
	m.c.Misses += misses
	m.c.Evictions += int64(len(victims))
	m.c.LayerHits[li] += hits
	m.c.LayerMisses[li] += misses
	m.c.LayerEvictions[li] += int64(len(victims))
	return nil
}

// prefetch is Cache.Prefetch and its transaction (Cache.prefetch): the
// prediction becomes the layer's pending one; the missing predicted
// experts, cut to the free room plus the victims found outside the
// prediction, are loaded (head of the group first) and marked fresh.
func (m *Model) prefetch(li int, ids []int) {
	l := &m.layers[li]
	l.predicted = slices.Clone(ids)
	var missing []int
	for _, e := range ids {
		if !l.resident[e] {
			missing = append(missing, e)
		}
	}
	if len(missing) == 0 {
		return
	}
	m.c.PrefetchIssued += int64(len(missing))
	room := max(0, m.cfg.Capacity-l.size)
	victims := l.policy.Victims(max(0, len(missing)-room), func(e int) bool { return !slices.Contains(ids, e) })
	missing = missing[:min(len(missing), room+len(victims))]
	if len(missing) == 0 {
		return
	}
	m.copies(li, len(missing))
	m.c.PrefetchH2DBytes += int64(len(missing)) * m.cfg.RecordBytes
	for _, v := range victims {
		m.evict(l, v)
	}
	for _, e := range missing {
		l.policy.Insert(e)
		l.resident[e] = true
		l.size++
		l.fresh[e] = true
	}
	m.c.Evictions += int64(len(victims))
	m.c.LayerEvictions[li] += int64(len(victims))
	m.c.PrefetchLoaded += int64(len(missing))
}
