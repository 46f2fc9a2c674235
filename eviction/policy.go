package eviction

import (
	"fmt"
	"sort"
)

// Policy orders one layer's published experts for eviction. The cache
// calls it under the layer's lock; it never sees rows, leases or devices,
// only expert ids.
//
// Victims must not change the policy's state: a miss transaction chooses
// victims, copies, and only on publication commits with Remove and
// Insert, so a failed transaction leaves the order exactly as it was.
type Policy interface {
	// Name is the declared name ("lru", "fifo").
	Name() string
	// Insert adds a newly published expert as the most recently used.
	Insert(expert int)
	// Hit records a use of a published expert.
	Hit(expert int)
	// Remove drops an evicted expert.
	Remove(expert int)
	// Victims returns up to n published experts for which evictable is
	// true, in eviction order, without changing state.
	Victims(n int, evictable func(expert int) bool) []int
	// Order lists the published experts from first to last victim
	// (diagnostics and tests).
	Order() []int
}

// DefaultPolicy is the eviction policy when Options.Policy is empty.
const DefaultPolicy = "lru"

// policies maps declared names to constructors; Policies lists them.
var policies = map[string]func(experts int) Policy{
	"lru":  func(n int) Policy { return &listPolicy{name: "lru", touchOnHit: true, list: newExpertList(n)} },
	"fifo": func(n int) Policy { return &listPolicy{name: "fifo", touchOnHit: false, list: newExpertList(n)} },
	"lfu":  newLFU, // lfu.go
	"arc":  newARC, // arc.go
}

// Policies returns the declared policy names, sorted.
func Policies() []string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewPolicy returns a fresh policy for a layer of the given number of
// experts.
func NewPolicy(name string, experts int) (Policy, error) {
	if name == "" {
		name = DefaultPolicy
	}
	mk, ok := policies[name]
	if !ok {
		return nil, fmt.Errorf("unknown eviction policy %q (declared: %v)", name, Policies())
	}
	return mk(experts), nil
}

// listPolicy keeps published experts in a list from first victim (head) to
// last (tail). LRU moves an expert to the tail on every hit; FIFO leaves
// the order as loaded.
type listPolicy struct {
	name       string
	touchOnHit bool
	list       expertList
}

func (p *listPolicy) Name() string { return p.name }
func (p *listPolicy) Insert(e int) { p.list.pushBack(e) }
func (p *listPolicy) Remove(e int) { p.list.remove(e) }
func (p *listPolicy) Order() []int { return p.list.items() }
func (p *listPolicy) Hit(e int) {
	if p.touchOnHit {
		p.list.remove(e)
		p.list.pushBack(e)
	}
}

func (p *listPolicy) Victims(n int, evictable func(int) bool) []int {
	var out []int
	for e := p.list.head; e >= 0 && len(out) < n; e = p.list.next[e] {
		if evictable(e) {
			out = append(out, e)
		}
	}
	return out
}

// expertList is an intrusive doubly linked list over expert ids 0..n-1:
// O(1) insert, remove and move-to-back without allocation.
type expertList struct {
	prev, next []int
	in         []bool
	head, tail int
}

func newExpertList(n int) expertList {
	l := expertList{prev: make([]int, n), next: make([]int, n), in: make([]bool, n), head: -1, tail: -1}
	return l
}

func (l *expertList) pushBack(e int) {
	if l.in[e] {
		panic(fmt.Sprintf("eviction: expert %d inserted twice", e))
	}
	l.in[e] = true
	l.prev[e], l.next[e] = l.tail, -1
	if l.tail >= 0 {
		l.next[l.tail] = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *expertList) remove(e int) {
	if !l.in[e] {
		panic(fmt.Sprintf("eviction: expert %d removed but not present", e))
	}
	l.in[e] = false
	if l.prev[e] >= 0 {
		l.next[l.prev[e]] = l.next[e]
	} else {
		l.head = l.next[e]
	}
	if l.next[e] >= 0 {
		l.prev[l.next[e]] = l.prev[e]
	} else {
		l.tail = l.prev[e]
	}
}

func (l *expertList) items() []int {
	var out []int
	for e := l.head; e >= 0; e = l.next[e] {
		out = append(out, e)
	}
	return out
}
