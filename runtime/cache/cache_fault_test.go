package cache

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
)

const faultRecord = 100

// newFaultCache builds a cache of one layer over a faultDevice.
func newFaultCache(t *testing.T, experts int, o Options) (*Cache, *Authority, *faultDevice) {
	t.Helper()
	auth := newFakeAuthority(t, 1, experts, faultRecord)
	fd := &faultDevice{Device: newCPUDevice(t)}
	c, err := New(fd, auth, 1, experts, o)
	if err != nil {
		t.Fatal(err)
	}
	c.Admit()
	return c, auth, fd
}

// snapshot is what must not change when a transaction aborts.
type snapshot struct {
	resident []int
	seq      uint64
	order    []int
	counts   [3]int64 // hits, misses, evictions
}

func snap(c *Cache) snapshot {
	res, seq := c.Resident(0)
	k := c.Counters()
	return snapshot{res, seq, policyOrder(c, 0), [3]int64{k.Hits, k.Misses, k.Evictions}}
}

func (s snapshot) equal(o snapshot) bool {
	return slices.Equal(s.resident, o.resident) && s.seq == o.seq && slices.Equal(s.order, o.order) && s.counts == o.counts
}

func mustAcquire(t *testing.T, c *Cache, auth *Authority, ids ...int) ([]backend.Tensor, func()) {
	t.Helper()
	rows, release, err := device.Acquire(c, 0, ids)
	if err != nil {
		t.Fatalf("Acquire(%v): %v", ids, err)
	}
	for i, e := range ids {
		checkRow(t, auth, rows[i], 0, e)
	}
	return rows, release
}

func TestNewRejects(t *testing.T) {
	good := Options{Capacity: 3, Spares: 2, Staging: 2, GroupSize: 2}
	with := func(f func(o *Options)) Options { o := good; f(&o); return o }
	cases := []struct {
		name   string
		layers int
		opts   Options
		inject func(fd *faultDevice)
		want   string
	}{
		{"zero staging buffers", 2, with(func(o *Options) { o.Staging = 0 }), nil, "staging too small"},
		{"staging buffer smaller than a record", 2, good, func(fd *faultDevice) { fd.stagingShort = 1 }, "staging too small: buffer 0 has 99 bytes, one expert record needs 100"},
		{"capacity zero", 2, with(func(o *Options) { o.Capacity = 0 }), nil, "capacity 0 outside 1..6"},
		{"capacity above experts", 2, with(func(o *Options) { o.Capacity = 7 }), nil, "capacity 7 outside 1..6"},
		{"group above capacity", 2, with(func(o *Options) { o.GroupSize = 4; o.Spares = 4 }), nil, "group size 4 outside 1..3"},
		{"spares below group", 2, with(func(o *Options) { o.Spares = 1 }), nil, "1 spare rows, need at least the group size 2"},
		{"unknown policy", 2, with(func(o *Options) { o.Policy = "clock" }), nil, `unknown eviction policy "clock" (declared: ` + fmt.Sprint(Policies()) + `)`},
		{"unknown placement", 2, with(func(o *Options) { o.Placement = "random" }), nil, `unknown placement "random" (declared: [canonical strided])`},
		{"layers differ from authority", 3, good, nil, "3 layers x 6 experts, the authority holds 2 x 6"},
		{"device out of row memory", 2, good, func(fd *faultDevice) { fd.failRowAt = 5 }, "allocate row 1 of the 3 rows of layer 1 (100 bytes each; capacity 3 per layer + 2 spare rows shared): injected device error; lower the capacity or spares"},
		{"device out of spare row memory", 2, good, func(fd *faultDevice) { fd.failRowAt = 7 }, "allocate row 0 of the 2 spare rows the layers share (100 bytes each; capacity 3 per layer + 2 spare rows shared): injected device error"},
		{"initial placement copy fails", 2, good, func(fd *faultDevice) { fd.failEnqueueAt = 2 }, "initial placement of layer 0: enqueue copy of expert 1 to row 1: injected device error"},
		{"unknown transport", 2, with(func(o *Options) { o.Transport = "pcie" }), nil, `unknown transport "pcie" (declared: [registered staged])`},
		{"registered with staging buffers", 2, with(func(o *Options) { o.Transport = TransportRegistered }), nil, "2 staging buffers with the registered transport, which copies from the page-locked authority and has no staging ring: want 0"},
		{"registered: device cannot page-lock the authority", 2, withTransport(good, TransportRegistered), func(fd *faultDevice) { fd.failRegister = errInjected },
			"page-lock the host authority (1200 bytes, read-only) for the registered transport: injected device error; use the staged transport or raise the locked-memory limit"},
		{"registered: device out of row memory", 2, withTransport(good, TransportRegistered), func(fd *faultDevice) { fd.failRowAt = 5 }, "allocate row 1 of the 3 rows of layer 1"},
		{"registered: initial placement copy fails", 2, withTransport(good, TransportRegistered), func(fd *faultDevice) { fd.failEnqueueAt = 2 },
			"initial placement of layer 0: enqueue copy of expert 1 to row 1 from the registered authority: injected device error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			auth := newFakeAuthority(t, 2, 6, faultRecord)
			fd := &faultDevice{Device: newCPUDevice(t)}
			if tc.inject != nil {
				tc.inject(fd)
			}
			c, err := New(fd, auth, tc.layers, 6, tc.opts)
			if err == nil {
				c.Close()
				t.Fatalf("New succeeded, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
			okRows := fd.rowAllocs
			if fd.failRowAt > 0 {
				okRows--
			}
			if fd.rowFrees != okRows || fd.stagingFrees != fd.stagingAllocs {
				t.Fatalf("freed %d of %d rows and %d of %d staging buffers", fd.rowFrees, okRows, fd.stagingFrees, fd.stagingAllocs)
			}
			if fd.unregisters != fd.registers || auth.pins.Load() != 0 {
				t.Fatalf("%d registrations, %d undone; authority pinned %d times", fd.registers, fd.unregisters, auth.pins.Load())
			}
			if tc.opts.Transport == TransportRegistered && fd.stagingAllocs != 0 {
				t.Fatalf("%d staging buffers allocated for the registered transport", fd.stagingAllocs)
			}
		})
	}
}

// TestFailureBeforePublication: a device failure before publication
// returns the error, leaves the previous generation published and the
// policy and counters untouched, and the cache keeps working.
func TestFailureBeforePublication(t *testing.T) {
	cases := []struct {
		name      string
		staging   int
		transport string
		inject    func(fd *faultDevice, base int)
		// what must hold after the failure
		quarantinedRows int
		copiesDone      int64 // copies of the failed transaction that really completed
		nextMissErr     error // the next miss fails with this (nil: works)
	}{
		{
			name: "second copy cannot be enqueued", staging: 2,
			inject:     func(fd *faultDevice, base int) { fd.failEnqueueAt = base + 2 },
			copiesDone: 1,
		},
		{
			name: "first copy's completion event fails", staging: 2,
			inject:          func(fd *faultDevice, base int) { fd.failCopyWaitAt = base + 1 },
			quarantinedRows: 1, copiesDone: 1,
		},
		{
			// The single buffer is quarantined: misses stop, hits go on.
			name: "copy fails with one staging buffer", staging: 1,
			inject:          func(fd *faultDevice, base int) { fd.failCopyWaitAt = base + 1 },
			quarantinedRows: 1, copiesDone: 0, nextMissErr: ErrNoStaging,
		},
		{
			name: "registered: second copy cannot be enqueued", transport: TransportRegistered,
			inject:     func(fd *faultDevice, base int) { fd.failEnqueueAt = base + 2 },
			copiesDone: 1,
		},
		{
			// No staging buffer to lose: the next miss works.
			name: "registered: first copy's completion event fails", transport: TransportRegistered,
			inject:          func(fd *faultDevice, base int) { fd.failCopyWaitAt = base + 1 },
			quarantinedRows: 1, copiesDone: 1,
		},
		{
			// The device refuses a source outside registered memory:
			// nothing was enqueued, so no row is quarantined.
			name: "registered: copy source outside registered memory", transport: TransportRegistered,
			inject:     func(fd *faultDevice, base int) { fd.foreignSource = true },
			copiesDone: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := withTransport(Options{Capacity: 4, Spares: 3, Staging: tc.staging, GroupSize: 2}, tc.transport)
			c, auth, fd := newFaultCache(t, 8, o)
			_, rel := mustAcquire(t, c, auth, 1, 2) // some history in the LRU order
			rel()
			before := snap(c)
			h2d := c.Counters().H2DCopies
			fd.set(func(fd *faultDevice) { tc.inject(fd, fd.copies) })

			_, _, err := device.Acquire(c, 0, []int{5, 6})
			want := errInjected
			if fd.foreignSource {
				want = ErrNotRegistered
			}
			if !errors.Is(err, want) || errors.Is(err, ErrFaulted) {
				t.Fatalf("Acquire = %v, want %v, not a fault", err, want)
			}
			if !strings.Contains(err.Error(), "stays published") {
				t.Errorf("error %q does not say the generation stays published", err)
			}
			if after := snap(c); !after.equal(before) {
				t.Fatalf("failed transaction changed the layer:\n before %+v\n after  %+v", before, after)
			}
			if got := c.Counters().H2DCopies - h2d; got != tc.copiesDone {
				t.Errorf("%d copies counted for the failed transaction, want %d", got, tc.copiesDone)
			}
			st := rowStates(c, 0)
			if st[rowQuarantined] != tc.quarantinedRows || st[rowLoading] != 0 || st[rowPublished] != 4 {
				t.Fatalf("row states %v", st)
			}
			fd.set(func(fd *faultDevice) { fd.failEnqueueAt, fd.failCopyWaitAt, fd.foreignSource = 0, 0, false })

			// Hits still work.
			_, rel = mustAcquire(t, c, auth, 1, 3)
			rel()
			_, _, err = device.Acquire(c, 0, []int{5, 6})
			if tc.nextMissErr != nil {
				if !errors.Is(err, tc.nextMissErr) || errors.Is(err, ErrFaulted) {
					t.Fatalf("next miss = %v, want %v", err, tc.nextMissErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("next miss: %v", err)
			}
			rows, rel, _ := device.Acquire(c, 0, []int{5, 6})
			checkRow(t, auth, rows[0], 0, 5)
			checkRow(t, auth, rows[1], 0, 6)
			rel()
		})
	}
}

// TestAmbiguousFailureFaults: a failure after publication faults the cache
// and every later Acquire returns the same error.
func TestAmbiguousFailureFaults(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		cases := []struct {
			name    string
			inject  func(fd *faultDevice)
			trigger func(t *testing.T, c *Cache, auth *Authority) error
		}{
			{
				// The victims' last compute events cannot be queried while
				// retiring them, after the new generation was published.
				name:   "compute event query fails after publication",
				inject: func(fd *faultDevice) { fd.computeQuery = errInjected },
				trigger: func(t *testing.T, c *Cache, auth *Authority) error {
					_, rel := mustAcquire(t, c, auth, 0, 1)
					rel()
					_, _, err := device.Acquire(c, 0, []int{4})
					if res, _ := c.Resident(0); !slices.Contains(res, 4) {
						t.Errorf("expert 4 not published (%v): the failure was meant to come after publication", res)
					}
					return err
				},
			},
			{
				// No event covers the reads: nothing may be reused.
				name:   "compute event cannot be recorded at release",
				inject: func(fd *faultDevice) { fd.recordErr = errInjected },
				trigger: func(t *testing.T, c *Cache, auth *Authority) error {
					_, rel := mustAcquire(t, c, auth, 0)
					rel()
					_, _, err := device.Acquire(c, 0, []int{0})
					return err
				},
			},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c, auth, fd := newFaultCache(t, 6, withTransport(Options{Capacity: 2, Spares: 2, Staging: 1, GroupSize: 2}, tr))
				fd.set(tc.inject)
				err := tc.trigger(t, c, auth)
				if !errors.Is(err, ErrFaulted) || !errors.Is(err, errInjected) {
					t.Fatalf("error %v, want ErrFaulted wrapping the device error", err)
				}
				fd.set(func(fd *faultDevice) { fd.computeQuery, fd.recordErr = nil, nil })
				for _, ids := range [][]int{{0}, {1}, {5}, {2, 3}} {
					_, _, err2 := device.Acquire(c, 0, ids)
					if !errors.Is(err2, ErrFaulted) || err2.Error() != err.Error() {
						t.Fatalf("Acquire(%v) after the fault = %v, want the sticky %v", ids, err2, err)
					}
				}
			})
		}
	})
}

// TestReclaimWaitFailureKeepsGeneration: waiting for a retired row's
// compute event fails before publication: the miss fails, the generation
// stays, the row stays retired and the cache is not faulted.
func TestReclaimWaitFailureKeepsGeneration(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		c, auth, fd := newFaultCache(t, 4, withTransport(Options{Capacity: 2, Spares: 1, Staging: 1, GroupSize: 1}, tr))
		fd.set(func(fd *faultDevice) { fd.computeWait = errInjected })
		_, rel := mustAcquire(t, c, auth, 0)
		rel()
		fd.set(func(fd *faultDevice) { fd.computeWait = nil })
		_, rel = mustAcquire(t, c, auth, 1)
		rel()
		_, rel = mustAcquire(t, c, auth, 2) // evicts 0 into the spare row; 0's row retires
		rel()
		if st := rowStates(c, 0); st[rowRetired] != 1 {
			t.Fatalf("row states %v, want expert 0's row retired", st)
		}
		before := snap(c)
		_, _, err := device.Acquire(c, 0, []int{3}) // needs 0's row back
		if !errors.Is(err, errInjected) || errors.Is(err, ErrFaulted) {
			t.Fatalf("Acquire = %v, want the injected error without a fault", err)
		}
		if after := snap(c); !after.equal(before) {
			t.Fatalf("layer changed: %+v -> %+v", before, after)
		}
		if st := rowStates(c, 0); st[rowRetired] != 1 {
			t.Fatalf("row states %v, want the row still retired", st)
		}
		_, rel = mustAcquire(t, c, auth, 2)
		rel()
	})
}

// TestVictimWaitsForComputeEvent: a victim row whose readers' compute
// event has not completed is not reused; the miss that needs it waits for
// the event, and only then overwrites the row.
func TestVictimWaitsForComputeEvent(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		c, auth, fd := newFaultCache(t, 4, withTransport(Options{Capacity: 2, Spares: 1, Staging: 1, GroupSize: 1}, tr))
		gate, waiting := make(chan struct{}), make(chan struct{}, 1)
		fd.set(func(fd *faultDevice) { fd.gate, fd.waiting = gate, waiting })
		rows0, rel := mustAcquire(t, c, auth, 0)
		rel() // records a compute event that completes only when gate closes
		fd.set(func(fd *faultDevice) { fd.gate, fd.waiting = nil, nil })
		_, rel = mustAcquire(t, c, auth, 1)
		rel()
		_, rel = mustAcquire(t, c, auth, 2) // evicts 0; its row retires, event pending
		rel()
		if st := rowStates(c, 0); st[rowRetired] != 1 {
			t.Fatalf("row states %v, want expert 0's row retired", st)
		}

		type result struct {
			rows []backend.Tensor
			err  error
		}
		done := make(chan result, 1)
		go func() {
			rows, rel, err := device.Acquire(c, 0, []int{3}) // evicts 1; needs 0's row
			if err == nil {
				rel()
			}
			done <- result{rows, err}
		}()
		select {
		case <-waiting:
		case <-time.After(10 * time.Second):
			t.Fatal("the miss never waited for the compute event")
		}
		select {
		case r := <-done:
			t.Fatalf("the miss finished (%v) before the compute event completed", r.err)
		default:
		}
		checkRow(t, auth, rows0[0], 0, 0) // still expert 0 while the event is pending
		close(gate)
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.rows[0] != rows0[0] {
			t.Fatal("expert 3 did not reuse expert 0's reclaimed row")
		}
		checkRow(t, auth, r.rows[0], 0, 3)
	})
}

// TestPublicationWaitsForCopies: while the copies of a group are still
// running, the old generation stays published and hits are served from
// it; the new generation appears only after every copy completed.
func TestPublicationWaitsForCopies(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		c, auth, fd := newFaultCache(t, 8, withTransport(Options{Capacity: 4, Spares: 2, Staging: 2, GroupSize: 2}, tr))
		gate, issued := make(chan struct{}), make(chan struct{}, 2)
		fd.set(func(fd *faultDevice) { fd.copyGate, fd.copyIssued = gate, issued })
		type result struct {
			rows []backend.Tensor
			err  error
		}
		done := make(chan result, 1)
		go func() {
			rows, rel, err := device.Acquire(c, 0, []int{6, 7})
			if err == nil {
				rel()
			}
			done <- result{rows, err}
		}()
		for range 2 {
			select {
			case <-issued:
			case <-time.After(10 * time.Second):
				t.Fatal("copies never issued")
			}
		}
		if res, seq := c.Resident(0); !slices.Equal(res, []int{0, 1, 2, 3}) || seq != 1 {
			t.Fatalf("published %v (generation %d) while its copies are running", res, seq)
		}
		_, rel := mustAcquire(t, c, auth, 3) // hits do not wait for the miss
		rel()
		select {
		case r := <-done:
			t.Fatalf("Acquire returned (%v) before its copies completed", r.err)
		default:
		}
		close(gate)
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		checkRow(t, auth, r.rows[0], 0, 6)
		checkRow(t, auth, r.rows[1], 0, 7)
		if res, seq := c.Resident(0); !slices.Contains(res, 6) || !slices.Contains(res, 7) || seq != 2 {
			t.Fatalf("published %v (generation %d) after the miss", res, seq)
		}
	})
}

// TestLeasePinsOlderGeneration: a consumer leases a victim through the
// still-published generation while the miss copies. The row is retired
// with its lease, keeps its bytes, and is reused only after release.
func TestLeasePinsOlderGeneration(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		c, auth, fd := newFaultCache(t, 4, withTransport(Options{Capacity: 2, Spares: 1, Staging: 1, GroupSize: 1}, tr))
		var held []backend.Tensor
		var release func()
		fd.set(func(fd *faultDevice) {
			fd.onCopy = func() {
				fd.set(func(fd *faultDevice) { fd.onCopy = nil }) // fd.mu is not held while hooks run
				// Expert 0 is the victim of the running miss; lease it now.
				rows, rel, err := device.Acquire(c, 0, []int{0})
				if err != nil {
					t.Error(err)
					return
				}
				held, release = rows, rel
			}
		})
		_, rel := mustAcquire(t, c, auth, 2) // victim 0 (LRU), leased mid-copy
		rel()
		if held == nil {
			t.Fatal("hook did not run")
		}
		if res, _ := c.Resident(0); !slices.Equal(res, []int{1, 2}) {
			t.Fatalf("resident %v, want [1 2]", res)
		}
		checkRow(t, auth, held[0], 0, 0)

		before := snap(c)
		_, _, err := device.Acquire(c, 0, []int{3}) // the only unpublished row is leased
		if !errors.Is(err, ErrNoSpare) {
			t.Fatalf("Acquire = %v, want ErrNoSpare while the retired row is leased", err)
		}
		if after := snap(c); !after.equal(before) {
			t.Fatalf("layer changed: %+v -> %+v", before, after)
		}
		checkRow(t, auth, held[0], 0, 0)
		release()
		rows, rel := mustAcquire(t, c, auth, 3)
		rel()
		if rows[0] != held[0] {
			t.Fatal("expert 3 did not reuse the released row")
		}
	})
}

func TestCloseAndLeases(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		auth := newFakeAuthority(t, 2, 6, faultRecord)
		fd := &faultDevice{Device: newCPUDevice(t)}
		c, err := New(fd, auth, 2, 6, withTransport(Options{Capacity: 3, Spares: 2, Staging: 2, GroupSize: 2}, tr))
		if err != nil {
			t.Fatal(err)
		}
		_, rel, err := device.Acquire(c, 1, []int{4, 5})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); !errors.Is(err, ErrLeased) {
			t.Fatalf("Close with a lease = %v, want ErrLeased", err)
		}
		if _, _, err := device.Acquire(c, 0, []int{0}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
		}
		registered := 0
		if tr == TransportRegistered {
			registered = 1
			// Still registered: the authority refuses to unmap.
			if err := auth.Close(); !errors.Is(err, ErrAuthorityRegistered) {
				t.Fatalf("Authority.Close while registered = %v, want ErrAuthorityRegistered", err)
			}
			checkRow(t, auth, c.layers[0].rows[0].tensor, 0, 0) // still mapped
		}
		if fd.registers != registered || fd.unregisters != 0 {
			t.Fatalf("%d registrations, %d undone before Close, want %d and 0", fd.registers, fd.unregisters, registered)
		}
		rel()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if fd.rowFrees != fd.rowAllocs || fd.stagingFrees != fd.stagingAllocs {
			t.Fatalf("freed %d/%d rows, %d/%d staging", fd.rowFrees, fd.rowAllocs, fd.stagingFrees, fd.stagingAllocs)
		}
		if fd.registers != registered || fd.unregisters != registered {
			t.Fatalf("%d registrations, %d undone after Close, want %d", fd.registers, fd.unregisters, registered)
		}
		if err := auth.Close(); err != nil {
			t.Fatalf("Authority.Close after the cache closed: %v", err)
		}
	})
}

func TestAcquireRejects(t *testing.T) {
	auth := newFakeAuthority(t, 2, 6, faultRecord)
	c, err := New(newCPUDevice(t), auth, 2, 6, Options{Capacity: 3, Spares: 2, Staging: 1, GroupSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		layer int
		ids   []int
		want  string
	}{
		{"layer out of range", 2, []int{0}, "layer 2 outside 0..1"},
		{"empty group", 0, nil, "group of 0 experts, want 1..2"},
		{"group too large", 0, []int{0, 1, 2}, "group of 3 experts, want 1..2"},
		{"expert out of range", 0, []int{6}, "expert 6 outside 0..5"},
		{"duplicate expert", 1, []int{4, 4}, "expert 4 twice in group [4 4]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := device.Acquire(c, tc.layer, tc.ids)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Acquire(%d, %v) = %v, want %q", tc.layer, tc.ids, err, tc.want)
			}
		})
	}
}
