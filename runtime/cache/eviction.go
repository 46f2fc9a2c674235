package cache

import "github.com/horizon-runmap/horizon/eviction"

// The eviction policies and initial placements are package eviction's
// (pure functions of expert ids, shared with the verifier's replay of
// recorded routing); these names keep the cache's vocabulary.
type Policy = eviction.Policy

const (
	DefaultPolicy    = eviction.DefaultPolicy
	DefaultPlacement = eviction.DefaultPlacement
)

// Policies returns the declared policy names, sorted.
func Policies() []string { return eviction.Policies() }

// Placements returns the declared placement names, sorted.
func Placements() []string { return eviction.Placements() }

// NewPolicy returns a fresh policy for a layer of the given number of
// experts.
func NewPolicy(name string, experts int) (Policy, error) { return eviction.NewPolicy(name, experts) }

// InitialPlacement returns the experts a placement makes resident in a
// layer at the given capacity, in load order.
func InitialPlacement(name string, experts, capacity int) ([]int, error) {
	return eviction.InitialPlacement(name, experts, capacity)
}
