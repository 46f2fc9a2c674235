package cache

import (
	"errors"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// TestStagedRuns: with the staged transport a record larger than a run
// goes to its row in runs (copy calls at fixed offsets), the rows hold the
// authority's records, and a record counts as copied only when all its
// runs were sent and completed. A run that cannot be enqueued after the
// record's first aborts the transaction before publication with the row
// back in the pool (nothing quarantined, the runs already sent waited
// for); a run whose completion event fails quarantines the row and its
// staging buffer; either way the previous generation stays published and
// the next miss works.
func TestStagedRuns(t *testing.T) {
	const record = 3*hostCopyChunk + 1000 // four pieces
	const run = hostCopyChunk             // four runs a record
	const runs = 4
	cases := []struct {
		name       string
		inject     func(fd *faultDevice, base int)
		wantErr    bool
		quarantine int
		copiesDone int64
	}{
		{name: "every run sent", copiesDone: 2},
		{name: "second run of the first record cannot be enqueued", inject: func(fd *faultDevice, base int) { fd.failEnqueueAt = base + 2 }, wantErr: true},
		{name: "first run of the second record cannot be enqueued", inject: func(fd *faultDevice, base int) { fd.failEnqueueAt = base + runs + 1 }, wantErr: true, copiesDone: 1},
		{name: "third run's completion fails", inject: func(fd *faultDevice, base int) { fd.failCopyWaitAt = base + 3 }, wantErr: true, quarantine: 1, copiesDone: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			auth := newFakeAuthority(t, 1, 8, record)
			fd := &faultDevice{Device: newCPUDevice(t)}
			c, err := New(fd, auth, 1, 8, Options{Capacity: 4, Spares: 3, Staging: 3, GroupSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			c.run = run
			c.Admit()
			defer c.Close()
			before := snap(c)
			h2d, staged := c.Counters().H2DCopies, c.stagingBytes.Load()
			base := fd.copies
			if tc.inject != nil {
				fd.set(func(fd *faultDevice) { tc.inject(fd, fd.copies) })
			}
			rows, rel, err := device.Acquire(c, 0, []int{5, 6})
			if tc.wantErr {
				if !errors.Is(err, errInjected) || errors.Is(err, ErrFaulted) {
					t.Fatalf("Acquire = %v, want the injected error, not a fault", err)
				}
				if after := snap(c); !after.equal(before) {
					t.Fatalf("failed transaction changed the layer:\n before %+v\n after  %+v", before, after)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				checkRow(t, auth, rows[0], 0, 5)
				checkRow(t, auth, rows[1], 0, 6)
				rel()
				if calls := fd.copies - base; calls != 2*runs {
					t.Errorf("%d copy calls for two records, want %d (runs of %d bytes)", calls, 2*runs, run)
				}
				if got := c.stagingBytes.Load() - staged; got != 2*record {
					t.Errorf("%d bytes staged, want %d", got, 2*record)
				}
			}
			if got := c.Counters().H2DCopies - h2d; got != tc.copiesDone {
				t.Errorf("%d copies counted, want %d", got, tc.copiesDone)
			}
			st := rowStates(c, 0)
			if st[rowQuarantined] != tc.quarantine || st[rowLoading] != 0 {
				t.Fatalf("row states %v, want %d quarantined and none loading", st, tc.quarantine)
			}
			if !tc.wantErr {
				return
			}
			fd.set(func(fd *faultDevice) { fd.failEnqueueAt, fd.failCopyWaitAt = 0, 0 })
			rows, rel, err = device.Acquire(c, 0, []int{5, 6})
			if err != nil {
				t.Fatalf("next miss: %v", err)
			}
			checkRow(t, auth, rows[0], 0, 5)
			checkRow(t, auth, rows[1], 0, 6)
			rel()
		})
	}
}
