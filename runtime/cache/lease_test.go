package cache

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

// TestLeaseResident: LeaseResident returns the published rows of a group
// (nil for the rest), counts nothing, leaves the eviction order alone, and
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

		rows, release, err := c.LeaseResident(1, []int{4, 1})
		if err != nil {
			t.Fatal(err)
		}
		if rows[0] != nil || rows[1] == nil {
			t.Fatalf("rows = %v, want [nil, row of expert 1]", rows)
		}
		checkRow(t, auth, rows[1], 1, 1)
		if got := c.Counters(); !reflect.DeepEqual(got, before) {
			t.Fatalf("LeaseResident changed the counters: %+v, was %+v", got, before)
		}
		if got := policyOrder(c, 1); !slices.Equal(got, order) {
			t.Fatalf("LeaseResident changed the eviction order: %v, was %v", got, order)
		}

		// Expert 1 is leased: a group that must evict two of {0, 1, 2}
		// takes 0 and 2, never 1.
		r2, rel2, err := c.Acquire(1, []int{3, 4})
		if err != nil {
			t.Fatal(err)
		}
		checkRow(t, auth, r2[0], 1, 3)
		checkRow(t, auth, rows[1], 1, 1)
		if res, _ := c.Resident(1); !slices.Contains(res, 1) {
			t.Fatalf("leased expert 1 was evicted: resident %v", res)
		}
		// Published {1, 3, 4}, all leased: group {5, 3} finds no victim
		// until LeaseResident's lease ends.
		if _, _, err := c.Acquire(1, []int{5, 3}); !errors.Is(err, ErrNoVictim) {
			t.Fatalf("Acquire needing the leased row's eviction: err = %v, want ErrNoVictim", err)
		}
		release()
		release() // idempotent
		r3, rel3, err := c.Acquire(1, []int{5, 3})
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
		none, rel4, err := c.LeaseResident(0, []int{4, 5})
		if err != nil || none[0] != nil || none[1] != nil {
			t.Fatalf("LeaseResident of unpublished experts = %v, %v", none, err)
		}
		rel4()
		if _, _, err := c.LeaseResident(0, []int{9}); err == nil {
			t.Fatal("LeaseResident of expert 9 of 6 succeeded")
		}
	})
}
