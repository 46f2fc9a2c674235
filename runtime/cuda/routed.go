//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The device routing of a batched prefill (backend.DeviceRouting), the
// default (tuning.noRouteDevice turns it off): a layer's top-k stays on the device, and
// tc_route_groups (kernels/matmul_tc.cu) groups its pairs by expert into
// the grouped tensor-core kernels' tables, so that the host issues the
// layer's expert matmuls without waiting for the read back TopKRows makes.
// tc_route_groups also writes the ids to mapped host memory and then a
// sequence number (a system fence between), for the engine to count the
// leases once the batch has been issued (IDs waits for the number): no
// copy or event sits between the layer's kernels on the stream, so each
// kernel's programmatic dependent launch overlaps the one before. The
// experts' record bases are uploaded once for each distinct set
// (routeBasesOf: a full-residency cache's layers keep their rows). The
// tables are sized for any routing: floor(P / tile) + min(E, P) entries
// for P = T x k pairs (tile: tcTile pairs an entry, tcFD16Tile where the
// small-entry kernel runs), those past the layer's own of count 0 (a block of
// such an entry returns at once). A pair's products depend on its
// activations and its expert's matrix alone, so its bits are the
// read-back path's.

var _ backend.DeviceRouting = (*Backend)(nil)

// routeBufs is one routing's memory: dev holds ids [P] int32, w [P] f32,
// tok, slot, iden [P] int32, the tables [3][maxE] tc_group and the
// experts' record bases [E] uint64, each 16-byte aligned; host (mapped
// pinned memory, device address hostDev) the sequence number at 0 and the
// ids' copy from routeIDsAt, both written by tc_route_groups; seq is the
// number of the buffers' latest routing.
type routeBufs struct {
	dev       cu.DevicePtr
	devBytes  int
	host      pinned
	hostDev   cu.DevicePtr
	hostBytes int
	seq       uint32
}

// routeIDsAt is where a routing's mapped host memory holds the ids.
const routeIDsAt = 64

// routing is a layer's device routing (backend.Routing).
type routing struct {
	b                  *Backend
	bufs               *routeBufs // set on the owner thread by RouteRows' launch
	T, k, E, P, maxE   int
	tile               int // the most pairs a table entry holds: tcTile, or tcFD16Tile for the small-entry kernel (tcGroupedFD16)
	lay                qpack.RecordLayout
	ids, w, tok, slot  cu.DevicePtr
	iden, tab, bases   cu.DevicePtr
	launched, released bool
	seq                uint32 // the sequence number tc_route_groups publishes with the ids
	readIDs            []int
}

// RoutesOnDevice implements backend.DeviceRouting: int4 experts on the
// tensor cores with the pre-split activations, unless tuning.noRouteDevice.
func (b *Backend) RoutesOnDevice(s qpack.Scheme) bool {
	return s == qpack.SchemeInt4 && !b.routeOff.Load()
}

// routeLayout is where a routing's arrays lie in its buffer: offsets of
// ids, w, tok, slot, iden, the tables and the bases, and the size.
func routeLayout(P, maxE, E int) (offs [7]int, size int) {
	al := func(n int) int { return (n + 15) &^ 15 }
	for i, n := range []int{4 * P, 4 * P, 4 * P, 4 * P, 4 * P, 3 * maxE * tcGroupBytes, 8 * E} {
		offs[i] = size
		size += al(n)
	}
	return offs, size
}

// takeRoute returns free buffers of at least devBytes and hostBytes, or
// new ones; owner thread only.
func (b *Backend) takeRoute(devBytes, hostBytes int) (*routeBufs, error) {
	for i, rb := range b.routeFree {
		if rb.devBytes >= devBytes && rb.hostBytes >= hostBytes {
			b.routeFree = append(b.routeFree[:i], b.routeFree[i+1:]...)
			return rb, nil
		}
	}
	devBytes, hostBytes = max(devBytes, 64<<10), max(hostBytes, 16<<10)
	rb := &routeBufs{devBytes: devBytes}
	var err error
	if rb.dev, err = cu.MemAlloc(int64(devBytes)); err != nil {
		return nil, fmt.Errorf("allocate a routing (%d bytes): %w", devBytes, err)
	}
	p, d, err := hostAllocMapped(hostBytes)
	if err != nil {
		return nil, errors.Join(err, cu.MemFree(rb.dev))
	}
	rb.host, rb.hostDev, rb.hostBytes = pinned{p: p, n: hostBytes}, d, hostBytes
	clear(rb.host.bytes()[:routeIDsAt]) // sequence number 0: no routing yet
	b.routeAll = append(b.routeAll, rb)
	return rb, nil
}

// freeRoutes frees every routing's memory (teardown; owner thread).
func (b *Backend) freeRoutes() []error {
	var errs []error
	for _, rb := range b.routeAll {
		errs = append(errs, cu.MemFree(rb.dev), rb.host.free())
	}
	for _, d := range b.routeBases {
		errs = append(errs, cu.MemFree(d))
	}
	b.routeAll, b.routeFree, b.routeBases = nil, nil, nil
	return errs
}

// routeBasesMax bounds the record bases' device copies routeBasesOf keeps
// (a few bytes each, 8 an expert): past it a routing uploads its own.
const routeBasesMax = 4096

// routeBasesOf returns the device copy of a routing's record bases made for
// the same bytes before, or a new one uploaded on the compute stream (while
// fewer than routeBasesMax are kept; else own, uploaded there). The bytes
// are the copy's key, so a copy is only ever reused for its own values. A
// full-residency cache's layers keep their rows while it lives, so each
// layer's bases are uploaded once instead of a copy on the stream before
// every routing. Owner thread only.
func (b *Backend) routeBasesOf(bases []byte, own cu.DevicePtr) (cu.DevicePtr, error) {
	if d, ok := b.routeBases[string(bases)]; ok {
		return d, nil
	}
	dst := own
	if len(b.routeBases) < routeBasesMax {
		d, err := cu.MemAlloc(int64(len(bases)))
		if err != nil {
			return 0, fmt.Errorf("allocate the record bases (%d bytes): %w", len(bases), err)
		}
		if b.routeBases == nil {
			b.routeBases = make(map[string]cu.DevicePtr)
		}
		b.routeBases[string(bases)], dst = d, d
	}
	if err := b.ring.upload(b.compute, dst, bases); err != nil {
		return 0, fmt.Errorf("upload the record bases: %w", err)
	}
	return dst, nil
}

// RouteRows implements backend.DeviceRouting: router_topk_rows into the
// routing's ids and weights, then tc_route_groups over the experts' record
// bases (routeBasesOf), which also publishes the ids to mapped host memory.
func (b *Backend) RouteRows(logits backend.Tensor, T, k int, rows []backend.Tensor, lay qpack.RecordLayout) (backend.Routing, error) {
	lt, err := b.tensorOf("RouteRows", "logits", logits, backend.F32)
	if err != nil {
		return nil, err
	}
	E := len(rows)
	if T <= 0 || E == 0 || lt.n != T*E {
		return nil, shapeErr("RouteRows", "%d logits for %d rows of %d experts", lt.n, T, E)
	}
	if k <= 0 || k > E || k > maxGroup || E > groupsMaxExperts {
		return nil, shapeErr("RouteRows", "top-%d of %d experts (at most %d experts, top-%d)", k, E, groupsMaxExperts, maxGroup)
	}
	if smem := E*4 + (E+3)/4*4; smem > b.smemMax {
		return nil, fmt.Errorf("cuda: RouteRows: %d logits a row exceed shared memory", E)
	}
	if lay.Scheme != qpack.SchemeInt4 {
		return nil, fmt.Errorf("cuda: RouteRows: experts of scheme %q (int4 only)", lay.Scheme)
	}
	for _, m := range lay.Matrices() {
		if err := checkInt4Layout(m); err != nil {
			return nil, fmt.Errorf("cuda: RouteRows: %w", err)
		}
	}
	bases := make([]byte, 8*E)
	for e, rt := range rows {
		r, err := b.tensorOf("RouteRows", fmt.Sprintf("expert %d's row", e), rt, backend.Bytes)
		if err != nil {
			return nil, err
		}
		if r.n < lay.Size {
			return nil, shapeErr("RouteRows", "expert %d's row of %d bytes for a %d-byte record", e, r.n, lay.Size)
		}
		*(*uint64)(unsafe.Pointer(&bases[8*e])) = uint64(r.ptr)
	}
	P := T * k
	tile := tcTile
	if b.tcGroupedFD16(0, P, E) {
		tile = tcFD16Tile
	}
	maxE := P/tile + min(E, P)
	rt := &routing{b: b, T: T, k: k, E: E, P: P, maxE: maxE, tile: tile, lay: lay}
	offs, size := routeLayout(P, maxE, E)
	return rt, b.o.async(func() error {
		rb, err := b.takeRoute(size, routeIDsAt+4*P)
		if err != nil {
			return fmt.Errorf("cuda: RouteRows: %w", err)
		}
		rt.bufs = rb
		at := func(i int) cu.DevicePtr { return rb.dev + cu.DevicePtr(offs[i]) }
		rt.ids, rt.w, rt.tok, rt.slot, rt.iden, rt.tab, rt.bases = at(0), at(1), at(2), at(3), at(4), at(5), at(6)
		if rt.bases, err = b.routeBasesOf(bases, rt.bases); err != nil {
			return fmt.Errorf("cuda: RouteRows: %w", err)
		}
		rb.seq++
		if err := b.topKRowsLaunch(lt.ptr, T, E, k, rt.ids, rt.w); err != nil {
			return fmt.Errorf("cuda: RouteRows: top-k: %w", err)
		}
		staged := P <= routeMaxPairs
		if err := b.launch(b.k.routeGroups, 1, routeThreads, routeSmem(P, staged), argPtr(rt.ids), argInt(P), argInt(k), argInt(E), argPtr(rt.bases),
			argInt(lay.Gate.Offset), argInt(lay.Up.Offset), argInt(lay.Down.Offset), argInt(rt.tile),
			argInt(maxE), argPtr(rt.tok), argPtr(rt.slot), argPtr(rt.iden), argPtr(rt.tab),
			argPtr(rb.hostDev+routeIDsAt), argPtr(rb.hostDev), argInt(int(rb.seq)), argBool(staged)); err != nil {
			return fmt.Errorf("cuda: RouteRows: group: %w", err)
		}
		rt.seq = rb.seq
		rt.launched = true
		b.routeLaunches++
		return nil
	})
}

const (
	// groupsMaxExperts is tc_route_groups' TC_ROUTE_EMAX.
	groupsMaxExperts = 256
	// routeMaxPairs is tc_route_groups' TC_ROUTE_PMAX: the most pairs
	// (tokens x k) whose ids it stages in shared memory (36 KB with the
	// counts; a larger routing reads them from global memory).
	routeMaxPairs = 8192
	// routeThreads is tc_route_groups' block.
	routeThreads = 1024
)

// routeSmem is tc_route_groups' dynamic shared memory for P pairs
// (TC_ROUTE_SMEM): the counts, bases and entry bases, and the ids where
// they are staged.
func routeSmem(P int, staged bool) int {
	if !staged {
		P = 0
	}
	return (3*groupsMaxExperts + 2 + P) * 4
}

// routingOf checks that r is a live routing of this backend.
func (b *Backend) routingOf(op string, r backend.Routing) (*routing, error) {
	rt, ok := r.(*routing)
	if !ok || rt == nil || rt.b != b {
		return nil, fmt.Errorf("cuda: %s: not a routing of this backend (%T)", op, r)
	}
	if rt.released {
		return nil, fmt.Errorf("cuda: %s: the routing was released", op)
	}
	return rt, nil
}

// RoutedMatMul implements backend.DeviceRouting: one grouped tensor-core
// launch over the routing's table of matrix m (the fragment-direct kernel
// where tcGroupedFD picks it for the routing's pairs and experts, else the
// int4 ring), on the pre-split activations.
func (b *Backend) RoutedMatMul(dst backend.Tensor, r backend.Routing, m qpack.MatrixLayout, x backend.Tensor, down bool) error {
	rt, err := b.routingOf("RoutedMatMul", r)
	if err != nil {
		return err
	}
	d, err := b.tensorOf("RoutedMatMul", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("RoutedMatMul", "x", x, backend.F32)
	if err != nil {
		return err
	}
	w := rt.matrixIndex(m)
	if w < 0 {
		return fmt.Errorf("cuda: RoutedMatMul: matrix %+v is not one of the routing's layout", m)
	}
	nx, ny := rt.T, rt.P // gate, up: x [T, cols], dst [P, rows]
	if down {
		nx = rt.P // down: x [P, cols], dst [P, rows] by slot
	}
	if xt.n != nx*m.Cols || d.n != ny*m.Rows {
		return shapeErr("RoutedMatMul", "x %d values for %d rows of %d, dst %d for %d rows of %d", xt.n, nx, m.Cols, d.n, ny, m.Rows)
	}
	return b.o.async(func() error {
		if !rt.launched {
			return errors.New("cuda: RoutedMatMul: the routing was not launched")
		}
		fn, smem := b.k.matmulTCGroupedRing[1], tcSmemRing
		switch {
		case rt.tile == tcFD16Tile:
			fn, smem = b.fd16Kernel()
		case b.tcGroupedFD(0, rt.P, rt.E):
			fn, smem = b.fdKernel()
		}
		sp, err := b.groupedPresplit(fn, xt.ptr, nx, m.Cols)
		if err != nil {
			return err
		}
		xr, yr := rt.tok, rt.iden
		if down {
			xr, yr = rt.iden, rt.slot
		}
		tiles := (m.Rows + tcRowTile - 1) / tcRowTile
		b.tcLaunches++
		return b.launch(fn, rt.maxE*tiles, tcThreads, smem, argPtr(d.ptr), argPtr(sp.hi), argPtr(sp.lo), argPtr(sp.inv),
			argPtr(rt.tab+cu.DevicePtr(w*rt.maxE*tcGroupBytes)), argInt(tiles), argInt(m.Rows), argInt(m.Cols), argInt(m.ColsPadded),
			argInt(m.ScalesOffset), argPtr(xr), argPtr(yr))
	})
}

// RoutedGateUp implements backend.DeviceRouting: where routedGateUpKernel
// picks a gate|up build, one launch on one pre-split of x over the
// routing's gate and up tables writes act (gate and up stay unwritten);
// else the gate's and up's RoutedMatMul and SiLUMul.
func (b *Backend) RoutedGateUp(act, gate, up backend.Tensor, r backend.Routing, g, u qpack.MatrixLayout, x backend.Tensor) error {
	rt, err := b.routingOf("RoutedGateUp", r)
	if err != nil {
		return err
	}
	fn, smem, ok := b.routedGateUpKernel(rt, g, u)
	if !ok {
		if err := b.RoutedMatMul(gate, r, g, x, false); err != nil {
			return err
		}
		if err := b.RoutedMatMul(up, r, u, x, false); err != nil {
			return err
		}
		return b.SiLUMul(act, gate, up)
	}
	a, err := b.tensorOf("RoutedGateUp", "act", act, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("RoutedGateUp", "x", x, backend.F32)
	if err != nil {
		return err
	}
	for _, t := range []struct {
		what string
		t    backend.Tensor
	}{{"gate", gate}, {"up", up}} {
		st, err := b.tensorOf("RoutedGateUp", t.what, t.t, backend.F32)
		if err != nil {
			return err
		}
		if st.n != a.n {
			return shapeErr("RoutedGateUp", "%s %d values for act's %d", t.what, st.n, a.n)
		}
	}
	if xt.n != rt.T*g.Cols || a.n != rt.P*g.Rows {
		return shapeErr("RoutedGateUp", "x %d values for %d rows of %d, act %d for %d rows of %d", xt.n, rt.T, g.Cols, a.n, rt.P, g.Rows)
	}
	return b.o.async(func() error {
		if !rt.launched {
			return errors.New("cuda: RoutedGateUp: the routing was not launched")
		}
		sp, err := b.groupedPresplit(fn, xt.ptr, rt.T, g.Cols)
		if err != nil {
			return err
		}
		tiles := (g.Rows + tcGateUpRowTile - 1) / tcGateUpRowTile
		b.tcLaunches++
		b.gateUpLaunches++
		return b.launch(fn, rt.maxE*tiles, tcThreads, smem, argPtr(a.ptr), argPtr(sp.hi), argPtr(sp.lo), argPtr(sp.inv),
			argPtr(rt.tab+cu.DevicePtr(rt.matrixIndex(g)*rt.maxE*tcGroupBytes)), argPtr(rt.tab+cu.DevicePtr(rt.matrixIndex(u)*rt.maxE*tcGroupBytes)),
			argInt(tiles), argInt(g.Rows), argInt(g.Cols), argInt(g.ColsPadded), argInt(g.ScalesOffset), argPtr(rt.tok), argPtr(rt.iden))
	})
}

// tcGateUpRowTile is the gate|up builds' matrix rows a block (of each
// matrix: TC_BN / 2).
const tcGateUpRowTile = tcRowTile / 2

// routedGateUpKernel is the gate|up build for rt's table and its dynamic
// shared memory, where one runs: the table runs a fragment-direct kernel
// (the small-entry one: tile tcFD16Tile; else tcGroupedFD), g and u are the
// routing's gate and up matrices of one shape and scale layout, and not
// tuning.tcNoGateUp. Else ok is false: the ring kernels have no such
// build.
func (b *Backend) routedGateUpKernel(rt *routing, g, u qpack.MatrixLayout) (fn cu.Function, smem int, ok bool) {
	if b.tune.tcNoGateUp || g != rt.lay.Gate || u != rt.lay.Up || g.Rows != u.Rows || g.Cols != u.Cols ||
		g.ColsPadded != u.ColsPadded || g.ScalesOffset != u.ScalesOffset {
		return fn, 0, false
	}
	switch {
	case rt.tile == tcFD16Tile && b.a16Row():
		return b.k.matmulTCGroupedGUA16R[1], tcSmemFD16, true
	case b.a16Row() && b.tcGroupedFD(0, rt.P, rt.E):
		return b.k.matmulTCGroupedGUA16R[0], tcSmemFD, true
	case rt.tile == tcFD16Tile && b.tune.tcA16:
		return b.k.matmulTCGroupedGUA16[1], tcSmemFD16, true
	case b.tune.tcA16 && b.tcGroupedFD(0, rt.P, rt.E):
		return b.k.matmulTCGroupedGUA16[0], tcSmemFD, true
	case rt.tile == tcFD16Tile && b.tune.tcFD16S3:
		return b.k.matmulTCGroupedGU[2], tcSmemFD16S3, true
	case rt.tile == tcFD16Tile:
		return b.k.matmulTCGroupedGU[1], tcSmemFD16, true
	case b.tcGroupedFD(0, rt.P, rt.E):
		return b.k.matmulTCGroupedGU[0], tcSmemFD, true
	}
	return fn, 0, false
}

// matrixIndex is m's table in the routing (0 gate, 1 up, 2 down), or -1.
func (rt *routing) matrixIndex(m qpack.MatrixLayout) int {
	for i, mm := range rt.lay.Matrices() {
		if mm == m {
			return i
		}
	}
	return -1
}

// CombineRouted implements backend.DeviceRouting: combine_rows_f32 with
// the routing's weights.
func (b *Backend) CombineRouted(dst, src backend.Tensor, r backend.Routing) error {
	rt, err := b.routingOf("CombineRouted", r)
	if err != nil {
		return err
	}
	d, err := b.tensorOf("CombineRouted", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	st, err := b.tensorOf("CombineRouted", "src", src, backend.F32)
	if err != nil {
		return err
	}
	if d.n%rt.T != 0 || st.n != d.n*rt.k {
		return shapeErr("CombineRouted", "dst %d values, src %d, for %d rows of %d sources", d.n, st.n, rt.T, rt.k)
	}
	n := d.n / rt.T
	return b.o.async(func() error {
		if !rt.launched {
			return errors.New("cuda: CombineRouted: the routing was not launched")
		}
		return b.launch(b.k.combineRows, b.elementwiseGrid(d.n), block, 0, argPtr(d.ptr), argPtr(st.ptr), argPtr(rt.w),
			argInt(rt.T), argInt(rt.k), argInt(n))
	})
}

// IDs implements backend.Routing: waits for the ids' copy and checks them.
func (r *routing) IDs() ([]int, error) {
	if r.readIDs != nil {
		return append([]int(nil), r.readIDs...), nil
	}
	if r.released {
		return nil, errors.New("cuda: routing IDs: released")
	}
	ids := make([]int, r.P)
	var host unsafe.Pointer
	err := r.b.o.do(func() error {
		if !r.launched {
			return errors.New("the routing was not launched")
		}
		host = r.bufs.host.p
		return nil
	})
	if err == nil {
		err = r.b.waitPublished((*uint32)(host), r.seq)
	}
	if err == nil {
		id32 := unsafe.Slice((*int32)(unsafe.Add(host, routeIDsAt)), r.P)
		for i, v := range id32 {
			if v < 0 || int(v) >= r.E {
				err = fmt.Errorf("slot %d routed to expert %d of %d", i, v, r.E)
				break
			}
			ids[i] = int(v)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: routing IDs: %w", err)
	}
	r.readIDs = ids
	return append([]int(nil), ids...), nil
}

// waitPublished spins until the mapped word at seqp holds seq (a kernel
// wrote its results, then a system fence, then seq), asking the compute
// stream now and then whether it failed. It fails when the stream has
// drained with the word still short of seq (the kernel never ran it), or
// after flagTimeout. Not on the owner thread.
func (b *Backend) waitPublished(seqp *uint32, seq uint32) error {
	start, last := time.Now(), time.Now()
	for n := 1; ; n++ {
		if atomic.LoadUint32(seqp) == seq {
			return nil
		}
		if n&1023 != 0 || time.Since(last) < time.Millisecond {
			continue
		}
		last = time.Now()
		drained := false
		err := b.o.do(func() error {
			switch err := b.compute.Query(); {
			case err == nil:
				drained = true
			case !errors.Is(err, cu.NotReady):
				return err
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the published ids: %w", err)
		}
		if got := atomic.LoadUint32(seqp); got == seq {
			return nil
		} else if drained {
			return fmt.Errorf("the stream drained with sequence number %d published, want %d", got, seq)
		}
		if time.Since(start) > flagTimeout {
			return fmt.Errorf("sequence number %d not published after %v", seq, flagTimeout)
		}
	}
}

// Release implements backend.Routing: the buffers go back to the pool
// (stream order keeps a later routing's writes behind the ops issued on
// this one).
func (r *routing) Release() {
	if r.released {
		return
	}
	r.released = true
	_ = r.b.o.async(func() error {
		if r.bufs != nil {
			r.b.routeFree = append(r.b.routeFree, r.bufs)
			r.bufs = nil
		}
		return nil
	})
}
