//go:build cuda

package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// The host's side of a captured step: what it exchanges with the cache at
// the plan's routed-rows points, through the one cache protocol
// (device.ExpertRows: snapshot, lease, serve, release).

// serveSegment is the host's side of the k-th routed-rows instruction of a
// graph-segmented step, once its layer's routing is on the host: lease the
// routed group, serve it (misses are copied and published), write the
// rows' addresses into the layer's table and launch segment k+1. With
// overlap, when the group mixes hits and misses, the gate/up of the rows
// the lease holds already (Lease.Resident) is launched before Serve, so the
// hits compute while the misses copy; the misses' gate/up and rest[k+1]
// follow Serve.
func (s *stepper) serveSegment(k int) error {
	b := s.b
	i := s.prog.cuts[k]
	l := s.prog.body[i].Layer
	ids := s.layerIDs(0, l)
	lease, err := s.spec.Experts.Lease(l, ids)
	if err != nil {
		return fmt.Errorf("lease experts %v: %w", ids, err)
	}
	defer lease.Release()
	var early []bool // early[k]: expert k's gate/up was launched before Serve
	if s.spec.Overlap {
		hits := lease.Resident()
		n := 0
		for _, r := range hits {
			if r != nil {
				n++
			}
		}
		if n > 0 && n < len(ids) {
			clear(s.recs)
			for j, r := range hits {
				if r == nil {
					continue
				}
				if err := s.rowAddrs(l, ids[j:j+1], hits[j:j+1], s.recs[8*j:8*j+8]); err != nil {
					return err
				}
			}
			early = make([]bool, len(ids))
			for j, r := range hits {
				early[j] = r != nil
			}
			if err := b.upload(s.group(l), s.recs); err != nil {
				return err
			}
			if err := s.gateUpRuns(i, early, true); err != nil {
				return fmt.Errorf("hit gate/up: %w", err)
			}
			s.splitLayers++
			s.earlyExperts += int64(n)
		}
	}
	rows, err := lease.Serve()
	if err != nil {
		return fmt.Errorf("serve experts %v: %w", ids, err)
	}
	if err := s.rowAddrs(l, ids, rows, s.recs); err != nil {
		return err
	}
	if err := b.upload(s.group(l), s.recs); err != nil {
		return err
	}
	if early == nil {
		return b.o.async(func() error { return b.launchGraph(s.segs[k+1]) })
	}
	if err := s.gateUpRuns(i, early, false); err != nil {
		return fmt.Errorf("miss gate/up: %w", err)
	}
	return b.o.async(func() error { return b.launchGraph(s.rest[k+1]) })
}

// gateUpRuns launches the routed gate/up of the routed-experts instruction
// at body[i] for the experts k with early[k] == want, one launch per run of
// consecutive such k (the kernel takes a contiguous slice of the group's
// table and writes act[k]).
func (s *stepper) gateUpRuns(i int, early []bool, want bool) error {
	b := s.b
	F := s.lay.Gate.Rows
	xn, err := s.stagedNorm(i)
	if err != nil {
		return err
	}
	grp := s.group(s.prog.body[i].Layer)
	x := ptr(s.spec.X)
	for k := 0; k < len(early); {
		if early[k] != want {
			k++
			continue
		}
		k1 := k
		for k1 < len(early) && early[k1] == want {
			k1++
		}
		k0, n := k, k1-k
		if err := b.o.async(func() error {
			return b.gateUpLaunchFrom(s.act+cu.DevicePtr(4*k0*F), x, n, s.lay, rowTable{dev: grp, k0: k0, norm: xn})
		}); err != nil {
			return err
		}
		k = k1
	}
	return nil
}

// countPinned is the host's side of a graph-full step's layer l, after the
// step: the device read the group's rows through the pinned snapshot, so
// the lease is served only to count the group (every expert a hit) and
// released at once.
func (s *stepper) countPinned(l int, ids []int) error {
	lease, err := s.spec.Experts.Lease(l, ids)
	if err != nil {
		return fmt.Errorf("lease experts %v: %w", ids, err)
	}
	defer lease.Release()
	if _, err := lease.Serve(); err != nil {
		return fmt.Errorf("serve experts %v: %w", ids, err)
	}
	return nil
}

// rowAddrs writes the device addresses of rows (the cache's answer for the
// routed ids of layer l) into dst (8 bytes each).
func (s *stepper) rowAddrs(l int, ids []int, rows []backend.Tensor, dst []byte) error {
	for k, r := range rows {
		t, ok := r.(*Tensor)
		if !ok || t.n < s.lay.Size {
			return fmt.Errorf("cuda: stepper: layer %d: expert %d: row %T is not a CUDA row of %d bytes", l, ids[k], r, s.lay.Size)
		}
		*(*uint64)(unsafe.Pointer(&dst[8*k])) = uint64(t.ptr)
	}
	return nil
}

// serveLayer is the host's side of layer l in a graph-wait step: wait for
// the routing, lease and serve the group (Serve copies and publishes any
// missing expert), and when the device found a missing row, hand it the
// group's row addresses and answer its miss ticket. When the generation
// changed, the layer's table (its snapshot) is captured again for the next
// step. The lease is released at once: the step that reads the rows was
// launched before, so the compute event recorded now covers it.
func (s *stepper) serveLayer(l int) error {
	if err := s.wait(0, l); err != nil {
		return err
	}
	ids := s.layerIDs(0, l)
	E := s.cfg.NumExperts
	table := unsafe.Slice((*uint64)(unsafe.Add(s.host.p, s.tableOff+8*l*E)), E)
	missing := false
	for _, e := range ids {
		missing = missing || table[e] == 0
	}
	lease, err := s.spec.Experts.Lease(l, ids)
	if err != nil {
		return fmt.Errorf("lease experts %v: %w", ids, err)
	}
	defer lease.Release()
	rows, err := lease.Serve()
	if err != nil {
		return fmt.Errorf("serve experts %v: %w", ids, err)
	}
	fix := unsafe.Slice((*byte)(unsafe.Add(s.host.p, s.fixOff+8*l*s.A)), 8*s.A)
	if err := s.rowAddrs(l, ids, rows, fix); err != nil {
		return err
	}
	if missing {
		s.answered[l]++
		atomic.StoreInt32((*int32)(unsafe.Add(s.host.p, s.readyOff+8*l)), s.answered[l])
	} else {
		// The device used the table's rows: they must be the cache's.
		for k, e := range ids {
			if got := *(*uint64)(unsafe.Pointer(&fix[8*k])); got != table[e] {
				return fmt.Errorf("expert %d: the device table holds row %#x, the cache %#x", e, table[e], got)
			}
		}
	}
	return s.refreshTable(l)
}

// refreshTable rewrites layer l's table of resident rows from a snapshot of
// the layer when the cache's generation changed since it was last written. Only the host writes the
// table, and a step reads layer l's part only in its routing kernel, which
// ran before the host served the layer; the next step's reads come after
// this write (the next step is launched after the host served every layer).
func (s *stepper) refreshTable(l int) error {
	snap, err := s.spec.Experts.Snapshot(l)
	if err != nil {
		return err
	}
	rows, seq := snap.Rows, snap.Seq
	if seq == s.tableSeq[l] && seq != 0 {
		return nil
	}
	E := s.cfg.NumExperts
	table := unsafe.Slice((*uint64)(unsafe.Add(s.host.p, s.tableOff+8*l*E)), E)
	for e, r := range rows {
		var addr uint64
		if r != nil {
			t, ok := r.(*Tensor)
			if !ok || t.n < s.lay.Size {
				return fmt.Errorf("cuda: stepper: layer %d: expert %d: row %T is not a CUDA row of %d bytes", l, e, r, s.lay.Size)
			}
			addr = uint64(t.ptr)
		}
		atomic.StoreUint64(&table[e], addr)
	}
	s.tableSeq[l] = seq
	return nil
}

// abort makes every gate/up kernel waiting for the host trap instead of
// waiting for an answer that will not come.
func (s *stepper) abort() {
	if s.mode != device.StepGraphWait || !s.host.ok {
		return
	}
	for l := range s.L {
		atomic.StoreInt32((*int32)(unsafe.Add(s.host.p, s.readyOff+8*l+4)), 1)
	}
}

// OverlapCounts implements device.OverlapCounter.
func (s *stepper) OverlapCounts() (split, early int64) { return s.splitLayers, s.earlyExperts }
