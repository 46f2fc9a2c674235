package cache

import (
	"testing"
)

func TestPinnedRowsAndRecordHits(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		wantErr  bool
	}{
		{"full residency", 8, false},
		{"partial residency", 6, true},
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
			rows, err := c.PinnedRows(0)
			if (err != nil) != tc.wantErr {
				t.Fatalf("PinnedRows: err %v, want error %v", err, tc.wantErr)
			}
			if err := c.RecordHits(0, []int{1, 3}); (err != nil) != tc.wantErr {
				t.Fatalf("RecordHits: err %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			got, release, err := c.Acquire(0, []int{3, 1})
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != rows[3] || got[1] != rows[1] {
				t.Fatalf("Acquire rows differ from PinnedRows")
			}
			release()
			cnt := c.Counters()
			if cnt.Hits != 4 || cnt.Misses != 0 {
				t.Fatalf("hits %d misses %d, want 4 and 0", cnt.Hits, cnt.Misses)
			}
			if err := c.RecordHits(0, []int{1, 1}); err == nil {
				t.Fatal("RecordHits accepted a group with a repeated expert")
			}
			if err := c.RecordHits(0, []int{9}); err == nil {
				t.Fatal("RecordHits accepted an expert outside the layer")
			}
		})
	}
}

func TestPublishedRowsFollowsMisses(t *testing.T) {
	auth := newFakeAuthority(t, 1, 8, 64)
	c, err := New(newCPUDevice(t), auth, 1, 8, Options{Capacity: 4, Spares: 2, Staging: 2, GroupSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Admit()
	rows, seq, err := c.PublishedRows(0)
	if err != nil {
		t.Fatal(err)
	}
	for e, r := range rows {
		if (r != nil) != (e < 4) {
			t.Fatalf("expert %d: row %v, want published exactly for 0..3 (canonical placement)", e, r)
		}
	}
	got, release, err := c.Acquire(0, []int{6, 1})
	if err != nil {
		t.Fatal(err)
	}
	release()
	rows2, seq2, err := c.PublishedRows(0)
	if err != nil {
		t.Fatal(err)
	}
	if seq2 == seq {
		t.Fatal("generation did not change after a miss")
	}
	if rows2[6] != got[0] || rows2[1] != got[1] {
		t.Fatal("PublishedRows disagrees with the rows Acquire returned")
	}
	n := 0
	for _, r := range rows2 {
		if r != nil {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d experts published, capacity 4", n)
	}
	if _, _, err := c.PublishedRows(1); err == nil {
		t.Fatal("PublishedRows accepted a layer outside the cache")
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
// partial residency allocates capacity + spares per layer.
func TestFullResidencyAllocatesNoSpares(t *testing.T) {
	tests := []struct {
		capacity, spares, want int
	}{
		{8, 2, 2 * 8},
		{6, 2, 2 * (6 + 2)},
		{6, 3, 2 * (6 + 3)},
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

// TestBatchRowAllocation: a RowsAllocator device gets one call per layer;
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
	if dev.calls != 3 {
		t.Fatalf("%d AllocRows calls for 3 layers", dev.calls)
	}
	rows, release, err := c.Acquire(1, []int{7, 0})
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
	if short.freed != 7 {
		t.Fatalf("%d rows freed after the failed New, want the 7 handed out", short.freed)
	}
}
