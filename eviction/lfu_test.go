package eviction

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// policyOp is one call on a Policy in a table-driven sequence.
type policyOp struct {
	kind string // insert, hit, remove
	e    int
}

func applyOps(t *testing.T, p Policy, ops []policyOp) {
	t.Helper()
	for _, o := range ops {
		switch o.kind {
		case "insert":
			p.Insert(o.e)
		case "hit":
			p.Hit(o.e)
		case "remove":
			p.Remove(o.e)
		default:
			t.Fatalf("op %q", o.kind)
		}
	}
}

func ins(es ...int) []policyOp {
	var out []policyOp
	for _, e := range es {
		out = append(out, policyOp{"insert", e})
	}
	return out
}

func hits(es ...int) []policyOp {
	var out []policyOp
	for _, e := range es {
		out = append(out, policyOp{"hit", e})
	}
	return out
}

func rm(es ...int) []policyOp {
	var out []policyOp
	for _, e := range es {
		out = append(out, policyOp{"remove", e})
	}
	return out
}

func seq(parts ...[]policyOp) []policyOp { return slices.Concat(parts...) }

// orderCase is a sequence of calls and the order and victims expected
// after it.
type orderCase struct {
	name        string
	ops         []policyOp
	wantOrder   []int
	unevictable []int
	victims     int
	wantVictims []int
}

func checkOrderCases(t *testing.T, policy string, cases []orderCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicy(policy, 8)
			if err != nil {
				t.Fatal(err)
			}
			applyOps(t, p, tc.ops)
			if got := p.Order(); !slices.Equal(got, tc.wantOrder) {
				t.Errorf("order %v, want %v", got, tc.wantOrder)
			}
			v := p.Victims(tc.victims, func(e int) bool { return !slices.Contains(tc.unevictable, e) })
			if !slices.Equal(v, tc.wantVictims) {
				t.Errorf("victims(%d, not %v) = %v, want %v", tc.victims, tc.unevictable, v, tc.wantVictims)
			}
			if got := p.Order(); !slices.Equal(got, tc.wantOrder) {
				t.Errorf("Victims changed the order to %v", got)
			}
		})
	}
}

func TestLFU(t *testing.T) {
	checkOrderCases(t, "lfu", []orderCase{
		{"equal counts: least recent first", ins(0, 1, 2), []int{0, 1, 2}, nil, 2, []int{0, 1}},
		{"frequency beats recency", seq(ins(0, 1, 2), hits(0, 1, 0)), []int{2, 1, 0}, []int{2}, 2, []int{1, 0}},
		{"one hit lifts an expert over the others", seq(ins(0, 1, 2), hits(0)), []int{1, 2, 0}, nil, 1, []int{1}},
		{"tie on count: least recently used", seq(ins(0, 1), hits(1, 0)), []int{1, 0}, nil, 1, []int{1}},
		// 0 reaches 3 uses, is evicted, and comes back with 4: behind 1
		// and 2 (one use each) though it was loaded last.
		{"counts survive eviction", seq(ins(0), hits(0, 0), ins(1), rm(0), ins(2, 0)), []int{1, 2, 0}, nil, 3, []int{1, 2, 0}},
		{"nothing evictable", seq(ins(3, 1)), []int{3, 1}, []int{1, 3}, 2, nil},
		{"empty", nil, nil, nil, 1, nil},
	})
}

// TestPolicyProperties drives every declared policy with random
// sequences of calls (as the cache makes them: Insert of an absent expert,
// Hit and Remove of a present one) and checks after each that Victims
// leaves Order unchanged, returns only present, evictable, distinct
// experts, min(n, evictable) of them, and that Order lists exactly the
// present experts.
func TestPolicyProperties(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(17, uint64(len(name))))
			for trial := range 200 {
				experts := 1 + r.IntN(12)
				capacity := 1 + r.IntN(experts)
				p, err := NewPolicy(name, experts)
				if err != nil {
					t.Fatal(err)
				}
				present := make([]bool, experts)
				n := 0
				for step := range 300 {
					e := r.IntN(experts)
					switch {
					case !present[e] && n < capacity:
						p.Insert(e)
						present[e], n = true, n+1
					case present[e] && r.IntN(3) == 0:
						p.Remove(e)
						present[e], n = false, n-1
					case present[e]:
						p.Hit(e)
					}
					order := p.Order()
					var want []int
					for x, ok := range present {
						if ok {
							want = append(want, x)
						}
					}
					if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, want) {
						t.Fatalf("trial %d step %d: order %v, present %v", trial, step, order, want)
					}
					mask := r.Uint32()
					evictable := func(x int) bool { return mask&(1<<x) != 0 }
					k := r.IntN(experts + 2)
					v := p.Victims(k, evictable)
					if got := p.Order(); !slices.Equal(got, order) {
						t.Fatalf("trial %d step %d: Victims changed order %v to %v", trial, step, order, got)
					}
					nEvictable := 0
					for _, x := range want {
						if evictable(x) {
							nEvictable++
						}
					}
					if len(v) != min(k, nEvictable) {
						t.Fatalf("trial %d step %d: Victims(%d) = %v, %d evictable", trial, step, k, v, nEvictable)
					}
					for i, x := range v {
						if x < 0 || x >= experts || !present[x] || !evictable(x) || slices.Contains(v[:i], x) {
							t.Fatalf("trial %d step %d: Victims(%d) = %v: %d absent, unevictable or repeated", trial, step, k, v, x)
						}
					}
					if all := p.Victims(len(want), func(int) bool { return true }); !slices.Equal(all, order) {
						t.Fatalf("trial %d step %d: Victims(all) = %v, order %v", trial, step, all, order)
					}
					if a, ok := p.(*arcPolicy); ok {
						a.checkInvariants(t)
					}
				}
			}
		})
	}
}
