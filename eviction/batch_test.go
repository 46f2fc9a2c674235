package eviction

import (
	"reflect"
	"testing"
)

// A batch event leaves the layer as a lease of its group does and counts
// its further uses as hits; Belady's MIN counts its lookups the same way.
func TestBatchEvent(t *testing.T) {
	cfg := Config{Layers: 1, Experts: 8, Capacity: 4, RecordBytes: 10, GroupSize: 2}
	seq := func(ev Event) (Counters, []Event) {
		m, err := NewModel(cfg)
		if err != nil {
			t.Fatal(err)
		}
		evs := []Event{ev, {KindLease, 0, []int{0, 7}, nil}, {KindLease, 0, []int{5, 1}, nil}}
		for i, e := range evs {
			if err := m.Apply(e); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
		}
		return m.Counters(), evs
	}
	lc, _ := seq(Event{KindLease, 0, []int{5, 6}, nil})
	bc, bevs := seq(Event{KindBatch, 0, []int{5, 6}, []int{3, 1}})
	if bc.Hits != lc.Hits+2 || bc.LayerHits[0] != lc.LayerHits[0]+2 {
		t.Fatalf("batch hits %d (layer %d), lease %d (%d): want 2 more", bc.Hits, bc.LayerHits[0], lc.Hits, lc.LayerHits[0])
	}
	bc.Hits, bc.LayerHits = lc.Hits, lc.LayerHits
	if !reflect.DeepEqual(bc, lc) {
		t.Fatalf("after a batch the layer differs from after a lease of its group:\n%+v\n%+v", bc, lc)
	}
	if bevs[0].Lookups() != 4 || bevs[1].Lookups() != 2 || (Event{KindPrefetch, 0, []int{1}, nil}).Lookups() != 0 {
		t.Fatalf("lookups %d, %d", bevs[0].Lookups(), bevs[1].Lookups())
	}
	b, err := Belady(cfg, bevs)
	if err != nil {
		t.Fatal(err)
	}
	if b.Lookups != 8 || b.EventMisses[0] != 2 {
		t.Fatalf("belady: %d lookups, %d misses at the batch; want 8 and 2", b.Lookups, b.EventMisses[0])
	}
	m, _ := NewModel(cfg)
	for _, bad := range []Event{{KindBatch, 0, []int{5, 6}, []int{1}}, {KindBatch, 0, []int{5}, []int{0}}, {KindLease, 0, []int{5}, []int{1}}} {
		if err := m.Apply(bad); err == nil {
			t.Fatalf("%+v: applied", bad)
		}
	}
}
