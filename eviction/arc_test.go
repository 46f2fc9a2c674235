package eviction

import (
	"slices"
	"testing"
)

func (p *arcPolicy) checkInvariants(t *testing.T) {
	t.Helper()
	if p.p < 0 || p.p > p.c {
		t.Fatalf("arc: p = %d outside 0..%d", p.p, p.c)
	}
	if p.t1.n+p.t2.n > p.c || p.t1.n+p.b1.n > p.c || p.t1.n+p.t2.n+p.b1.n+p.b2.n > 2*p.c {
		t.Fatalf("arc: |T1| %d |T2| %d |B1| %d |B2| %d with c = %d", p.t1.n, p.t2.n, p.b1.n, p.b2.n, p.c)
	}
	for _, l := range []*countedList{&p.t1, &p.t2, &p.b1, &p.b2} {
		if len(l.items()) != l.n {
			t.Fatalf("arc: list of %d items counts %d", len(l.items()), l.n)
		}
	}
}

func TestARC(t *testing.T) {
	checkOrderCases(t, "arc", []orderCase{
		// p = 0: T1 (seen once) goes before T2 (seen twice).
		{"T1 before T2", seq(ins(0, 1, 2), hits(1)), []int{0, 2, 1}, []int{0}, 1, []int{2}},
		{"all in T2: LRU order", seq(ins(0, 1, 2), hits(0, 1, 2)), []int{0, 1, 2}, nil, 2, []int{0, 1}},
		{"fall back to T2 when T1 is unevictable", seq(ins(0, 1, 2), hits(2)), []int{0, 1, 2}, []int{0, 1}, 3, []int{2}},
		// A miss on a ghost of B1 raises p to 1: T1 (one expert) is no
		// longer over target, T2 goes first.
		{"B1 ghost hit raises p", seq(ins(0, 1, 2), hits(2), rm(0), ins(3), rm(1), ins(0)), []int{2, 0, 3}, nil, 1, []int{2}},
		// Then a miss on a ghost of B2 lowers p back to 0.
		{"B2 ghost hit lowers p", seq(ins(0, 1, 2), hits(2), rm(0), ins(3), rm(1), ins(0), rm(2), ins(2)), []int{3, 0, 2}, []int{3}, 1, []int{0}},
		{"nothing evictable", ins(3, 1), []int{3, 1}, []int{1, 3}, 2, nil},
	})

	// Ghost lists and p, hand-computed (c = 3 after the first three
	// inserts).
	cases := []struct {
		name         string
		ops          []policyOp
		t1, t2       []int
		b1, b2       []int
		p, c         int
		unevictable  []int
		wantVictims2 []int
	}{
		{"remove keeps a ghost", seq(ins(0, 1, 2), hits(2), rm(0, 2)), []int{1}, nil, []int{0}, []int{2}, 0, 3, nil, []int{1}},
		{"B1 ghost hit", seq(ins(0, 1, 2), hits(2), rm(0), ins(3), rm(1), ins(0)), []int{3}, []int{2, 0}, []int{1}, nil, 1, 3, nil, []int{2, 0}},
		{"B2 ghost hit", seq(ins(0, 1, 2), hits(2), rm(0), ins(3), rm(1), ins(0), rm(2), ins(2)), []int{3}, []int{0, 2}, []int{1}, nil, 0, 3, nil, []int{3, 0}},
		// |T1|+|B1| <= c: with T1 full of new experts the ghost of 0
		// (the oldest) is dropped, so 0 comes back as new, into T1.
		{"B1 trimmed to c - |T1|", seq(ins(0, 1), rm(0), ins(2), rm(1), ins(0)), []int{2, 0}, nil, nil, nil, 0, 2, nil, []int{2, 0}},
		// |T1|+|T2|+|B1|+|B2| <= 2c: the oldest B2 ghost goes first.
		{"directory trimmed to 2c", seq(ins(0, 1), hits(0, 1), rm(0), ins(2), hits(2), rm(1), ins(3), hits(3), rm(2), ins(4)),
			[]int{4}, []int{3}, nil, []int{1, 2}, 0, 2, []int{4}, []int{3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newARC(8).(*arcPolicy)
			applyOps(t, p, tc.ops)
			p.checkInvariants(t)
			for _, l := range []struct {
				name      string
				got, want []int
			}{{"T1", p.t1.items(), tc.t1}, {"T2", p.t2.items(), tc.t2}, {"B1", p.b1.items(), tc.b1}, {"B2", p.b2.items(), tc.b2}} {
				if !slices.Equal(l.got, l.want) {
					t.Errorf("%s = %v, want %v", l.name, l.got, l.want)
				}
			}
			if p.p != tc.p || p.c != tc.c {
				t.Errorf("p, c = %d, %d; want %d, %d", p.p, p.c, tc.p, tc.c)
			}
			if v := p.Victims(2, func(e int) bool { return !slices.Contains(tc.unevictable, e) }); !slices.Equal(v, tc.wantVictims2) {
				t.Errorf("Victims(2) = %v, want %v", v, tc.wantVictims2)
			}
		})
	}
}
