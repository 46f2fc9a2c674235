package eviction

import (
	"fmt"
	"sort"
)

// DefaultPlacement is the initial placement when Options.Placement is
// empty.
const DefaultPlacement = "canonical"

// placements maps declared names to the experts they place, in load order
// (the first is the first eviction candidate).
var placements = map[string]func(experts, capacity int) []int{
	// canonical: experts 0..c-1, the contract's initial placement.
	"canonical": func(_, c int) []int {
		out := make([]int, c)
		for i := range out {
			out[i] = i
		}
		return out
	},
	// strided: experts floor(i*E/c), spread evenly over the id range.
	// Distinct because E/c >= 1.
	"strided": func(e, c int) []int {
		out := make([]int, c)
		for i := range out {
			out[i] = i * e / c
		}
		return out
	},
}

// Placements returns the declared placement names, sorted.
func Placements() []string {
	names := make([]string, 0, len(placements))
	for n := range placements {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// InitialPlacement returns the experts a placement makes resident in a
// layer of the given number of experts at the given capacity, in load
// order.
func InitialPlacement(name string, experts, capacity int) ([]int, error) {
	if name == "" {
		name = DefaultPlacement
	}
	f, ok := placements[name]
	if !ok {
		return nil, fmt.Errorf("unknown placement %q (declared: %v)", name, Placements())
	}
	if capacity < 1 || capacity > experts {
		return nil, fmt.Errorf("placement %s: capacity %d outside 1..%d", name, capacity, experts)
	}
	return f(experts, capacity), nil
}
