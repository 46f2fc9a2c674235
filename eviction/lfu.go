package eviction

import "fmt"

// lfuPolicy is least-frequently-used eviction ("perfect" LFU: the
// frequency counts of the classic LFU of the paging literature, e.g.
// Aho, Denning & Ullman, "Principles of Optimal Page Replacement", JACM
// 1971, kept per expert id for the whole life of the cache).
//
// It differs from LRU in what it remembers: LRU orders by the last use
// alone, LFU by how many uses an expert has had, so an expert that a
// skewed router picks often stays resident through a burst of one-off
// misses that would flush it out of an LRU cache.
//
// Rules, all deterministic:
//   - Insert and Hit each count one use (a loaded miss is a use; so is
//     the initial placement's and a prefetch's Insert, one each) and make
//     the expert the most recently used.
//   - Counts survive eviction: an expert evicted and loaded again carries
//     on from its old count (experts are few, 64 a layer, so the counts
//     cost nothing, and on a stationary routing distribution the
//     long-run count is the better estimate of the routing probability).
//   - The first victim is the least frequently used resident expert; ties
//     go to the least recently used among the least frequent.
type lfuPolicy struct {
	count    []int64 // uses since construction, kept across eviction
	last     []int64 // logical time of the latest Insert or Hit
	in       []bool
	clock    int64
	resident int
}

func newLFU(experts int) Policy {
	return &lfuPolicy{count: make([]int64, experts), last: make([]int64, experts), in: make([]bool, experts)}
}

func (p *lfuPolicy) Name() string { return "lfu" }

func (p *lfuPolicy) touch(e int) {
	p.clock++
	p.count[e]++
	p.last[e] = p.clock
}

func (p *lfuPolicy) Insert(e int) {
	if p.in[e] {
		panic(errInsertedTwice(e))
	}
	p.in[e] = true
	p.resident++
	p.touch(e)
}

func (p *lfuPolicy) Hit(e int) {
	if !p.in[e] {
		panic(errHitAbsent(e))
	}
	p.touch(e)
}

func (p *lfuPolicy) Remove(e int) {
	if !p.in[e] {
		panic(errRemovedAbsent(e))
	}
	p.in[e] = false
	p.resident--
}

// before reports whether a goes before b in eviction order.
func (p *lfuPolicy) before(a, b int) bool {
	if p.count[a] != p.count[b] {
		return p.count[a] < p.count[b]
	}
	return p.last[a] < p.last[b]
}

// Victims selects the n first evictable experts of the order by repeated
// minimum search (n is a group's worth of misses, the residents at most
// a layer's experts): no allocation beyond the result, no state change.
func (p *lfuPolicy) Victims(n int, evictable func(int) bool) []int {
	var out []int
	taken := func(e int) bool {
		for _, v := range out {
			if v == e {
				return true
			}
		}
		return false
	}
	for len(out) < n {
		best := -1
		for e, in := range p.in {
			if !in || taken(e) || (best >= 0 && !p.before(e, best)) || !evictable(e) {
				continue
			}
			best = e
		}
		if best < 0 {
			break
		}
		out = append(out, best)
	}
	return out
}

func (p *lfuPolicy) Order() []int {
	return p.Victims(p.resident, func(int) bool { return true })
}

func errInsertedTwice(e int) string { return fmt.Sprintf("eviction: expert %d inserted twice", e) }
func errRemovedAbsent(e int) string {
	return fmt.Sprintf("eviction: expert %d removed but not present", e)
}
func errHitAbsent(e int) string { return fmt.Sprintf("eviction: expert %d hit but not present", e) }
