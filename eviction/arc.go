package eviction

// arcPolicy is Adaptive Replacement Cache: Megiddo & Modha, "ARC: A
// Self-Tuning, Low Overhead Replacement Cache", FAST 2003 (Fig. 4 of the
// paper).
//
// It differs from LRU by keeping two resident lists and two ghost lists:
// T1 holds experts used once since they were loaded, T2 experts used at
// least twice (recency and frequency); B1 and B2 remember the ids last
// evicted from T1 and T2 (no rows, ids only). A miss on an id in B1 means
// T1 was too short, and raises the target size p of T1; a miss on an id
// in B2 lowers it. Victims come from the LRU end of T1 while |T1| > p,
// else from the LRU end of T2. An expert that a skewed router keeps
// reusing lives in T2 and is not flushed by a scan of one-off experts.
//
// Mapping onto the cache's calls (Insert for a loaded miss, Hit for a
// hit, Remove for an eviction):
//   - Insert(x) of an id in B1 (B2) is the paper's case II (III): p +=
//     max(1, |B2|/|B1|) (p -= max(1, |B1|/|B2|)), clamped to 0..c, with
//     integer (floor) division so replays are exact; x goes to the MRU end
//     of T2. Any other Insert is case IV: x goes to the MRU end of T1 and
//     the directory is trimmed to |T1|+|B1| <= c and |T1|+|T2|+|B1|+|B2|
//     <= 2c by dropping the LRU ghosts of B1 (then B2), which is the
//     paper's deletion in case IV done after, instead of before, the
//     replacement (the same ids are dropped). The initial placement's and
//     a prefetch's Inserts are ordinary Inserts.
//   - Hit(x) is case I: x moves to the MRU end of T2.
//   - Remove(x) is the replacement's move: x goes from T1 to the MRU end
//     of B1, or from T2 to the MRU end of B2.
//   - Victims(n) plays REPLACE n times on a copy of |T1| (no state
//     change), skipping unevictable experts and falling back to the other
//     list when the preferred one has no evictable expert left. Two
//     deviations follow from the cache choosing victims before it inserts:
//     the paper's tie rule (x in B2 and |T1| = p evicts from T1) is not
//     applied, the missed id being unknown to Victims, and p adapts on the
//     Insert after the victims were chosen, not before.
//
// Capacity: policies are built from the expert count alone
// (NewPolicy(name, experts)); ARC takes c as the most experts ever
// resident at once (inserted minus removed, high-water mark). The cache
// fills every layer to its capacity with the initial placement before the
// first lease, so c is the cache capacity from the first eviction on.
type arcPolicy struct {
	t1, t2, b1, b2 countedList
	p              int // target size of T1, 0..c
	c              int // capacity: high-water mark of |T1|+|T2|
}

func newARC(experts int) Policy {
	return &arcPolicy{t1: newCountedList(experts), t2: newCountedList(experts), b1: newCountedList(experts), b2: newCountedList(experts)}
}

func (p *arcPolicy) Name() string { return "arc" }

func (p *arcPolicy) resident() int { return p.t1.n + p.t2.n }

func (p *arcPolicy) Insert(x int) {
	if p.t1.in[x] || p.t2.in[x] {
		panic(errInsertedTwice(x))
	}
	p.c = max(p.c, p.resident()+1)
	switch {
	case p.b1.in[x]:
		p.p = min(p.c, p.p+max(1, p.b2.n/p.b1.n))
		p.b1.remove(x)
		p.t2.pushBack(x)
	case p.b2.in[x]:
		p.p = max(0, p.p-max(1, p.b1.n/p.b2.n))
		p.b2.remove(x)
		p.t2.pushBack(x)
	default:
		p.t1.pushBack(x)
	}
	for p.t1.n+p.b1.n > p.c && p.b1.n > 0 {
		p.b1.remove(p.b1.head)
	}
	for p.t1.n+p.t2.n+p.b1.n+p.b2.n > 2*p.c {
		if p.b2.n > 0 {
			p.b2.remove(p.b2.head)
		} else {
			p.b1.remove(p.b1.head)
		}
	}
}

func (p *arcPolicy) Hit(x int) {
	switch {
	case p.t1.in[x]:
		p.t1.remove(x)
	case p.t2.in[x]:
		p.t2.remove(x)
	default:
		panic(errHitAbsent(x))
	}
	p.t2.pushBack(x)
}

func (p *arcPolicy) Remove(x int) {
	switch {
	case p.t1.in[x]:
		p.t1.remove(x)
		p.b1.pushBack(x)
	case p.t2.in[x]:
		p.t2.remove(x)
		p.b2.pushBack(x)
	default:
		panic(errRemovedAbsent(x))
	}
}

func (p *arcPolicy) Victims(n int, evictable func(int) bool) []int {
	var out []int
	t1 := p.t1.n
	i1, i2 := p.t1.head, p.t2.head
	for len(out) < n {
		for i1 >= 0 && !evictable(i1) {
			i1 = p.t1.next[i1]
		}
		for i2 >= 0 && !evictable(i2) {
			i2 = p.t2.next[i2]
		}
		if i1 < 0 && i2 < 0 {
			break
		}
		fromT1 := t1 >= 1 && t1 > p.p
		if (fromT1 && i1 >= 0) || i2 < 0 {
			out = append(out, i1)
			i1 = p.t1.next[i1]
			t1--
		} else {
			out = append(out, i2)
			i2 = p.t2.next[i2]
		}
	}
	return out
}

func (p *arcPolicy) Order() []int {
	return p.Victims(p.resident(), func(int) bool { return true })
}

// countedList is an expertList that knows its length.
type countedList struct {
	expertList
	n int
}

func newCountedList(experts int) countedList { return countedList{expertList: newExpertList(experts)} }

func (l *countedList) pushBack(e int) { l.expertList.pushBack(e); l.n++ }
func (l *countedList) remove(e int)   { l.expertList.remove(e); l.n-- }
