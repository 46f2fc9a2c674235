package device

import "github.com/horizon-runmap/horizon/runtime/backend"

// ExpertRows is the residency cache as its consumers see it: one protocol
// for every step mode, for miss/hit overlap and for prefetch.
// runtime/cache's resident-qpacked-cache-v1 implements it.
//
// A consumer
//
//  1. captures a layer's generation snapshot (Snapshot) when it needs the
//     layer's published rows on its side: a captured step's device table
//     of every row (graph-full: once, the snapshot is pinned; graph-wait:
//     again whenever Seq changed). The op-by-op and graph-segmented steps
//     skip it: they see rows only through leases;
//  2. takes a lease on the group its layer routed (Lease). Taking it
//     scores the layer's pending prediction and waits for the layer's
//     prefetch in flight (so what the lease finds is a function of the
//     token stream), then leases the group's rows published now
//     (Lease.Resident), counting nothing;
//  3. serves the group (Lease.Serve): the misses are loaded by a miss
//     transaction and published, and the group's hits and misses are
//     counted, here and nowhere else. A step that already read the rows
//     through a pinned snapshot serves the lease only to count it;
//  4. releases the lease once the compute that reads the rows has been
//     issued (Lease.Release).
//
// A prediction (Prefetch) is a hint that starts loading a guessed group's
// misses; the next Lease of its layer scores it and waits for it.
type ExpertRows interface {
	// Snapshot returns layer's published generation.
	Snapshot(layer int) (Snapshot, error)
	// Lease takes a lease on the routed group ids of layer (see above).
	Lease(layer int, ids []int) (Lease, error)
	// LeaseBatch is Lease for a batched prefill's wave: ids are distinct
	// experts of layer (at most a routed group's worth) that uses[i] >= 1
	// routed (token, slot) lookups read. Serve counts the first lookup of
	// each expert as a lease's, and the others as hits, since they read
	// the row the lease holds; the eviction policy sees the group once.
	LeaseBatch(layer int, ids []int, uses []int) (Lease, error)
	// Prefetch starts loading the experts of ids, a predicted group of
	// layer, that are not published. It is best effort, leases nothing
	// and counts no hit or miss.
	Prefetch(layer int, ids []int) error
}

// Snapshot is a layer's published generation as a consumer captured it.
type Snapshot struct {
	Layer int
	// Seq is the generation's sequence number; it changes whenever the
	// layer's residency does.
	Seq uint64
	// Rows is the row of every published expert, indexed by expert (nil
	// where not published).
	Rows []backend.Tensor
	// Pinned is set at full residency: every expert is published for the
	// life of the cache and no row ever moves, so a device may read the
	// rows through a table of its own without a lease per group.
	Pinned bool
}

// Lease is a consumer's hold on one routed group's rows (see ExpertRows).
type Lease interface {
	// Resident returns, in the order of the group, the rows that were
	// published when the lease was taken (nil for the others). They stay
	// the experts' rows until Release: a leased row is never a victim.
	Resident() []backend.Tensor
	// Serve loads the group's misses, publishes them, counts the group's
	// hits and misses and returns every row in the order of the group.
	// A second call returns the same rows and counts nothing.
	Serve() ([]backend.Tensor, error)
	// Release ends the lease (idempotent). The cache reuses a row only
	// after the compute issued before Release has completed.
	Release()
}

// Acquire is the protocol's common case for a consumer that needs the
// whole group at once: Lease then Serve. Call release once the compute
// that reads rows has been issued.
func Acquire(er ExpertRows, layer int, ids []int) (rows []backend.Tensor, release func(), err error) {
	l, err := er.Lease(layer, ids)
	if err != nil {
		return nil, nil, err
	}
	rows, err = l.Serve()
	if err != nil {
		l.Release()
		return nil, nil, err
	}
	return rows, l.Release, nil
}
