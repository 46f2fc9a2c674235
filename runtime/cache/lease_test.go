package cache

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// TestLeaseResident: a Lease returns the published rows of a group (nil
// for the rest), counts nothing, leaves the eviction order alone, and
// keeps its rows from being evicted until released.
func TestLeaseResident(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		const layers, experts, size = 2, 6, 512
		auth := newFakeAuthority(t, layers, experts, size)
		// Capacity 3, canonical placement: experts 0, 1, 2 published.
		c, err := New(newCPUDevice(t), auth, layers, experts, withTransport(Options{Capacity: 3, Spares: 2, Staging: 2, GroupSize: 2}, tr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Admit()
		before, order := c.Counters(), policyOrder(c, 1)

		ls, err := c.Lease(1, []int{4, 1})
		if err != nil {
			t.Fatal(err)
		}
		rows := ls.Resident()
		if rows[0] != nil || rows[1] == nil {
			t.Fatalf("rows = %v, want [nil, row of expert 1]", rows)
		}
		checkRow(t, auth, rows[1], 1, 1)
		if got := c.Counters(); !reflect.DeepEqual(got, before) {
			t.Fatalf("Lease changed the counters: %+v, was %+v", got, before)
		}
		if got := policyOrder(c, 1); !slices.Equal(got, order) {
			t.Fatalf("Lease changed the eviction order: %v, was %v", got, order)
		}

		// Expert 1 is leased: a group that must evict two of {0, 1, 2}
		// takes 0 and 2, never 1.
		r2, rel2, err := device.Acquire(c, 1, []int{3, 4})
		if err != nil {
			t.Fatal(err)
		}
		checkRow(t, auth, r2[0], 1, 3)
		checkRow(t, auth, rows[1], 1, 1)
		if res, _ := c.Resident(1); !slices.Contains(res, 1) {
			t.Fatalf("leased expert 1 was evicted: resident %v", res)
		}
		// Published {1, 3, 4}, all leased: group {5, 3} finds no victim
		// until the first lease ends.
		if _, _, err := device.Acquire(c, 1, []int{5, 3}); !errors.Is(err, ErrNoVictim) {
			t.Fatalf("Acquire needing the leased row's eviction: err = %v, want ErrNoVictim", err)
		}
		ls.Release()
		ls.Release() // idempotent
		r3, rel3, err := device.Acquire(c, 1, []int{5, 3})
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		checkRow(t, auth, r3[0], 1, 5)
		if res, _ := c.Resident(1); slices.Contains(res, 1) {
			t.Fatalf("expert 1 still published after its lease ended and a group needed its row: %v", res)
		}
		rel2()
		rel3()

		// A group with nothing published leases nothing.
		none, err := c.Lease(0, []int{4, 5})
		if err != nil || none.Resident()[0] != nil || none.Resident()[1] != nil {
			t.Fatalf("Lease of unpublished experts = %v, %v", none, err)
		}
		none.Release()
		if _, err := c.Lease(0, []int{9}); err == nil {
			t.Fatal("Lease of expert 9 of 6 succeeded")
		}
	})
}

// leaseCache is a cache of one layer of 8 experts over a faultDevice,
// capacity 4 (canonical placement: 0..3 published), groups of up to 2.
func leaseCache(t *testing.T, tr string) (*Cache, *Authority, *faultDevice) {
	t.Helper()
	c, auth, fd := newFaultCache(t, 8, withTransport(Options{Capacity: 4, Spares: 2, Staging: 2, GroupSize: 2}, tr))
	t.Cleanup(func() { c.Close() })
	return c, auth, fd
}

// TestServeAndRelease walks one lease through its calls: what Serve
// returns and counts (once), what a second Serve and a second Release do,
// and that the rows Resident returned are the rows Serve returns.
func TestServeAndRelease(t *testing.T) {
	cases := []struct {
		name         string
		ids          []int
		hits, misses int64
		evictions    int64
	}{
		{"all hits", []int{2, 0}, 2, 0, 0},
		{"hit and miss", []int{1, 6}, 1, 1, 1},
		{"all misses", []int{7, 5}, 0, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forTransports(t, func(t *testing.T, tr string) {
				c, auth, _ := leaseCache(t, tr)
				base := c.Counters()
				ls, err := c.Lease(0, tc.ids)
				if err != nil {
					t.Fatal(err)
				}
				resident := slices.Clone(ls.Resident())
				rows, err := ls.Serve()
				if err != nil {
					t.Fatal(err)
				}
				for i, e := range tc.ids {
					checkRow(t, auth, rows[i], 0, e)
					if resident[i] != nil && resident[i] != rows[i] {
						t.Fatalf("expert %d: Serve returned another row than Resident", e)
					}
				}
				once := c.Counters().Sub(base)
				if once.Hits != tc.hits || once.Misses != tc.misses || once.Evictions != tc.evictions {
					t.Fatalf("Serve counted %d hits, %d misses, %d evictions; want %d, %d, %d",
						once.Hits, once.Misses, once.Evictions, tc.hits, tc.misses, tc.evictions)
				}
				order := policyOrder(c, 0)
				again, err := ls.Serve()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(again, rows) {
					t.Fatal("a second Serve returned other rows")
				}
				if d := c.Counters().Sub(base); !reflect.DeepEqual(d, once) {
					t.Fatalf("a second Serve counted: %+v, was %+v", d, once)
				}
				if got := policyOrder(c, 0); !slices.Equal(got, order) {
					t.Fatalf("a second Serve touched the policy: %v, was %v", got, order)
				}
				ls.Release()
				ls.Release()
				if _, err := ls.Serve(); !errors.Is(err, errReleased) {
					t.Fatalf("Serve after Release = %v, want errReleased", err)
				}
				for ri, r := range c.layers[0].rows {
					if r.leases != 0 {
						t.Fatalf("row %d: %d leases after Release twice", ri, r.leases)
					}
				}
				if err := c.Close(); err != nil {
					t.Fatalf("Close after Release twice: %v", err)
				}
			})
		})
	}
}

// TestLeasedRowsSurviveConcurrentMiss: the resident rows of a lease not
// yet served are never the victims of another group's miss, even when the
// policy would pick them first, and they keep their bytes while that miss
// copies into other rows (run under -race).
func TestLeasedRowsSurviveConcurrentMiss(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		c, auth, fd := leaseCache(t, tr)
		// LRU order 0, 1, 2, 3: a lease on {0, 1} holds the two
		// least recently used experts.
		ls, err := c.Lease(0, []int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		held := slices.Clone(ls.Resident())
		gate, issued := make(chan struct{}), make(chan struct{}, 2)
		fd.set(func(fd *faultDevice) { fd.copyGate, fd.copyIssued = gate, issued })
		type result struct {
			rows []backend.Tensor
			err  error
		}
		done := make(chan result, 1)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows, rel, err := device.Acquire(c, 0, []int{6, 7}) // evicts two
			if err == nil {
				defer rel()
			}
			done <- result{rows, err}
		}()
		for range 2 {
			select {
			case <-issued:
			case <-time.After(10 * time.Second):
				t.Fatal("the other group's copies never issued")
			}
		}
		for i, e := range []int{0, 1} {
			checkRow(t, auth, held[i], 0, e) // while the miss copies
		}
		close(gate)
		r := <-done
		wg.Wait()
		if r.err != nil {
			t.Fatal(r.err)
		}
		if res, _ := c.Resident(0); !slices.Equal(res, []int{0, 1, 6, 7}) {
			t.Fatalf("resident %v, want the leased 0 and 1 kept and 2, 3 evicted", res)
		}
		rows, err := ls.Serve()
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range []int{0, 1} {
			if rows[i] != held[i] {
				t.Fatalf("expert %d moved while leased", e)
			}
			checkRow(t, auth, rows[i], 0, e)
		}
		ls.Release()
	})
}

// TestLeaseReleasedUnserved: a lease released without Serve counts
// nothing, touches no policy and drops its leases; its group can be
// leased again.
func TestLeaseReleasedUnserved(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		c, _, _ := leaseCache(t, tr)
		before, order := c.Counters(), policyOrder(c, 0)
		ls, err := c.Lease(0, []int{3, 6})
		if err != nil {
			t.Fatal(err)
		}
		ls.Release()
		if got := c.Counters(); !reflect.DeepEqual(got, before) {
			t.Fatalf("counters %+v, were %+v", got, before)
		}
		if got := policyOrder(c, 0); !slices.Equal(got, order) {
			t.Fatalf("eviction order %v, was %v", got, order)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}

// TestLeaseAfterClose: Lease, Serve and Snapshot of a closed cache return
// ErrClosed; Close refuses while a lease holds rows.
func TestLeaseAfterClose(t *testing.T) {
	c, _, _ := leaseCache(t, TransportStaged)
	hold, err := c.Lease(0, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := c.Lease(0, []int{6}) // holds no row
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); !errors.Is(err, ErrLeased) {
		t.Fatalf("Close with a lease = %v, want ErrLeased", err)
	}
	if _, err := pending.Serve(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Lease(0, []int{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lease after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Snapshot(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Snapshot after Close = %v, want ErrClosed", err)
	}
	pending.Release()
	hold.Release()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
