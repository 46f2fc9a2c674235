// Package cache implements resident-qpacked-cache-v1, the budgeted device
// cache of routed-expert records (DESIGN.md section 5).
//
// # Model
//
// Host authority. Before the first request a worker reads every routed
// expert record of the artifact into process-owned anonymous memory (not a
// mapping of the file), touches every page, has the SHA-256 of experts.bin
// verified once while reading, makes the memory read-only with mprotect, and
// closes the artifact. That Authority is complete even when every expert
// also fits on the device, and it is the only source the cache copies from.
// Writing to it after that kills the process (SIGSEGV).
//
// Rows. Each routed layer owns Capacity published rows on the device, one
// record each, and one pool of Spares unpublished rows serves the misses
// of all layers (a reserved row joins the layer it is loaded for; a
// victim's row returns to the pool once its readers are done; none is
// allocated at full residency); with the staged transport one ring of
// Staging pinned host buffers serves the transfers of all layers. All of it is allocated in New, before admission, and New
// fails with an error naming what could not be allocated. Spares and staging are physical allocations,
// not residency: Capacity counts published rows only, and partial residency
// (Capacity < experts) and full residency (Capacity = experts) run the same
// code. New loads the initial placement ("canonical": experts 0..c-1;
// "strided": experts i*E/c) through the same copy path.
//
// Transports. Options.Transport, declared per configuration, fixes how a
// record reaches its row. "staged" (the default): the host cores copy the
// transaction's authority records into pinned staging buffers, all at once
// and front to back in pieces (startStaging), and the copy stream moves
// each buffer to its row in runs of stageRun bytes, a run as soon as its
// bytes are staged (issueStaged). "registered": New page-locks the
// whole authority once (Device.RegisterHost; cuMemHostRegister with
// READ_ONLY on CUDA, since the memory is PROT_READ), timed in the
// host_register_ns counter, and the copy stream moves each record from the
// authority to the row directly (Device.CopyHostToRow); there is no staging
// ring (Options.Staging must be 0) and no host copy. Close unregisters it,
// and Authority.Close refuses to unmap memory still registered. Everything
// else (copy stream, completion events, publication after completion,
// victim reuse after compute events, counters) is the same code.
//
// Generations and leases. A generation is an immutable map expert -> row of
// one layer, published with an atomic pointer store. Every consumer (every
// step mode, miss/hit overlap, prefetch) uses one protocol,
// device.ExpertRows (lease.go):
//
//   - Snapshot(layer) returns the layer's published generation: the row
//     of every published expert, its sequence number, and Pinned at full
//     residency, where no row ever moves (a captured step reads the rows
//     through a device table of its own: graph-full once, graph-wait again
//     whenever the sequence number changed). It counts nothing.
//   - Lease(layer, ids) takes a lease on a routed group (the top-k experts
//     of a token): it scores the layer's pending prediction, waits for the
//     layer's prefetch in flight, and leases the rows of the group's
//     experts published now (Lease.Resident: a consumer may compute on
//     them while the misses copy). It counts nothing and leaves the
//     eviction policy alone.
//   - Lease.Serve serves the group: from the current generation when every
//     expert is published, else through a miss transaction; it leases the
//     rows not leased yet, and counts the group's hits and misses, the only
//     place they are counted. A second Serve returns the same rows.
//   - Lease.Release (idempotent) records an event on the compute stream
//     and drops the leases.
//
// A row is reused only when no lease on it is held and the compute event
// of its last release has completed, so a consumer of an older generation
// keeps reading the expert it was given, whatever was published since. At
// full residency no row is ever reused, so Release records no event; Close
// records one final compute event and waits for it before freeing the rows.
//
// Miss transactions. A group with a missing expert runs a miss transaction;
// transactions are serialised by one mutex. The transaction chooses victims
// (published experts outside the group and not leased) with the layer's
// eviction Policy ("lru" by default, "fifo" declared as the alternative),
// reserves spare rows (retired rows whose readers are done first, from
// any layer; waiting, only if it must, for the compute events of the
// others), copies authority -> staging -> spare row on the copy
// stream (a staging buffer is rewritten only after its previous copy's
// completion event), or authority -> spare row with the registered
// transport, waits for every copy of the group, and only then
// publishes the new generation, which includes the whole group. Eviction
// discards the device copy: nothing is copied back and the authority is
// never written.
//
// Failures. Before publication nothing published has been touched, so a
// failure there returns an error and leaves the previous generation
// authoritative; rows and staging buffers whose copy the device could not
// confirm (a completion event reported an error) are quarantined rather
// than reused, because the device may still be writing them. A failure
// after publication (a compute event that cannot be queried while retiring
// victims, a compute event that cannot be recorded at release) is
// ambiguous: the new generation is visible and the cache can no longer
// prove which rows are free, so the cache faults and every later Lease,
// Serve and Prefetch returns the same error, which wraps ErrFaulted.
//
// Speculative prefetch. Prefetch(layer, ids) takes a predicted routed
// group and loads its unpublished experts through the miss machinery
// (victims by policy, spare rows, copy stream, completion events,
// publication only after every copy), in a goroutine that holds the
// transaction mutex, so the caller's compute overlaps the copies and a
// later miss waits for it. It never evicts a leased or predicted expert,
// loads fewer experts (or none) when victims or spare rows are lacking,
// and leases nothing. A Serve serves exactly the group it was leased for,
// as before: a prefetched expert the group contains is a hit, anything the
// prediction missed is a miss loaded synchronously, so a prediction can
// cost copies and evictions but never change what a consumer reads. The
// Lease of the group the layer then routed scores the prediction
// (precision and recall counters) and waits for the layer's prefetch, so
// that hits, misses and evictions do not depend on goroutine timing. The
// engine's
// "next-layer" option (engine.LoadOptions.Prefetch) runs layer L+1's router
// on layer L's input to predict; it is a declared configuration option,
// off by default and off in every committed campaign (residency39
// included), and on CUDA it runs only with op-by-op steps (captured steps
// route on the device and have no place to predict). See prefetch.go.
//
// Counters. Hits, misses, evictions, H2D bytes and copies per layer,
// staging bytes, the registration of the authority, and expert D2H bytes, writebacks, authority writes, request-time hash bytes
// and request-time artifact reads, each incremented where that work happens
// (see Counters for how each is observed), and the prefetch counters
// (issued, loaded, used, their H2D bytes, and predicted/routed/overlap
// sizes for precision and recall). Admit marks the end of
// preparation; BeginRequest and EndRequest give per-request totals (both
// first wait for a prefetch still in flight).
//
// # Concurrency and known weak spots
//
// Snapshot, Lease and Prefetch may be called from any goroutine; a lease's
// Resident and Serve belong to the goroutine that took it, its Release to
// any. A Lease and an all-hit Serve each take their layer's mutex for O(k)
// work (lease counts and the LRU order need it); that mutex is never held
// across a device wait. A miss transaction holds the transaction mutex
// across its copies, so misses of different layers do not overlap; the
// first version accepts that. A prefetch is such a transaction: a Prefetch
// call waits for the previous prefetch if it still runs, a Lease waits for
// its layer's prefetch, and a Serve that misses waits for a prefetch of
// any layer, even one whose prediction it does not need.
//
// Victims are chosen before the copies; a consumer may lease a victim
// through the still-published generation while the copies run. That is
// safe (the victim is retired with its lease and reused only after release)
// but it means the victim was not the least recently used expert at
// publication time. With leases held for long, a miss can fail with
// ErrNoVictim or ErrNoSpare; the previous generation stays published and
// the caller may release and retry. A lease holds the rows of its group's
// resident experts from Lease, not only from Serve: in between they are no
// victims for another consumer's miss of the layer. Quarantined rows and
// staging buffers are never recovered.
//
// The compute-event rule assumes the device has one in-order compute
// stream: Device.RecordCompute covers every read issued before it.
package cache
