package cache

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// TestSnapshot: a layer's snapshot maps every published expert to its row
// (nil for the others), is pinned exactly at full residency, and agrees
// with the rows leases serve; its Seq changes after a miss and only then.
func TestSnapshot(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		pinned   bool
	}{
		{"full residency", 8, true},
		{"partial residency", 6, false},
		{"one row", 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			auth := newFakeAuthority(t, 2, 8, 64)
			c, err := New(newCPUDevice(t), auth, 2, 8, Options{Capacity: tc.capacity, Spares: 2, Staging: 2, GroupSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.Admit()
			sn, err := c.Snapshot(1)
			if err != nil {
				t.Fatal(err)
			}
			if sn.Pinned != tc.pinned || sn.Layer != 1 || sn.Seq != 1 || len(sn.Rows) != 8 {
				t.Fatalf("snapshot: layer %d seq %d pinned %v, %d rows; want layer 1 seq 1 pinned %v, 8 rows", sn.Layer, sn.Seq, sn.Pinned, len(sn.Rows), tc.pinned)
			}
			for e, r := range sn.Rows {
				if (r != nil) != (e < tc.capacity) {
					t.Fatalf("expert %d: row %v, want published exactly for 0..%d (canonical placement)", e, r, tc.capacity-1)
				}
				if r != nil {
					checkRow(t, auth, r, 1, e)
				}
			}
			got, release, err := device.Acquire(c, 1, []int{1, 0})
			if err != nil {
				t.Fatal(err)
			}
			release()
			if got[0] != sn.Rows[1] || got[1] != sn.Rows[0] {
				t.Fatal("the served rows differ from the snapshot's")
			}
			if sn2, _ := c.Snapshot(1); sn2.Seq != sn.Seq {
				t.Fatalf("generation %d -> %d after a hit", sn.Seq, sn2.Seq)
			}
			if tc.pinned {
				return
			}
			got, release, err = device.Acquire(c, 1, []int{7, 1})
			if err != nil {
				t.Fatal(err)
			}
			release()
			sn2, err := c.Snapshot(1)
			if err != nil {
				t.Fatal(err)
			}
			if sn2.Seq == sn.Seq || sn2.Pinned {
				t.Fatalf("after a miss: generation %d (was %d), pinned %v", sn2.Seq, sn.Seq, sn2.Pinned)
			}
			if sn2.Rows[7] != got[0] || sn2.Rows[1] != got[1] {
				t.Fatal("the snapshot disagrees with the rows Serve returned")
			}
			n := 0
			for _, r := range sn2.Rows {
				if r != nil {
					n++
				}
			}
			if n != tc.capacity {
				t.Fatalf("%d experts published, capacity %d", n, tc.capacity)
			}
			if sn0, _ := c.Snapshot(0); sn0.Seq != 1 {
				t.Fatalf("layer 0 at generation %d after a miss of layer 1", sn0.Seq)
			}
		})
	}
	auth := newFakeAuthority(t, 1, 4, 64)
	c, err := New(newCPUDevice(t), auth, 1, 4, Options{Capacity: 4, Spares: 1, Staging: 1, GroupSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, l := range []int{-1, 1} {
		if _, err := c.Snapshot(l); err == nil {
			t.Errorf("Snapshot(%d) of a cache of one layer succeeded", l)
		}
	}
}

// TestFullResidencyLeaseCountsLikeRecordHits: at full residency a step
// that read the rows through its pinned snapshot serves a lease per routed
// group only to count it. That counts exactly what RecordHits did (a hit
// per expert, the policy sees each hit, no miss, no copy, no eviction),
// records no compute event at Release (rows never move), and Close then
// records one and waits for it.
func TestFullResidencyLeaseCountsLikeRecordHits(t *testing.T) {
	groups := [][]int{{1, 3}, {3, 1}, {0}, {7, 2}, {5, 6}, {1, 3}}
	for _, tr := range Transports() {
		t.Run(tr, func(t *testing.T) {
			auth := newFakeAuthority(t, 2, 8, 64)
			fd := &recordingDevice{faultDevice: faultDevice{Device: newCPUDevice(t)}}
			c, err := New(fd, auth, 2, 8, withTransport(Options{Capacity: 8, Spares: 2, Staging: 2, GroupSize: 2}, tr))
			if err != nil {
				t.Fatal(err)
			}
			c.Admit()
			base := c.Counters()
			// What RecordHits did, per group: Policy.Hit on every expert
			// in order, hits += len(group). The reference policy replays
			// it.
			ref, err := NewPolicy(DefaultPolicy, 8)
			if err != nil {
				t.Fatal(err)
			}
			for e := range 8 {
				ref.Insert(e)
			}
			var hits int64
			for _, ids := range groups {
				for _, l := range []int{0, 1} {
					ls, err := c.Lease(l, ids)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := ls.Serve(); err != nil {
						t.Fatal(err)
					}
					ls.Release()
				}
				for _, e := range ids {
					ref.Hit(e)
				}
				hits += int64(len(ids))
			}
			d := c.Counters().Sub(base)
			want := Counters{Hits: 2 * hits, LayerHits: []int64{hits, hits}, LayerMisses: []int64{0, 0},
				LayerEvictions: []int64{0, 0}, LayerH2DBytes: []int64{0, 0}, LayerH2DCopies: []int64{0, 0}}
			if !reflect.DeepEqual(d, want) {
				t.Fatalf("counters\n got %+v\nwant %+v", d, want)
			}
			for l := range 2 {
				if got := policyOrder(c, l); !slices.Equal(got, ref.Order()) {
					t.Fatalf("layer %d: eviction order %v, RecordHits gave %v", l, got, ref.Order())
				}
			}
			if fd.records != 0 {
				t.Fatalf("%d compute events recorded by releases at full residency, want none", fd.records)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if fd.records != 1 {
				t.Fatalf("Close recorded %d compute events, want 1", fd.records)
			}
		})
	}
}

// recordingDevice counts RecordCompute calls.
type recordingDevice struct {
	faultDevice
	records int
}

func (d *recordingDevice) RecordCompute() (Event, error) {
	d.records++
	return d.faultDevice.RecordCompute()
}

// TestFullResidencyCloseNeedsFinalEvent: at full residency Close frees
// nothing when the final compute event cannot be recorded (reads may
// still run) and frees everything once it can.
func TestFullResidencyCloseNeedsFinalEvent(t *testing.T) {
	auth := newFakeAuthority(t, 1, 4, 64)
	fd := &faultDevice{Device: newCPUDevice(t)}
	c, err := New(fd, auth, 1, 4, Options{Capacity: 4, Spares: 2, Staging: 1, GroupSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, rel, err := device.Acquire(c, 0, []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	fd.set(func(fd *faultDevice) { fd.recordErr = errInjected })
	rel() // no event at full residency: no fault
	if err := c.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close without a final compute event = %v, want the injected error", err)
	}
	if fd.rowFrees != 0 {
		t.Fatalf("%d rows freed although the final event could not be recorded", fd.rowFrees)
	}
	fd.set(func(fd *faultDevice) { fd.recordErr = nil })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if fd.rowFrees != fd.rowAllocs {
		t.Fatalf("freed %d of %d rows", fd.rowFrees, fd.rowAllocs)
	}
}

// countingDevice counts the rows a cache allocates.
type countingDevice struct {
	*CPUDevice
	rows int
}

func (d *countingDevice) AllocRow(n int) (Row, error) {
	d.rows++
	return d.CPUDevice.AllocRow(n)
}

// TestFullResidencyAllocatesNoSpares: spare rows exist for misses, and full
// residency cannot miss, so it allocates exactly layers x experts rows;
// partial residency allocates capacity rows per layer and one pool of
// spares the layers share.
func TestFullResidencyAllocatesNoSpares(t *testing.T) {
	tests := []struct {
		capacity, spares, want int
	}{
		{8, 2, 2 * 8},
		{6, 2, 2*6 + 2},
		{6, 3, 2*6 + 3},
	}
	for _, tc := range tests {
		auth := newFakeAuthority(t, 2, 8, 64)
		dev := &countingDevice{CPUDevice: newCPUDevice(t)}
		c, err := New(dev, auth, 2, 8, Options{Capacity: tc.capacity, Spares: tc.spares, Staging: 2, GroupSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		if dev.rows != tc.want {
			t.Errorf("capacity %d spares %d: %d rows allocated, want %d", tc.capacity, tc.spares, dev.rows, tc.want)
		}
		c.Close()
	}
}

// batchDevice allocates rows in batches (RowsAllocator) and can hand out
// one row too few to exercise the cache's error path.
type batchDevice struct {
	*CPUDevice
	calls, short int
	freed        int
}

func (d *batchDevice) AllocRows(n, count int) ([]Row, error) {
	d.calls++
	var out []Row
	for range count - d.short {
		r, err := d.CPUDevice.AllocRow(n)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (d *batchDevice) FreeRow(r Row) error {
	d.freed++
	return d.CPUDevice.FreeRow(r)
}

// TestBatchRowAllocation: a RowsAllocator device gets one call per layer
// and one for the shared spare pool;
// a short batch fails New with a clear error and every row it handed out
// is freed.
func TestBatchRowAllocation(t *testing.T) {
	auth := newFakeAuthority(t, 3, 8, 64)
	dev := &batchDevice{CPUDevice: newCPUDevice(t)}
	c, err := New(dev, auth, 3, 8, Options{Capacity: 6, Spares: 2, Staging: 2, GroupSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	c.Admit()
	if dev.calls != 4 {
		t.Fatalf("%d AllocRows calls for 3 layers and the pool", dev.calls)
	}
	rows, release, err := device.Acquire(c, 1, []int{7, 0})
	if err != nil {
		t.Fatal(err)
	}
	release()
	checkRow(t, auth, rows[0], 1, 7)
	c.Close()

	short := &batchDevice{CPUDevice: newCPUDevice(t), short: 1}
	if _, err := New(short, auth, 3, 8, Options{Capacity: 6, Spares: 2, Staging: 2, GroupSize: 2}); err == nil {
		t.Fatal("New accepted a short batch of rows")
	}
	if short.freed != 5 { // layer 0's batch of 6, one short
		t.Fatalf("%d rows freed after the failed New, want the 5 handed out", short.freed)
	}
}
