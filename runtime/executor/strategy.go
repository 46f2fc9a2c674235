package executor

import "fmt"

// Strategy is an executor's launch structure: how the work of one routed
// group is cut into backend steps. It is what tells the executors apart
// (their numerics are identical), and it is how a device that runs a
// decode step without calling Forward (the CUDA stepper's captured graphs)
// learns what the executor asks of it: the stepper asks the executor object
// for its Strategy instead of re-dispatching on the executor's name.
type Strategy int

const (
	// PerExpert computes the experts of the group one after another: each
	// expert's gate, up, activation and down projection, accumulated into
	// the output in routing order before the next expert starts
	// (scalar-v1).
	PerExpert Strategy = iota + 1
	// PerGroup computes every expert's gate/up and activation in one step
	// addressing the group through its row table, then every down
	// projection and the weighted combine in a second step (grouped-v1).
	PerGroup
)

// Strategies lists the strategies, in the order of Names.
func Strategies() []Strategy { return []Strategy{PerExpert, PerGroup} }

// String names the strategy for messages.
func (s Strategy) String() string {
	switch s {
	case PerExpert:
		return "per-expert"
	case PerGroup:
		return "per-group"
	}
	return fmt.Sprintf("strategy(%d)", int(s))
}

// Valid reports whether s is one of Strategies.
func (s Strategy) Valid() bool { return s == PerExpert || s == PerGroup }
