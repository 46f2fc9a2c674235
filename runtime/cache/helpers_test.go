package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cpu"
)

// fakeSource is a recordSource with records whose bytes name their
// (layer, expert): the first 8 bytes hold both, the rest a pattern of both.
type fakeSource struct {
	layers, experts, size int
	corrupt               bool // ReadExperts reports a hash mismatch
	reads                 int
}

func recordByte(l, e, i int) byte {
	return byte(l*151 + e*37 + i*11 + (i>>8)*7 + 1)
}

func fakeRecord(l, e, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = recordByte(l, e, i)
	}
	if size >= 8 {
		binary.LittleEndian.PutUint32(b[0:], uint32(l))
		binary.LittleEndian.PutUint32(b[4:], uint32(e))
	}
	return b
}

func (f *fakeSource) ExpertsBytes() int64 { return int64(f.layers * f.experts * f.size) }

func (f *fakeSource) ReadExperts(dst []byte) (string, error) {
	f.reads++
	for l := 0; l < f.layers; l++ {
		for e := 0; e < f.experts; e++ {
			copy(dst[(l*f.experts+e)*f.size:], fakeRecord(l, e, f.size))
		}
	}
	sum := sha256.Sum256(dst)
	if f.corrupt {
		return hex.EncodeToString(sum[:]), errors.New("fake: sha256 mismatch")
	}
	return hex.EncodeToString(sum[:]), nil
}

func newFakeAuthority(t testing.TB, layers, experts, size int) *Authority {
	t.Helper()
	a, err := loadAuthority(&fakeSource{layers: layers, experts: experts, size: size}, layers, experts, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// newCPUDevice starts a CPUDevice over the CPU backend, closed at cleanup.
func newCPUDevice(t testing.TB) *CPUDevice {
	t.Helper()
	d := NewCPUDevice(cpu.New(1))
	t.Cleanup(func() { d.Close() })
	return d
}

// rowBytes reads a CPU row's bytes. The backend interface has no
// device-to-host byte read (on purpose), so the test reaches into the CPU
// backend's byte tensor; it fails loudly if runtime/cpu renames the field.
// Reads go through the real memory the copy stream writes, so the race
// detector sees any overlap with a copy.
func rowBytes(t testing.TB, tensor backend.Tensor) []byte {
	t.Helper()
	v := reflect.ValueOf(tensor)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		t.Fatalf("row tensor %T is not a CPU byte tensor", tensor)
	}
	f := v.Elem().FieldByName("data")
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Uint8 {
		t.Fatalf("row tensor %T has no []byte field \"data\" (runtime/cpu changed: update rowBytes)", tensor)
	}
	return f.Bytes()
}

// checkRow fails unless the row holds exactly the authority's record.
func checkRow(t testing.TB, a *Authority, tensor backend.Tensor, l, e int) {
	t.Helper()
	if err := rowErr(t, a, tensor, l, e); err != nil {
		t.Fatal(err)
	}
}

// rowErr is checkRow for goroutines other than the test's.
func rowErr(t testing.TB, a *Authority, tensor backend.Tensor, l, e int) error {
	got := rowBytes(t, tensor)
	want := a.Record(l, e)
	if len(got) >= len(want) && string(got[:len(want)]) == string(want) {
		return nil
	}
	gl, ge := -1, -1
	if len(got) >= 8 {
		gl, ge = int(binary.LittleEndian.Uint32(got)), int(binary.LittleEndian.Uint32(got[4:]))
	}
	return fmt.Errorf("row for layer %d expert %d holds another record (header says layer %d expert %d)", l, e, gl, ge)
}

// withTransport returns o with transport tr: the registered transport has
// no staging ring.
func withTransport(o Options, tr string) Options {
	o.Transport = tr
	if tr == TransportRegistered {
		o.Staging = 0
	}
	return o
}

// forTransports runs f as a subtest for each transport.
func forTransports(t *testing.T, f func(t *testing.T, tr string)) {
	t.Helper()
	for _, tr := range Transports() {
		t.Run(tr, func(t *testing.T) { f(t, tr) })
	}
}

// faultDevice wraps a Device and injects failures. Zero value fields
// inject nothing. Call numbers are 1-based and count from construction.
// CopyToRow and CopyHostToRow share the copy count and the injections.
type faultDevice struct {
	Device

	mu             sync.Mutex
	copies         int   // CopyToRow and CopyHostToRow calls so far
	failEnqueueAt  int   // copy call that fails to enqueue
	failCopyWaitAt int   // copy call whose completion event fails
	computeQuery   error // Query error of compute events recorded from now on
	computeWait    error // Wait error (and Query: not done) of compute events
	recordErr      error // RecordCompute fails
	gate           chan struct{}
	waiting        chan struct{} // receives once per Wait on a gated event
	stagingShort   int           // AllocStaging returns buffers this much shorter
	failRowAt      int           // AllocRow call that fails
	rowAllocs      int
	rowFrees       int
	stagingAllocs  int
	stagingFrees   int
	onCopy         func()        // runs inside a copy call, before the copy is enqueued
	copyGate       chan struct{} // copies are enqueued only once it closes
	copyIssued     chan struct{} // receives once per gated copy call
	failRegister   error         // RegisterHost fails
	foreignSource  bool          // CopyHostToRow copies from a private clone of src
	registers      int           // successful RegisterHost calls
	unregisters    int           // successful unregister calls
}

var errInjected = errors.New("injected device error")

func (f *faultDevice) AllocRow(n int) (Row, error) {
	f.mu.Lock()
	f.rowAllocs++
	fail := f.rowAllocs == f.failRowAt
	f.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	return f.Device.AllocRow(n)
}

func (f *faultDevice) FreeRow(r Row) error {
	f.mu.Lock()
	f.rowFrees++
	f.mu.Unlock()
	return f.Device.FreeRow(r)
}

type shortStaging struct {
	Staging
	short int
}

func (s shortStaging) Host() []byte { return s.Staging.Host()[:len(s.Staging.Host())-s.short] }

func (f *faultDevice) AllocStaging(n int) (Staging, error) {
	f.mu.Lock()
	f.stagingAllocs++
	short := f.stagingShort
	f.mu.Unlock()
	s, err := f.Device.AllocStaging(n)
	if err != nil || short == 0 {
		return s, err
	}
	return shortStaging{s, short}, nil
}

func (f *faultDevice) FreeStaging(s Staging) error {
	f.mu.Lock()
	f.stagingFrees++
	f.mu.Unlock()
	if ss, ok := s.(shortStaging); ok {
		s = ss.Staging
	}
	return f.Device.FreeStaging(s)
}

// failedEvent wraps a real completion and then reports an error.
type failedEvent struct{ inner Event }

func (e failedEvent) Wait() error { e.inner.Wait(); return errInjected }
func (e failedEvent) Query() (bool, error) {
	done, _ := e.inner.Query()
	if !done {
		return false, nil
	}
	return true, errInjected
}

func (f *faultDevice) CopyToRow(dst Row, src Staging, off, n int) (Event, error) {
	if ss, ok := src.(shortStaging); ok {
		src = ss.Staging
	}
	return f.copy(func() (Event, error) { return f.Device.CopyToRow(dst, src, off, n) })
}

func (f *faultDevice) CopyHostToRow(dst Row, src []byte, n int) (Event, error) {
	f.mu.Lock()
	foreign := f.foreignSource
	f.mu.Unlock()
	if foreign {
		// The same bytes, but not in registered memory.
		src = append([]byte(nil), src...)
	}
	return f.copy(func() (Event, error) { return f.Device.CopyHostToRow(dst, src, n) })
}

func (f *faultDevice) RegisterHost(mem []byte) (func() error, error) {
	f.mu.Lock()
	fail := f.failRegister
	f.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	unregister, err := f.Device.RegisterHost(mem)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.registers++
	f.mu.Unlock()
	return func() error {
		err := unregister()
		if err == nil {
			f.mu.Lock()
			f.unregisters++
			f.mu.Unlock()
		}
		return err
	}, nil
}

// copy applies the copy injections to one copy call; issue enqueues the
// real copy.
func (f *faultDevice) copy(issue func() (Event, error)) (Event, error) {
	f.mu.Lock()
	f.copies++
	call := f.copies
	hook := f.onCopy
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if call == f.failEnqueueAt {
		return nil, errInjected
	}
	f.mu.Lock()
	gate, issued := f.copyGate, f.copyIssued
	f.mu.Unlock()
	if gate != nil {
		// The copy stream is "busy": the copy starts when gate closes.
		ev := &gatedCopy{done: make(chan struct{})}
		go func() {
			<-gate
			inner, err := issue()
			if err == nil {
				err = inner.Wait()
			}
			ev.err = err
			close(ev.done)
		}()
		issued <- struct{}{}
		return ev, nil
	}
	ev, err := issue()
	if err != nil || call != f.failCopyWaitAt {
		return ev, err
	}
	return failedEvent{ev}, nil
}

// gatedCopy completes when its delayed copy has run.
type gatedCopy struct {
	done chan struct{}
	err  error
}

func (e *gatedCopy) Wait() error { <-e.done; return e.err }
func (e *gatedCopy) Query() (bool, error) {
	select {
	case <-e.done:
		return true, e.err
	default:
		return false, nil
	}
}

// computeEvent is a compute event with injected behaviour.
type computeEvent struct {
	inner    Event
	queryErr error
	waitErr  error
	gate     chan struct{}
	waiting  chan struct{}
}

func (e *computeEvent) Wait() error {
	if e.gate != nil {
		if e.waiting != nil {
			e.waiting <- struct{}{}
		}
		<-e.gate
	}
	if err := e.inner.Wait(); err != nil {
		return err
	}
	return e.waitErr
}

func (e *computeEvent) Query() (bool, error) {
	if e.queryErr != nil {
		return false, e.queryErr
	}
	if e.waitErr != nil {
		return false, nil
	}
	if e.gate != nil {
		select {
		case <-e.gate:
		default:
			return false, nil
		}
	}
	return e.inner.Query()
}

func (f *faultDevice) RecordCompute() (Event, error) {
	f.mu.Lock()
	rec, q, w, gate, waiting := f.recordErr, f.computeQuery, f.computeWait, f.gate, f.waiting
	f.mu.Unlock()
	if rec != nil {
		return nil, rec
	}
	ev, err := f.Device.RecordCompute()
	if err != nil {
		return nil, err
	}
	if q == nil && w == nil && gate == nil {
		return ev, nil
	}
	return &computeEvent{inner: ev, queryErr: q, waitErr: w, gate: gate, waiting: waiting}, nil
}

func (f *faultDevice) set(fn func(f *faultDevice)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// rowStates counts by state the rows a layer owns and the shared pool's
// (spare) rows.
func rowStates(c *Cache, layer int) map[rowState]int {
	c.missMu.Lock() // owners change only under missMu
	defer c.missMu.Unlock()
	l := c.layers[layer]
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[rowState]int{}
	for _, r := range l.rows {
		if r.owner == layer || r.owner == poolOwner {
			out[r.state]++
		}
	}
	return out
}

// policyOrder returns a layer's eviction order.
func policyOrder(c *Cache, layer int) []int {
	l := c.layers[layer]
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.policy.Order()
}
