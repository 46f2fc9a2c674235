package eviction

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestPolicies(t *testing.T) {
	type op struct {
		kind string // insert, hit, remove
		e    int
	}
	cases := []struct {
		policy      string
		ops         []op
		wantOrder   []int
		unevictable []int
		victims     int
		wantVictims []int
	}{
		{"lru", []op{{"insert", 0}, {"insert", 1}, {"insert", 2}, {"hit", 0}}, []int{1, 2, 0}, nil, 2, []int{1, 2}},
		{"lru", []op{{"insert", 0}, {"insert", 1}, {"insert", 2}, {"hit", 1}, {"hit", 0}}, []int{2, 1, 0}, []int{2}, 1, []int{1}},
		{"lru", []op{{"insert", 3}, {"insert", 1}, {"remove", 3}, {"insert", 2}}, []int{1, 2}, []int{1, 2}, 1, nil},
		{"fifo", []op{{"insert", 0}, {"insert", 1}, {"insert", 2}, {"hit", 0}}, []int{0, 1, 2}, nil, 2, []int{0, 1}},
		{"fifo", []op{{"insert", 0}, {"insert", 1}, {"insert", 2}, {"remove", 1}, {"insert", 1}}, []int{0, 2, 1}, []int{0}, 5, []int{2, 1}},
	}
	for _, tc := range cases {
		p, err := NewPolicy(tc.policy, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range tc.ops {
			switch o.kind {
			case "insert":
				p.Insert(o.e)
			case "hit":
				p.Hit(o.e)
			case "remove":
				p.Remove(o.e)
			}
		}
		if got := p.Order(); !slices.Equal(got, tc.wantOrder) {
			t.Errorf("%s %v: order %v, want %v", tc.policy, tc.ops, got, tc.wantOrder)
		}
		v := p.Victims(tc.victims, func(e int) bool { return !slices.Contains(tc.unevictable, e) })
		if !slices.Equal(v, tc.wantVictims) {
			t.Errorf("%s %v: victims %v, want %v", tc.policy, tc.ops, v, tc.wantVictims)
		}
		if got := p.Order(); !slices.Equal(got, tc.wantOrder) {
			t.Errorf("%s: Victims changed the order to %v", tc.policy, got)
		}
	}
	if p, _ := NewPolicy("", 1); p.Name() != "lru" {
		t.Errorf("default policy %s", p.Name())
	}
	if _, err := NewPolicy("clock", 1); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("declared: %v", Policies())) {
		t.Errorf("unknown policy: %v", err)
	}
}

func TestPlacements(t *testing.T) {
	cases := []struct {
		name              string
		experts, capacity int
		want              []int
		err               string
	}{
		{"canonical", 8, 3, []int{0, 1, 2}, ""},
		{"", 4, 4, []int{0, 1, 2, 3}, ""},
		{"strided", 8, 3, []int{0, 2, 5}, ""},
		{"strided", 64, 16, []int{0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60}, ""},
		{"strided", 5, 5, []int{0, 1, 2, 3, 4}, ""},
		{"canonical", 4, 5, nil, "capacity 5 outside 1..4"},
		{"zigzag", 4, 2, nil, `unknown placement "zigzag"`},
	}
	for _, tc := range cases {
		got, err := InitialPlacement(tc.name, tc.experts, tc.capacity)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s(%d, %d): error %v, want %q", tc.name, tc.experts, tc.capacity, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s(%d, %d) = %v, %v; want %v", tc.name, tc.experts, tc.capacity, got, err, tc.want)
		}
	}
	// Every declared placement yields c distinct experts for every shape.
	for _, name := range Placements() {
		for e := 1; e <= 40; e++ {
			for c := 1; c <= e; c++ {
				got, _ := InitialPlacement(name, e, c)
				s := slices.Sorted(slices.Values(got))
				if len(slices.Compact(s)) != c || s[0] < 0 || s[len(s)-1] >= e {
					t.Fatalf("%s(%d, %d) = %v", name, e, c, got)
				}
			}
		}
	}
}
