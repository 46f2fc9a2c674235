package cache

import (
	"errors"
	"fmt"
	"sync"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// CPUDevice implements Device for the CPU backend. Rows are byte tensors
// from the backend's AllocBytes, so CPU executors read them like any
// other expert record; staging buffers are ordinary Go slices (there is
// nothing to pin), and RegisterHost is bookkeeping only: it records the
// range so that CopyHostToRow refuses a source outside registered memory,
// as the CUDA device does.
//
// The streams are real: one goroutine is the copy stream and executes
// CopyToRow operations in order through the backend's WriteBytes, another
// is the compute stream and completes RecordCompute events in order
// (CopyHostToRow runs on the copy stream like CopyToRow). Events
// are completion channels. CPU executors compute synchronously on the
// caller's goroutine, so by the time a consumer releases its lease the
// reads have happened; the compute event still completes asynchronously,
// which keeps the cache's event handling (query, then wait) honest on CI.
type CPUDevice struct {
	be      backend.Backend
	copies  chan func()
	compute chan func()
	quit    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex // guards closed against concurrent enqueues
	closed bool

	regs HostRanges // RegisterHost'd memory
}

// streamDepth bounds each stream's queue; an enqueue blocks while it is
// full, like a full CUDA work queue.
const streamDepth = 256

// ErrDeviceClosed is returned by a CPUDevice after Close.
var ErrDeviceClosed = errors.New("device closed")

// NewCPUDevice starts the copy and compute streams over be (normally a
// *cpu.Backend). Close stops them.
func NewCPUDevice(be backend.Backend) *CPUDevice {
	d := &CPUDevice{
		be:      be,
		copies:  make(chan func(), streamDepth),
		compute: make(chan func(), streamDepth),
		quit:    make(chan struct{}),
	}
	d.wg.Add(2)
	go d.stream(d.copies)
	go d.stream(d.compute)
	return d
}

// stream executes the operations of one stream in order until Close.
func (d *CPUDevice) stream(ops chan func()) {
	defer d.wg.Done()
	for {
		select {
		case op := <-ops:
			op()
		case <-d.quit:
			// Complete what was enqueued before Close so no waiter hangs.
			for {
				select {
				case op := <-ops:
					op()
				default:
					return
				}
			}
		}
	}
}

var _ Device = (*CPUDevice)(nil)

// Name implements Device.
func (d *CPUDevice) Name() string { return d.be.Name() }

type cpuRow struct{ t backend.Tensor }

func (r cpuRow) Tensor() backend.Tensor { return r.t }

type cpuStaging struct{ host []byte }

func (s *cpuStaging) Host() []byte { return s.host }

// AllocRow implements Device with the backend's AllocBytes.
func (d *CPUDevice) AllocRow(n int) (Row, error) {
	t, err := d.be.AllocBytes(n)
	if err != nil {
		return nil, err
	}
	return cpuRow{t}, nil
}

// FreeRow implements Device.
func (d *CPUDevice) FreeRow(r Row) error {
	cr, ok := r.(cpuRow)
	if !ok {
		return fmt.Errorf("cpu device: FreeRow: foreign row %T", r)
	}
	return d.be.Free(cr.t)
}

// AllocStaging implements Device.
func (d *CPUDevice) AllocStaging(n int) (Staging, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu device: AllocStaging(%d): negative size", n)
	}
	return &cpuStaging{host: make([]byte, n)}, nil
}

// FreeStaging implements Device.
func (d *CPUDevice) FreeStaging(s Staging) error {
	cs, ok := s.(*cpuStaging)
	if !ok {
		return fmt.Errorf("cpu device: FreeStaging: foreign buffer %T", s)
	}
	cs.host = nil
	return nil
}

// cpuEvent completes when done is closed; err is written before that.
type cpuEvent struct {
	done chan struct{}
	err  error
}

func (e *cpuEvent) Wait() error {
	<-e.done
	return e.err
}

func (e *cpuEvent) Query() (bool, error) {
	select {
	case <-e.done:
		return true, e.err
	default:
		return false, nil
	}
}

// enqueue puts op on a stream unless the device is closed.
func (d *CPUDevice) enqueue(stream chan func(), op func()) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrDeviceClosed
	}
	stream <- op
	return nil
}

// CopyToRow implements Device: the copy runs on the copy-stream goroutine.
func (d *CPUDevice) CopyToRow(dst Row, src Staging, off, n int) (Event, error) {
	cr, ok := dst.(cpuRow)
	if !ok {
		return nil, fmt.Errorf("cpu device: CopyToRow: foreign row %T", dst)
	}
	cs, ok := src.(*cpuStaging)
	if !ok {
		return nil, fmt.Errorf("cpu device: CopyToRow: foreign staging buffer %T", src)
	}
	if off < 0 || n < 0 || off+n > len(cs.host) || off+n > cr.t.Len() {
		return nil, fmt.Errorf("cpu device: CopyToRow: bytes %d..%d of a %d-byte buffer to a %d-byte row", off, off+n, len(cs.host), cr.t.Len())
	}
	ev := &cpuEvent{done: make(chan struct{})}
	err := d.enqueue(d.copies, func() {
		ev.err = d.be.WriteBytes(cr.t, off, cs.host[off:off+n])
		close(ev.done)
	})
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// RegisterHost implements Device: there is nothing to page-lock, so it
// only records the range that CopyHostToRow checks.
func (d *CPUDevice) RegisterHost(mem []byte) (func() error, error) {
	unregister, err := d.regs.Add(mem)
	if err != nil {
		return nil, fmt.Errorf("cpu device: RegisterHost: %w", err)
	}
	return unregister, nil
}

// CopyHostToRow implements Device: the copy runs on the copy-stream
// goroutine, after every copy enqueued before it.
func (d *CPUDevice) CopyHostToRow(dst Row, src []byte, n int) (Event, error) {
	cr, ok := dst.(cpuRow)
	if !ok {
		return nil, fmt.Errorf("cpu device: CopyHostToRow: foreign row %T", dst)
	}
	if n < 0 || n > len(src) || n > cr.t.Len() {
		return nil, fmt.Errorf("cpu device: CopyHostToRow: %d bytes from a %d-byte source to a %d-byte row", n, len(src), cr.t.Len())
	}
	src = src[:n]
	if err := d.regs.Check(src); err != nil {
		return nil, fmt.Errorf("cpu device: CopyHostToRow: %w", err)
	}
	ev := &cpuEvent{done: make(chan struct{})}
	err := d.enqueue(d.copies, func() {
		ev.err = d.be.WriteBytes(cr.t, 0, src)
		close(ev.done)
	})
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// RecordCompute implements Device: the event completes when the
// compute-stream goroutine reaches it.
func (d *CPUDevice) RecordCompute() (Event, error) {
	ev := &cpuEvent{done: make(chan struct{})}
	if err := d.enqueue(d.compute, func() { close(ev.done) }); err != nil {
		return nil, err
	}
	return ev, nil
}

// Close completes every enqueued operation and stops the streams. Later
// enqueues fail with ErrDeviceClosed. Rows and staging buffers stay valid
// Go memory; the cache frees them in Cache.Close.
func (d *CPUDevice) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.quit)
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}
