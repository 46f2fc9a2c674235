package cache

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/horizon-runmap/horizon/eviction"
	"github.com/horizon-runmap/horizon/runtime/backend"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrFaulted wraps the cause of an ambiguous failure after publication.
	// Once returned, every later Lease, Serve and Prefetch returns the same
	// error.
	ErrFaulted = errors.New("expert cache faulted")
	// ErrClosed is returned by Snapshot, Lease, Serve and Prefetch after
	// Close.
	ErrClosed = errors.New("expert cache closed")
	// ErrNoVictim: a miss needs to evict more experts than are published,
	// outside the routed group and not leased. The previous generation
	// stays published; release leases (or raise the capacity) and retry.
	ErrNoVictim = errors.New("no evictable expert")
	// ErrNoSpare: a miss needs more unpublished rows than are free or
	// reclaimable (rows still leased through older generations, or
	// quarantined after device errors, do not count). The previous
	// generation stays published.
	ErrNoSpare = errors.New("no spare row")
	// ErrNoStaging: every staging buffer is quarantined after device
	// errors.
	ErrNoStaging = errors.New("no usable staging buffer")
	// ErrLeased is returned by Close while leases are still held.
	ErrLeased = errors.New("leases still held")

	errNoRequest = errors.New("EndRequest without BeginRequest")
)

// Options fixes a cache's shape before admission.
type Options struct {
	// Capacity is the number of published rows per routed layer, in
	// 1..experts. The caller checks Capacity >= top-k.
	Capacity int
	// Spares is the number of unpublished rows the layers share (one
	// pool: misses are serialised, so one transaction at a time takes
	// rows from it, and a victim's row returns to it once its readers are
	// done); at least GroupSize so that a whole routed group can miss at
	// once. At full residency (Capacity equal to the expert count) no miss
	// can happen and no spare row is allocated, whatever Spares says.
	Spares int
	// Staging is the number of pinned staging buffers (one record each) in
	// the transfer ring shared by all layers: at least 1 with the staged
	// transport, 0 with the registered transport (which has no ring).
	Staging int
	// GroupSize is the largest routed group a Lease takes (top-k), in
	// 1..Capacity.
	GroupSize int
	// Policy names the eviction policy (see Policies); "" is "lru".
	Policy string
	// Placement names the initial placement (see Placements); "" is
	// "canonical".
	Placement string
	// Transport names how a miss moves a record from the host authority to
	// its row (see Transports); "" is "staged".
	Transport string
	// Trace records every validated Lease and Prefetch as an
	// eviction.Event (see TakeTrace). Off by default.
	Trace bool
}

// Transports: how a copy reaches a row.
const (
	// TransportStaged copies authority -> pinned staging buffer (on host
	// cores, startStaging) -> row (on the copy stream, in runs as the bytes
	// land: issueStaged). The default.
	TransportStaged = "staged"
	// TransportRegistered page-locks the whole authority once, in New
	// (Device.RegisterHost, read-only), and copies authority -> row on the
	// copy stream (Device.CopyHostToRow): no staging buffers and no host
	// copy.
	TransportRegistered = "registered"
	// DefaultTransport is the transport of Options.Transport "".
	DefaultTransport = TransportStaged
)

// Transports lists the declared transports, sorted.
func Transports() []string { return []string{TransportRegistered, TransportStaged} }

// validate checks o against a model of experts experts per layer and
// returns it with defaults filled in.
func (o Options) validate(experts int) (Options, error) {
	if o.Policy == "" {
		o.Policy = DefaultPolicy
	}
	if o.Placement == "" {
		o.Placement = DefaultPlacement
	}
	if o.Transport == "" {
		o.Transport = DefaultTransport
	}
	if o.Transport != TransportStaged && o.Transport != TransportRegistered {
		return o, fmt.Errorf("unknown transport %q (declared: %v)", o.Transport, Transports())
	}
	switch {
	case o.Capacity < 1 || o.Capacity > experts:
		return o, fmt.Errorf("capacity %d outside 1..%d (experts per layer)", o.Capacity, experts)
	case o.GroupSize < 1 || o.GroupSize > o.Capacity:
		return o, fmt.Errorf("group size %d outside 1..%d (capacity): a routed group must fit in the published rows", o.GroupSize, o.Capacity)
	case o.Spares < o.GroupSize:
		return o, fmt.Errorf("%d spare rows, need at least the group size %d so that a whole routed group can miss", o.Spares, o.GroupSize)
	case o.Transport == TransportStaged && o.Staging < 1:
		return o, fmt.Errorf("%d staging buffers: staging too small, need at least 1", o.Staging)
	case o.Transport == TransportRegistered && o.Staging != 0:
		return o, fmt.Errorf("%d staging buffers with the %s transport, which copies from the page-locked authority and has no staging ring: want 0", o.Staging, o.Transport)
	}
	if !slices.Contains(Policies(), o.Policy) {
		return o, fmt.Errorf("unknown eviction policy %q (declared: %v)", o.Policy, Policies())
	}
	if !slices.Contains(Placements(), o.Placement) {
		return o, fmt.Errorf("unknown placement %q (declared: %v)", o.Placement, Placements())
	}
	return o, nil
}

// Cache is resident-qpacked-cache-v1 over a Device. See the package
// documentation for the contract.
type Cache struct {
	dev    Device
	auth   *Authority
	opts   Options
	size   int // record bytes
	nexp   int
	layers []*layer
	// rows is every physical row: each layer's capacity rows, then the
	// spare pool (partial residency only). A row belongs to one layer or
	// to the pool (row.owner); every layer's rows field is this slice, so
	// a generation's row indices are indices here. A layer's lock guards
	// the fields of the rows it owns; missMu guards the pool's rows and
	// every change of owner.
	rows []*row

	// missMu serialises miss transactions (and Close). It guards ring and
	// unregister.
	missMu sync.Mutex
	ring   stagingRing // empty with the registered transport

	// unregister undoes the registration of the authority (registered
	// transport; nil otherwise or once undone). registeredBytes and
	// registerNs are what New registered and how long it took; written
	// before New returns, read-only afterwards.
	unregister      func() error
	registeredBytes int64
	registerNs      int64

	// stagingBytes counts authority bytes copied into staging buffers.
	stagingBytes atomic.Int64
	// run is the most bytes of a record one staged copy call moves
	// (stageRun; tests shorten it to see a record go in several runs).
	run int

	fault atomic.Pointer[faultBox]

	// Counted where a writeback would happen; see Counters.
	d2hExpertBytes, writebacks atomic.Int64

	// The routing trace (Options.Trace; trace.go). traceMu guards both;
	// traceIDs is the arena the events' ids live in.
	traceMu  sync.Mutex
	trace    []eviction.Event
	traceIDs []int

	reqMu     sync.Mutex
	admitted  bool
	inRequest bool
	prep      Counters
	reqStart  Counters
}

type faultBox struct{ err error }

// rowState is where a physical row is in its life:
//
//	spare --reserve--> loading --publish--> published --evict--> retired
//	  ^                   |                                        |
//	  +------abort--------+            leases == 0 && read event --+
//	                      +--copy not confirmed--> quarantined (never reused)
//
// A spare row is in the shared pool (owner poolOwner); reserve hands it to
// the layer that loads it, and it returns to the pool when it becomes
// spare again. The initial placement's rows start published in their
// layer.
type rowState uint8

const (
	rowSpare rowState = iota
	rowLoading
	rowPublished
	rowRetired
	rowQuarantined
)

func (s rowState) String() string {
	return [...]string{"spare", "loading", "published", "retired", "quarantined"}[s]
}

// poolOwner is row.owner for a row in the shared spare pool.
const poolOwner = -1

// row is one physical device row.
type row struct {
	dev    Row
	tensor backend.Tensor
	owner  int // the layer it belongs to, or poolOwner
	state  rowState
	expert int // the expert it holds while published or retired, else -1
	leases int // outstanding leases (any generation)
	// read is the compute event recorded by the latest release: it
	// completes after every read of the row issued before that release.
	// nil when no consumer has read the row since it was loaded, and
	// always nil at full residency, where releases record no event (the
	// row is never reused; Close records one).
	read Event
}

// generation is one immutable published expert -> row map of a layer.
type generation struct {
	seq   uint64
	rowOf []int32 // [E] row index, -1 when not published
	size  int     // published experts
}

func (g *generation) with(victims []int, loaded []int, rows []int) *generation {
	n := &generation{seq: g.seq + 1, rowOf: slices.Clone(g.rowOf), size: g.size - len(victims) + len(loaded)}
	for _, v := range victims {
		n.rowOf[v] = -1
	}
	for i, e := range loaded {
		n.rowOf[e] = int32(rows[i])
	}
	return n
}

// layer is the residency state of one routed layer.
type layer struct {
	index int
	gen   atomic.Pointer[generation] // written under mu, read anywhere

	mu      sync.Mutex // guards everything below and the fields of the rows it owns
	rows    []*row     // the cache's rows (Cache.rows): the layer's are those it owns
	retired []int      // row indices in retirement order
	policy  Policy
	closed  bool

	counters layerCounters
}

// New allocates every row and staging buffer, loads the initial placement
// of every layer through the normal copy path, and publishes generation 1
// of each layer. layers and experts must match the authority. It fails with
// a clear error, freeing what it allocated, when the options are invalid or
// the device cannot provide the memory.
func New(dev Device, auth *Authority, layers, experts int, o Options) (*Cache, error) {
	if dev == nil || auth == nil {
		return nil, errors.New("cache: nil device or authority")
	}
	if layers != auth.Layers() || experts != auth.Experts() {
		return nil, fmt.Errorf("cache: %d layers x %d experts, the authority holds %d x %d", layers, experts, auth.Layers(), auth.Experts())
	}
	o, err := o.validate(experts)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	placed, err := InitialPlacement(o.Placement, experts, o.Capacity)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	c := &Cache{dev: dev, auth: auth, opts: o, size: auth.RecordSize(), nexp: experts, run: stageRun}
	ok := false
	defer func() {
		if !ok {
			c.free()
		}
	}()
	if o.Transport == TransportRegistered {
		if err := c.registerAuthority(); err != nil {
			return nil, err
		}
	}
	if err := c.allocStaging(); err != nil {
		return nil, err
	}
	spares := o.Spares
	if o.Capacity == experts {
		// Full residency publishes every expert and can never miss, so a
		// spare row would never be written: none is allocated (the device
		// memory goes to nothing else).
		spares = 0
	}
	for l := 0; l < layers; l++ {
		pol, err := NewPolicy(o.Policy, experts)
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		c.layers = append(c.layers, &layer{index: l, policy: pol})
		if err := c.allocRows(l, o.Capacity, fmt.Sprintf("the %d rows of layer %d", o.Capacity, l)); err != nil {
			return nil, err
		}
	}
	if spares > 0 {
		if err := c.allocRows(poolOwner, spares, fmt.Sprintf("the %d spare rows the layers share", spares)); err != nil {
			return nil, err
		}
	}
	for _, ly := range c.layers {
		ly.rows = c.rows
	}
	if err := c.loadInitial(placed); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// allocRows appends n rows of c.size bytes owned by owner (a layer, or
// poolOwner) to c.rows, in one batch when the device can (RowsAllocator).
// what names them in errors.
func (c *Cache) allocRows(owner, n int, what string) error {
	dev, o := c.dev, c.opts
	hint := fmt.Sprintf("%d bytes each; capacity %d per layer + %d spare rows shared", c.size, o.Capacity, o.Spares)
	if ra, ok := dev.(RowsAllocator); ok {
		batch, err := ra.AllocRows(c.size, n)
		if err != nil {
			return fmt.Errorf("cache: %s: allocate %s (%s): %w; lower the capacity or spares, or free device memory", dev.Name(), what, hint, err)
		}
		// Every row handed out is the cache's from here, so that a
		// failure below frees them all.
		for _, dr := range batch {
			c.rows = append(c.rows, &row{dev: dr, tensor: dr.Tensor(), owner: owner, expert: -1})
		}
		if len(batch) != n {
			return fmt.Errorf("cache: %s: asked for %s, got %d rows", dev.Name(), what, len(batch))
		}
		for _, rw := range c.rows[len(c.rows)-n:] {
			if rw.tensor == nil || rw.tensor.Len() < c.size {
				return fmt.Errorf("cache: %s: a row of %s is %d bytes, a record needs %d", dev.Name(), what, lenOf(rw.tensor), c.size)
			}
		}
		return nil
	}
	for r := 0; r < n; r++ {
		dr, err := dev.AllocRow(c.size)
		if err != nil {
			return fmt.Errorf("cache: %s: allocate row %d of %s (%s): %w; lower the capacity or spares, or free device memory", dev.Name(), r, what, hint, err)
		}
		t := dr.Tensor()
		c.rows = append(c.rows, &row{dev: dr, tensor: t, owner: owner, expert: -1})
		if t == nil || t.Len() < c.size {
			return fmt.Errorf("cache: %s: row %d of %s is %d bytes, a record needs %d", dev.Name(), r, what, lenOf(t), c.size)
		}
	}
	return nil
}

// ownRows returns the indices of the rows layer l owns, in order.
func (c *Cache) ownRows(l int) []int {
	var out []int
	for i, r := range c.rows {
		if r.owner == l {
			out = append(out, i)
		}
	}
	return out
}

// toPool makes row r spare and returns it to the shared pool. The lock of
// the layer that owned it (if any) and missMu are held.
func (c *Cache) toPool(r *row) {
	r.state, r.owner, r.expert, r.read = rowSpare, poolOwner, -1, nil
}

func lenOf(t backend.Tensor) int {
	if t == nil {
		return 0
	}
	return t.Len()
}

// registerAuthority page-locks the whole authority for the registered
// transport and times it. The authority refuses to Close while it is
// registered (see Authority.pins).
func (c *Cache) registerAuthority() error {
	mem := c.auth.mem
	start := time.Now()
	unregister, err := c.dev.RegisterHost(mem)
	if err != nil {
		return fmt.Errorf("cache: %s: page-lock the host authority (%d bytes, read-only) for the %s transport: %w; use the %s transport or raise the locked-memory limit",
			c.dev.Name(), len(mem), TransportRegistered, err, TransportStaged)
	}
	c.registerNs = time.Since(start).Nanoseconds()
	c.registeredBytes = int64(len(mem))
	c.unregister = unregister
	c.auth.pins.Add(1)
	return nil
}

// allocStaging allocates the staging ring, each buffer one record
// (Options.Staging buffers: none with the registered transport).
func (c *Cache) allocStaging() error {
	for i := 0; i < c.opts.Staging; i++ {
		s, err := c.dev.AllocStaging(c.size)
		if err != nil {
			return fmt.Errorf("cache: %s: allocate pinned staging buffer %d of %d (%d bytes each): %w; lower Staging or free host memory", c.dev.Name(), i, c.opts.Staging, c.size, err)
		}
		c.ring.slots = append(c.ring.slots, &stagingSlot{buf: s, index: i})
		if n := len(s.Host()); n < c.size {
			return fmt.Errorf("cache: staging too small: buffer %d has %d bytes, one expert record needs %d", i, n, c.size)
		}
	}
	return nil
}

// loadInitial copies the placement into the capacity rows of every layer
// and publishes generation 1.
func (c *Cache) loadInitial(placed []int) error {
	for _, l := range c.layers {
		own := c.ownRows(l.index)
		jobs := make([]copyJob, len(placed))
		for i, e := range placed {
			jobs[i] = copyJob{layer: l, row: own[i], expert: e}
			l.rows[own[i]].state = rowLoading
		}
		if err := c.load(jobs); err != nil {
			return fmt.Errorf("cache: initial placement of layer %d: %w", l.index, err)
		}
		g := &generation{rowOf: make([]int32, c.nexp)}
		for i := range g.rowOf {
			g.rowOf[i] = -1
		}
		g = g.with(nil, placed, own[:len(placed)])
		l.mu.Lock()
		for i, e := range placed {
			l.rows[own[i]].state, l.rows[own[i]].expert = rowPublished, e
			l.policy.Insert(e)
		}
		l.gen.Store(g)
		l.mu.Unlock()
	}
	return nil
}

// free releases every row and staging buffer and unregisters the authority
// (New's failure path, Close).
func (c *Cache) free() error {
	var errs []error
	for _, l := range c.layers {
		l.mu.Lock()
		l.rows = nil
		l.mu.Unlock()
	}
	for i, r := range c.rows {
		if err := c.dev.FreeRow(r.dev); err != nil {
			errs = append(errs, fmt.Errorf("free row %d (%s): %w", i, ownerName(r.owner), err))
		}
	}
	c.rows = nil
	for _, s := range c.ring.slots {
		if err := c.dev.FreeStaging(s.buf); err != nil {
			errs = append(errs, fmt.Errorf("free staging buffer %d: %w", s.index, err))
		}
	}
	c.ring.slots = nil
	if c.unregister != nil {
		// Every copy was waited for (load never returns with a copy in
		// flight), so nothing reads the authority through the
		// registration any more.
		if err := c.unregister(); err != nil {
			// Still registered: keep the authority pinned (it will
			// not unmap).
			errs = append(errs, fmt.Errorf("unregister the host authority: %w", err))
		} else {
			c.auth.pins.Add(-1)
		}
		c.unregister = nil
	}
	return errors.Join(errs...)
}

// Options returns the options in force (defaults filled in).
func (c *Cache) Options() Options { return c.opts }

// Resident returns the experts of a layer's published generation, sorted,
// and the generation's sequence number (1 after New); nil and 0 for a
// layer out of range. It reads the atomically published generation without
// locking.
func (c *Cache) Resident(layer int) (experts []int, seq uint64) {
	if layer < 0 || layer >= len(c.layers) {
		return nil, 0
	}
	g := c.layers[layer].gen.Load()
	for e, r := range g.rowOf {
		if r >= 0 {
			experts = append(experts, e)
		}
	}
	return experts, g.seq
}

// faultErr is the sticky fault, or nil.
func (c *Cache) faultErr() error {
	if f := c.fault.Load(); f != nil {
		return f.err
	}
	return nil
}

// setFault faults the cache (the first cause wins) and returns the sticky
// error.
func (c *Cache) setFault(cause error) error {
	c.fault.CompareAndSwap(nil, &faultBox{err: fmt.Errorf("%w: %w", ErrFaulted, cause)})
	return c.fault.Load().err
}

// checkGroup validates a request.
func (c *Cache) checkGroup(layer int, ids []int) (*layer, error) {
	if layer < 0 || layer >= len(c.layers) {
		return nil, fmt.Errorf("cache: layer %d outside 0..%d", layer, len(c.layers)-1)
	}
	if len(ids) == 0 || len(ids) > c.opts.GroupSize {
		return nil, fmt.Errorf("cache: layer %d: group of %d experts, want 1..%d (Options.GroupSize)", layer, len(ids), c.opts.GroupSize)
	}
	for i, e := range ids {
		if e < 0 || e >= c.nexp {
			return nil, fmt.Errorf("cache: layer %d: expert %d outside 0..%d", layer, e, c.nexp-1)
		}
		if slices.Contains(ids[:i], e) {
			return nil, fmt.Errorf("cache: layer %d: expert %d twice in group %v", layer, e, ids)
		}
	}
	return c.layers[layer], nil
}

// ownerName names a row's owner in messages.
func ownerName(owner int) string {
	if owner == poolOwner {
		return "the spare pool"
	}
	return fmt.Sprintf("layer %d", owner)
}

// fullResidency reports whether every expert of every layer is published
// for good (Capacity equals the expert count): no miss can happen, so no
// row is ever retired, reclaimed or rewritten, and the layers' snapshots
// are pinned.
func (c *Cache) fullResidency() bool { return c.opts.Capacity == c.nexp }

// Close frees every row and staging buffer, and unregisters the authority
// (registered transport), after waiting for the compute that read the
// rows: the last compute event of each row and, at full residency, where
// releases record no event (see lease.Release), one compute event recorded
// now, which covers every read issued before Close. It fails with
// ErrLeased, freeing nothing, while any lease is held; Snapshot, Lease,
// Serve and Prefetch return ErrClosed afterwards either way. The device
// and the authority belong to the caller; close the cache before the
// authority.
func (c *Cache) Close() error {
	c.missMu.Lock()
	defer c.missMu.Unlock()
	leased := 0
	var events []Event
	for _, l := range c.layers {
		l.mu.Lock()
		if l.closed && l.rows == nil {
			l.mu.Unlock()
			return nil
		}
		l.closed = true
		for _, r := range l.rows {
			if r.owner != l.index {
				continue
			}
			leased += r.leases
			if r.read != nil {
				events = append(events, r.read)
			}
		}
		l.mu.Unlock()
	}
	if leased > 0 {
		return fmt.Errorf("cache: close: %d leases outstanding: %w", leased, ErrLeased)
	}
	if c.fullResidency() && len(c.layers) > 0 {
		ev, err := c.dev.RecordCompute()
		if err != nil {
			// Reads may still be running and no event covers them:
			// leave the memory allocated.
			return fmt.Errorf("cache: close: record the final compute event (full residency): %w", err)
		}
		events = append(events, ev)
	}
	var errs []error
	for _, ev := range events {
		if err := ev.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("cache: close: compute event: %w", err))
		}
	}
	if len(errs) > 0 {
		// Reads may still be running: leave the memory allocated.
		return errors.Join(errs...)
	}
	return c.free()
}
