package cuda

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/plan"
)

// This file has no build tag: the plan's cut and its fusion predicates
// are pure functions of the plan, tested without a GPU.

// The captured step walks the step plan (runtime/plan, StepSpec.Plan): each
// instruction is issued by one method below, in plan order, and the graph
// modes differ only in where they cut the list and in what the route and
// routed-experts instructions exchange with the host:
//
//   - graph-full and graph-wait capture the body (embed .. the last
//     moe-residual) as one graph and the head (head, select) as another;
//   - graph-segmented cuts the body before every instruction that reads
//     routed rows (plan.Instr.RoutedRows), where the host serves the
//     layer's group through the cache before launching the next segment.
//
// Where two adjacent instructions have a kernel that does both, a named
// predicate says so (downAddsResidual, sharedAddsResidual) and the second
// issues nothing. The plan's xn buffer is never materialised: every
// instruction that reads it stages RMSNorm(x)·w itself, with the weights
// of the instruction that wrote xn (stagedNorm), which compile checks is
// exact (x unchanged in between).

// program is the decode plan cut the way the stepper captures it.
type program struct {
	body []plan.Instr // embed .. the last layer's moe-residual
	head []plan.Instr // head, select
	// cuts are the indices in body of the instructions that read routed
	// rows, in order: a graph-segmented step ends a segment before each.
	cuts []int
	// xnFrom[i] is, for an instruction of body that reads xn, the index
	// of the instruction that wrote it; -1 otherwise.
	xnFrom []int
	// lastRoute is the index in body of the last route instruction: in
	// graph-full steps it publishes every layer's routed ids to the host.
	lastRoute int
}

// compile checks that p is a decode plan this stepper can capture and cuts
// it.
func compile(p *plan.Plan, cfg model.Config) (*program, error) {
	if p == nil {
		return nil, fmt.Errorf("no step plan")
	}
	if p.T != 1 || !p.Head {
		return nil, fmt.Errorf("the plan runs T = %d tokens (head %v); a captured decode step runs T = 1 with the head", p.T, p.Head)
	}
	pr := &program{lastRoute: -1}
	for i, in := range p.Instrs {
		if in.Op == plan.OpHead {
			pr.body, pr.head = p.Instrs[:i], p.Instrs[i:]
			break
		}
	}
	if len(pr.head) != 2 || pr.head[0].Op != plan.OpHead || pr.head[1].Op != plan.OpSelect {
		return nil, fmt.Errorf("the plan does not end in head, select")
	}
	if len(pr.body) == 0 || pr.body[0].Op != plan.OpEmbed {
		return nil, fmt.Errorf("the plan does not start with embed")
	}
	pr.xnFrom = make([]int, len(pr.body))
	routeOf := -1 // the layer of the last route
	lastXN, lastX := -1, -1
	for i, in := range pr.body {
		pr.xnFrom[i] = -1
		switch in.Op {
		case plan.OpEmbed:
			if i != 0 {
				return nil, fmt.Errorf("instruction %d: embed inside the body", i)
			}
		case plan.OpAttnIn, plan.OpAttention, plan.OpAttnOut, plan.OpRoute, plan.OpRoutedExperts, plan.OpSharedExpert, plan.OpMoEResidual:
			if in.Layer < 0 || in.Layer >= cfg.NumLayers {
				return nil, fmt.Errorf("instruction %d (%s): layer %d outside 0..%d", i, in.Op, in.Layer, cfg.NumLayers-1)
			}
		default:
			return nil, fmt.Errorf("instruction %d: %s has no kernel in a captured step", i, in.Op)
		}
		if reads(in, plan.BufXN) {
			if lastXN < 0 || lastX > lastXN {
				return nil, fmt.Errorf("instruction %d (%s, layer %d) reads xn after x changed: the kernels stage the norm from x", i, in.Op, in.Layer)
			}
			pr.xnFrom[i] = lastXN
		}
		if in.Op == plan.OpRoute {
			routeOf, pr.lastRoute = in.Layer, i
		}
		if in.RoutedRows {
			if in.Op != plan.OpRoutedExperts || routeOf != in.Layer {
				return nil, fmt.Errorf("instruction %d (%s, layer %d) reads routed rows the last route (layer %d) did not choose", i, in.Op, in.Layer, routeOf)
			}
			pr.cuts = append(pr.cuts, i)
		}
		if in.Op == plan.OpSharedExpert && !pr.sharedAddsResidual(i) {
			return nil, fmt.Errorf("instruction %d: shared-expert of layer %d is not followed by its moe-residual (the gated add writes the residual)", i, in.Layer)
		}
		if writes(in, plan.BufXN) {
			lastXN = i
		}
		if writes(in, plan.BufX) {
			lastX = i
		}
	}
	if len(pr.cuts) != cfg.NumLayers {
		return nil, fmt.Errorf("the plan reads routed rows %d times for %d layers", len(pr.cuts), cfg.NumLayers)
	}
	return pr, nil
}

func reads(in plan.Instr, b plan.Buf) bool  { return hasBuf(in.Reads, b) }
func writes(in plan.Instr, b plan.Buf) bool { return hasBuf(in.Writes, b) }

func hasBuf(ops []plan.Operand, b plan.Buf) bool {
	for _, o := range ops {
		if o.Buf == b {
			return true
		}
	}
	return false
}

// follows reports whether body[i+1] is layer's op.
func (pr *program) follows(i int, op plan.Op, layer int) bool {
	return i+1 < len(pr.body) && pr.body[i+1].Op == op && pr.body[i+1].Layer == layer
}

// downAddsResidual: routed-experts at i is followed by its layer's
// moe-residual, and the strategy runs one down launch for the group
// (executor.PerGroup): the down kernel adds x in its epilogue and writes x,
// so moe-residual issues nothing. scalar-v1 accumulates expert by expert
// into moe and adds the residual after.
func (pr *program) downAddsResidual(i int, st executor.Strategy) bool {
	return pr.body[i].Op == plan.OpRoutedExperts && st == executor.PerGroup && pr.follows(i, plan.OpMoEResidual, pr.body[i].Layer)
}

// sharedAddsResidual: shared-expert at i is followed by its layer's
// moe-residual: the gated add writes x = x + moe + sigmoid(mix)·shared, so
// moe-residual issues nothing.
func (pr *program) sharedAddsResidual(i int) bool {
	return pr.body[i].Op == plan.OpSharedExpert && pr.follows(i, plan.OpMoEResidual, pr.body[i].Layer)
}

// residualFused reports whether moe-residual at i was issued by the
// instruction before it.
func (pr *program) residualFused(i int, st executor.Strategy) bool {
	return i > 0 && (pr.downAddsResidual(i-1, st) || pr.sharedAddsResidual(i-1))
}
