package cache

import (
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// TestSharedSparePool: partial residency allocates capacity rows per layer
// and one pool of spares the layers share; each layer's misses take rows
// from the pool and its victims' rows return to it, so a pool of one
// group serves misses in every layer in turn, and every row served holds
// its expert's record.
func TestSharedSparePool(t *testing.T) {
	for _, tc := range []struct {
		name           string
		layers, cap, k int
		groups         [][2][]int // {layer}, group
	}{
		{name: "two layers, one spare", layers: 2, cap: 2, k: 1, groups: [][2][]int{{{0}, {5}}, {{1}, {6}}, {{0}, {7}}, {{1}, {0}}, {{0}, {5}}}},
		{name: "three layers, a group of two", layers: 3, cap: 3, k: 2, groups: [][2][]int{{{2}, {6, 7}}, {{0}, {6, 7}}, {{1}, {4, 5}}, {{2}, {0, 1}}, {{0}, {3, 2}}}},
	} {
		for _, tr := range Transports() {
			t.Run(tc.name+"/"+tr, func(t *testing.T) {
				const experts = 8
				auth := newFakeAuthority(t, tc.layers, experts, 64)
				dev := &countingDevice{CPUDevice: newCPUDevice(t)}
				c, err := New(dev, auth, tc.layers, experts, withTransport(Options{Capacity: tc.cap, Spares: tc.k, Staging: 1, GroupSize: tc.k}, tr))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if want := tc.layers*tc.cap + tc.k; dev.rows != want {
					t.Fatalf("%d rows allocated, want %d (capacity %d x %d layers + %d shared spares)", dev.rows, want, tc.cap, tc.layers, tc.k)
				}
				c.Admit()
				for i, g := range tc.groups {
					l, ids := g[0][0], g[1]
					rows, release, err := device.Acquire(c, l, ids)
					if err != nil {
						t.Fatalf("group %d (layer %d %v): %v", i, l, ids, err)
					}
					for j, e := range ids {
						checkRow(t, auth, rows[j], l, e)
					}
					release()
					for ly := 0; ly < tc.layers; ly++ {
						st := rowStates(c, ly)
						if st[rowPublished] != tc.cap || st[rowLoading] != 0 || st[rowQuarantined] != 0 {
							t.Fatalf("after group %d: layer %d's rows %v, want %d published", i, ly, st, tc.cap)
						}
					}
				}
				if d := c.Counters().Sub(c.Preparation()); d.Misses == 0 || d.Evictions != d.Misses {
					t.Fatalf("misses %d, evictions %d: want misses, each evicting one", d.Misses, d.Evictions)
				}
			})
		}
	}
}

// TestReserveTakesFinishedRowsFirst: a miss that needs a spare when the
// pool has none free takes a retired row whose readers are done, from any
// layer, before it waits on one whose compute event is still pending,
// even when the pending one is its own layer's. The pending event's
// readers are left alone: the miss finishes without waiting for them.
func TestReserveTakesFinishedRowsFirst(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		const layers, experts = 2, 8
		auth := newFakeAuthority(t, layers, experts, faultRecord)
		fd := &faultDevice{Device: newCPUDevice(t)}
		c, err := New(fd, auth, layers, experts, withTransport(Options{Capacity: 2, Spares: 2, Staging: 1, GroupSize: 1}, tr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Admit()
		acquire := func(l, e int) {
			t.Helper()
			rows, rel, err := device.Acquire(c, l, []int{e})
			if err != nil {
				t.Fatalf("layer %d, expert %d: %v", l, e, err)
			}
			checkRow(t, auth, rows[0], l, e)
			rel()
		}
		// Each layer reads experts 0 and 1 under its own gate, then
		// misses 2 into a free spare, evicting 0: its row retires with
		// its readers pending.
		retire := func(l int, gate chan struct{}, waiting chan struct{}) {
			t.Helper()
			fd.set(func(fd *faultDevice) { fd.gate, fd.waiting = gate, waiting })
			acquire(l, 0)
			acquire(l, 1)
			fd.set(func(fd *faultDevice) { fd.gate, fd.waiting = nil, nil })
			acquire(l, 2)
			if st := rowStates(c, l); st[rowRetired] != 1 {
				t.Fatalf("layer %d's rows %v, want expert 0's retired", l, st)
			}
		}
		g1 := make(chan struct{})
		retire(1, g1, nil)
		close(g1) // layer 1's retired row is free once the stream drains, still retired
		if ev, err := fd.Device.RecordCompute(); err != nil || ev.Wait() != nil {
			t.Fatalf("drain the compute stream: %v", err)
		}
		g0, waiting := make(chan struct{}), make(chan struct{}, 4)
		defer func() {
			select {
			case <-g0:
			default:
				close(g0)
			}
		}()
		retire(0, g0, waiting)
		if st := rowStates(c, 0); st[rowSpare] != 0 {
			t.Fatalf("pool %v: want no free spare left", st)
		}

		done := make(chan error, 1)
		go func() {
			_, rel, err := device.Acquire(c, 0, []int{3}) // misses; the pool is empty
			if err == nil {
				rel()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-waiting:
			t.Fatal("the miss waited on layer 0's pending compute event while layer 1's retired row was free")
		case <-time.After(10 * time.Second):
			t.Fatal("the miss neither finished nor waited")
		}
		if st := rowStates(c, 0); st[rowRetired] < 1 {
			t.Fatalf("layer 0's rows %v: want its pending row still retired", st)
		}
		close(g0)
		acquire(0, 4) // now it may take the row whose readers are done
	})
}
