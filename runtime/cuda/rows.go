//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// Rows implements device.Device on the backend's GPU: rows are device
// allocations (backend Bytes tensors, so executors read them directly),
// staging buffers are cuMemHostAlloc'd pinned memory, RegisterHost
// page-locks caller memory with cuMemHostRegister (read-only), copies run
// on the backend's copy stream, and RecordCompute records an event on its
// compute stream. Every call goes through the backend's context-owner
// goroutine.
type Rows struct {
	b *Backend
	// regs is what RegisterHost registered: CopyHostToRow refuses any other
	// source (the driver would silently do a pageable, synchronous copy).
	regs device.HostRanges
}

var _ device.Device = (*Rows)(nil)

// ExpertRows returns the backend's cache device (the rows of the expert
// cache; Rows is backend.Batched's row view).
func (b *Backend) ExpertRows() *Rows { return b.rows }

// Name implements device.Device.
func (r *Rows) Name() string { return fmt.Sprintf("cuda:%d", r.b.ordinal) }

// row is one expert row: its own allocation (AllocRow) or a part of a
// slab shared with the other rows of an AllocRows call.
type row struct {
	t    *Tensor
	slab *rowSlab // nil for a row of its own
}

func (r row) Tensor() backend.Tensor { return r.t }

// rowSlab is one allocation holding the rows of an AllocRows call. The
// driver rounds every allocation up to whole 2 MiB pages: an OLMoE record
// (3.05 MiB) alone takes 4 MiB and a Qwen1.5-MoE record (4.18 MiB) 6 MiB,
// while a slab wastes at most one page for all its rows. It is freed with
// its last row.
type rowSlab struct {
	mem  *Tensor
	mu   sync.Mutex
	live int
}

var _ device.RowsAllocator = (*Rows)(nil)

// rowAlign keeps every row of a slab 256-byte aligned (the kernels' 16-byte
// loads need 16; 256 keeps rows on whole L2 sectors).
const rowAlign = 256

// AllocRow implements device.Device.
func (r *Rows) AllocRow(n int) (device.Row, error) {
	t, err := r.b.allocSync(n, backend.Bytes)
	if err != nil {
		return nil, err
	}
	return row{t: t}, nil
}

// AllocRows implements device.RowsAllocator: count rows of n bytes carved
// from one zeroed allocation.
func (r *Rows) AllocRows(n, count int) ([]device.Row, error) {
	if n <= 0 || count <= 0 {
		return nil, fmt.Errorf("cuda device: AllocRows(%d, %d): sizes must be positive", n, count)
	}
	stride := (n + rowAlign - 1) / rowAlign * rowAlign
	mem, err := r.b.allocSync(stride*count, backend.Bytes)
	if err != nil {
		return nil, fmt.Errorf("cuda device: %d rows of %d bytes in one allocation: %w", count, n, err)
	}
	sl := &rowSlab{mem: mem, live: count}
	out := make([]device.Row, count)
	for i := range out {
		out[i] = row{t: &Tensor{ptr: mem.ptr + cu.DevicePtr(i*stride), n: n, dt: backend.Bytes, bytes: stride, b: r.b, view: true}, slab: sl}
	}
	return out, nil
}

// FreeRow implements device.Device. A slab row frees the slab with the last
// of its rows.
func (r *Rows) FreeRow(rw device.Row) error {
	cr, ok := rw.(row)
	if !ok {
		return fmt.Errorf("cuda device: FreeRow: foreign row %T", rw)
	}
	if cr.slab == nil {
		return r.b.Free(cr.t)
	}
	if !cr.t.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("cuda device: FreeRow: double free")
	}
	cr.slab.mu.Lock()
	cr.slab.live--
	last := cr.slab.live == 0
	cr.slab.mu.Unlock()
	if !last {
		return nil
	}
	return r.b.Free(cr.slab.mem)
}

type staging struct {
	mem   pinned
	freed bool
}

func (s *staging) Host() []byte { return s.mem.bytes() }

// AllocStaging implements device.Device with page-locked host memory.
func (r *Rows) AllocStaging(n int) (device.Staging, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda device: AllocStaging(%d): size must be positive", n)
	}
	s := &staging{}
	err := r.b.o.do(func() (err error) {
		s.mem, err = newPinned(n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda device: pinned staging of %d bytes: %w", n, err)
	}
	return s, nil
}

// FreeStaging implements device.Device.
func (r *Rows) FreeStaging(st device.Staging) error {
	s, ok := st.(*staging)
	if !ok {
		return fmt.Errorf("cuda device: FreeStaging: foreign buffer %T", st)
	}
	if s.freed {
		return fmt.Errorf("cuda device: FreeStaging: double free")
	}
	s.freed = true
	return r.b.o.do(func() error { return s.mem.free() })
}

// CopyToRow implements device.Device: cuMemcpyHtoDAsync of the run on the
// copy stream, then an event recorded behind it.
func (r *Rows) CopyToRow(dst device.Row, src device.Staging, off, n int) (device.Event, error) {
	cr, ok := dst.(row)
	if !ok {
		return nil, fmt.Errorf("cuda device: CopyToRow: foreign row %T", dst)
	}
	s, ok := src.(*staging)
	if !ok {
		return nil, fmt.Errorf("cuda device: CopyToRow: foreign staging buffer %T", src)
	}
	if off < 0 || n < 0 || off+n > s.mem.n || off+n > cr.t.n {
		return nil, fmt.Errorf("cuda device: CopyToRow: bytes %d..%d of a %d-byte buffer to a %d-byte row", off, off+n, s.mem.n, cr.t.n)
	}
	if cr.t.freed.Load() {
		return nil, fmt.Errorf("cuda device: CopyToRow: row was freed")
	}
	b := r.b
	var ev *event
	err := b.o.do(func() error {
		if n > 0 {
			if err := cu.MemcpyHtoDAsync(cr.t.ptr+cu.DevicePtr(off), unsafe.Add(s.mem.p, off), int64(n), b.copy); err != nil {
				return err
			}
		}
		var err error
		ev, err = b.recordEvent(b.copy)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda device: CopyToRow: %w", err)
	}
	return ev, nil
}

// RegisterHost implements device.Device with Backend.RegisterHost
// (cuMemHostRegister, PORTABLE|READ_ONLY: the host authority is
// PROT_READ).
func (r *Rows) RegisterHost(mem []byte) (func() error, error) {
	remove, err := r.regs.Add(mem)
	if err != nil {
		return nil, fmt.Errorf("cuda device: RegisterHost: %w", err)
	}
	unregister, err := r.b.RegisterHost(mem)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("cuda device: %w", err), remove())
	}
	return func() error {
		if err := unregister(); err != nil {
			return fmt.Errorf("cuda device: unregister %d bytes of host memory: %w", len(mem), err)
		}
		return remove()
	}, nil
}

// CopyHostToRow implements device.Device: cuMemcpyHtoDAsync from registered
// (page-locked) host memory on the copy stream, then an event recorded
// behind it, like CopyToRow.
func (r *Rows) CopyHostToRow(dst device.Row, src []byte, n int) (device.Event, error) {
	cr, ok := dst.(row)
	if !ok {
		return nil, fmt.Errorf("cuda device: CopyHostToRow: foreign row %T", dst)
	}
	if n < 0 || n > len(src) || n > cr.t.n {
		return nil, fmt.Errorf("cuda device: CopyHostToRow: %d bytes from a %d-byte source to a %d-byte row", n, len(src), cr.t.n)
	}
	src = src[:n]
	if err := r.regs.Check(src); err != nil {
		return nil, fmt.Errorf("cuda device: CopyHostToRow: %w", err)
	}
	if cr.t.freed.Load() {
		return nil, fmt.Errorf("cuda device: CopyHostToRow: row was freed")
	}
	b := r.b
	p := unsafe.Pointer(unsafe.SliceData(src))
	var ev *event
	err := b.o.do(func() error {
		if n > 0 {
			if err := cu.MemcpyHtoDAsync(cr.t.ptr, p, int64(n), b.copy); err != nil {
				return err
			}
		}
		var err error
		ev, err = b.recordEvent(b.copy)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda device: CopyHostToRow: %w", err)
	}
	return ev, nil
}

// RecordCompute implements device.Device without a round trip: the record
// is enqueued on the owner like a launch (so it lands on the compute stream
// behind every op issued before the call) and the event is returned at
// once. Every later Query or Wait runs on the owner after the record, in
// queue order; if the record fails, the owner's sticky error makes that
// Query fail, which the cache treats as an unconfirmed event.
func (r *Rows) RecordCompute() (device.Event, error) {
	b := r.b
	ev := &event{b: b}
	err := b.o.async(func() error { return b.recordInto(ev, b.compute) })
	if err != nil {
		return nil, fmt.Errorf("cuda device: RecordCompute: %w", err)
	}
	runtime.SetFinalizer(ev, (*event).finalize)
	return ev, nil
}

// recordEvent records a (pooled) event on s; owner thread only.
func (b *Backend) recordEvent(s cu.Stream) (*event, error) {
	ev := &event{b: b}
	if err := b.recordInto(ev, s); err != nil {
		return nil, err
	}
	runtime.SetFinalizer(ev, (*event).finalize)
	return ev, nil
}

// recordInto takes a pooled CUDA event, records it on s and stores it in
// ev; owner thread only.
func (b *Backend) recordInto(ev *event, s cu.Stream) error {
	var ce cu.Event
	if n := len(b.events); n > 0 {
		ce, b.events = b.events[n-1], b.events[:n-1]
	} else {
		var err error
		if ce, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return err
		}
	}
	if err := ce.Record(s); err != nil {
		b.events = append(b.events, ce)
		return err
	}
	ev.ev = ce
	ev.recorded = true
	return nil
}

// event implements device.Event. The first Query or Wait that sees it
// complete remembers the outcome and returns the CUDA event to the pool.
type event struct {
	b  *Backend
	mu sync.Mutex
	// ev and recorded are written and read on the owner thread only.
	ev       cu.Event
	recorded bool
	// done and err are final once done is set.
	done bool
	err  error
}

// Query implements device.Event.
func (e *event) Query() (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return true, e.err
	}
	var ready bool
	err := e.b.o.do(func() error {
		if !e.recorded {
			return errors.New("the event was never recorded")
		}
		switch err := e.ev.Query(); {
		case err == nil:
			ready = true
			e.b.events = append(e.b.events, e.ev)
			return nil
		case errors.Is(err, cu.NotReady):
			return nil
		default:
			return err
		}
	})
	if err != nil {
		e.done, e.err = true, fmt.Errorf("cuda event: %w", err)
		return true, e.err
	}
	if ready {
		e.done = true
		return true, nil
	}
	return false, nil
}

// Wait implements device.Event by polling: a blocking cuEventSynchronize
// would stall the owner thread, and with it every other caller. It polls
// without sleeping for the first eventSpin (a Query is a cheap owner
// hand-off, and expert copies of a few MB finish within a few hundred µs:
// a sleep there would add its own oversleep to every miss), then backs off.
func (e *event) Wait() error {
	start := time.Now()
	delay := 20 * time.Microsecond
	for {
		done, err := e.Query()
		if done {
			return err
		}
		if time.Since(start) < eventSpin {
			runtime.Gosched()
			continue
		}
		time.Sleep(delay)
		delay = min(2*delay, 500*time.Microsecond)
	}
}

// eventSpin is how long Wait polls without sleeping: longer than a routed
// group's worth of expert copies at pinned H2D speed (8 x 3.2 MB at ~55
// GB/s is ~0.5 ms).
const eventSpin = 5 * time.Millisecond

// finalize destroys an event nobody saw complete.
func (e *event) finalize() {
	if e.done {
		return
	}
	_ = e.b.o.async(func() error {
		if !e.recorded {
			return nil
		}
		return cu.DestroyEvent(&e.ev)
	})
}

// RegisterHost page-locks host memory the caller owns (for example the
// host authority's expert records) so that copies from it run at pinned
// speed without staging. The returned function unregisters it; the memory
// must stay allocated until then.
func (b *Backend) RegisterHost(mem []byte) (unregister func() error, err error) {
	if len(mem) == 0 {
		return func() error { return nil }, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(mem))
	if err := b.o.do(func() error { return hostRegister(p, len(mem)) }); err != nil {
		return nil, fmt.Errorf("cuda: register %d bytes of host memory: %w", len(mem), err)
	}
	return func() error { return b.o.do(func() error { return hostUnregister(p) }) }, nil
}
