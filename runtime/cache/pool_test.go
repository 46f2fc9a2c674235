package cache

import (
	"testing"

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
