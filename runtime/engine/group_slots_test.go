package engine

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// groupSlotsByMap is the grouping groupSlots replaced (a map of appends),
// kept as the reference: the same order and the same slots.
func groupSlotsByMap(ids []int) ([]int, map[int][]int) {
	var order []int
	slots := map[int][]int{}
	for s, id := range ids {
		if _, seen := slots[id]; !seen {
			order = append(order, id)
		}
		slots[id] = append(slots[id], s)
	}
	return order, slots
}

// routing is T tokens' top-A of E distinct experts each, seeded.
func routing(seed uint64, T, A, E int) []int {
	r := rand.New(rand.NewPCG(seed, 3))
	ids := make([]int, 0, T*A)
	for range T {
		ids = append(ids, r.Perm(E)[:A]...)
	}
	return ids
}

func TestGroupSlots(t *testing.T) {
	for _, c := range []struct {
		name    string
		T, A, E int
	}{
		{"one token", 1, 8, 64},
		{"olmoe 57 tokens", 57, 8, 64},
		{"olmoe 512 tokens", 512, 8, 64},
		{"qwen 64 tokens", 64, 4, 60},
		{"every expert once", 8, 8, 64},
		{"one expert", 5, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ids := routing(uint64(c.T*c.E), c.T, c.A, c.E)
			order, slots, err := groupSlots(ids, c.E)
			if err != nil {
				t.Fatal(err)
			}
			wantOrder, wantSlots := groupSlotsByMap(ids)
			if !reflect.DeepEqual(order, wantOrder) {
				t.Fatalf("order %v, want %v", order, wantOrder)
			}
			for e := range c.E {
				if !reflect.DeepEqual(slots[e], wantSlots[e]) {
					t.Fatalf("expert %d: slots %v, want %v", e, slots[e], wantSlots[e])
				}
			}
			// Appending to one expert's slots must not write into the next's.
			if len(order) > 1 {
				first, second := order[0], order[1]
				before := append([]int(nil), slots[second]...)
				_ = append(slots[first], -1)
				if !reflect.DeepEqual(slots[second], before) {
					t.Fatalf("expert %d's slots changed by an append to expert %d's", second, first)
				}
			}
		})
	}
	for _, bad := range [][]int{{0, 64}, {-1}} {
		if _, _, err := groupSlots(bad, 64); err == nil || !strings.Contains(err.Error(), "outside 0..63") {
			t.Fatalf("ids %v: error %v, want one naming the range", bad, err)
		}
	}
}

// BenchmarkGroupSlots: a layer's grouping at 512 tokens x top-8 of 64
// experts (OLMoE-1B-7B's shape, one batched prefill chunk), against the
// map of appends it replaced.
func BenchmarkGroupSlots(b *testing.B) {
	ids := routing(1, 512, 8, 64)
	b.Run("counting", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := groupSlots(ids, 64); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			groupSlotsByMap(ids)
		}
	})
}
