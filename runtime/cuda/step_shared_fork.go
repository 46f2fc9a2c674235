//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/plan"
)

// A captured step's shared-expert branch (Qwen). A layer's shared expert
// does not depend on its routing: its gate|up|mix matvec stages the same
// normalised x as the router. A graph-full step issues that matvec on a
// side branch forked just before the layer's route instruction, at most
// sharedForkBlocks blocks an SM (so that the router, route_step
// and the routed experts keep room on every SM), and joins it before the
// shared expert's down launch. The bandwidth-bound matvec (46 MB a layer at
// the Qwen1.5-MoE shape) then runs while route's latency chain (~12 µs a
// layer, no bytes: results/h200-s22) leaves HBM idle. The kernel, its
// arguments and so its bits are the same (a row's dot does not depend on
// the grid): TestStepperTunings compares it with op by op bit for bit. By
// default the branch also runs SiLU·up and the down matvec (into sd), and
// only add_gated_resid_step follows the join: 23 MB more off the compute
// stream, for one launch more than shared_down_f16. The H200 measured Qwen
// decode at 579-585 tok/s with the whole branch, 568-573 with gate|up|mix
// alone on it (tuning.sharedForkGUM) and 509-510 in line
// (tuning.noSharedFork), each twice in one process (results/h200-s23).
//
// Only graph-full: every other captured mode cuts its graphs between route
// and the routed experts, and a fork must join inside the capture that
// forked it. Never while the persistent kernel's program is recorded.
// sharedForkBlocks is how many blocks an SM the branch's matvecs take by
// default (tuning.sharedForkNR overrides it): 1 was 7-10% faster than 2 on
// the H200 (results/h200-s23).
const sharedForkBlocks = 1

type sharedBranch struct {
	branch
	// layer is the layer whose gate|up|mix is forked and not yet joined;
	// -1 when none.
	layer int
}

// setupSharedFork makes the branch's stream and events for a graph-full
// stepper of a model with a shared expert, unless tuning.noSharedFork keeps
// the shared expert in line; owner thread.
func (s *stepper) setupSharedFork() error {
	if s.b.tune.noSharedFork || !s.cfg.HasSharedExpert() || s.mode != device.StepGraphFull {
		return nil
	}
	br := &sharedBranch{layer: -1}
	var err error
	if br.branch, err = newBranch("shared-expert branch"); err != nil {
		return err
	}
	s.sfork = br
	return nil
}

// closeSharedFork frees the branch's stream and events.
func (s *stepper) closeSharedFork() error {
	br := s.sfork
	if br == nil {
		return nil
	}
	s.sfork = nil
	return br.destroy()
}

// sharedForkOf is the shared-expert instruction of route instruction i's
// layer when its gate|up|mix is issued on the branch: a graph-full capture
// in progress, not a recording, a shared expert in the layer, and nothing
// between route and it that writes x (compile makes the shared expert's
// gated add the layer's residual add, so the routed experts write moe).
func (s *stepper) sharedForkOf(i int) (int, bool) {
	if s.sfork == nil || !s.b.capturing || s.b.rec != nil || s.mode != device.StepGraphFull {
		return 0, false
	}
	l := s.prog.body[i].Layer
	for j := i + 1; j < len(s.prog.body) && s.prog.body[j].Layer == l; j++ {
		switch s.prog.body[j].Op {
		case plan.OpRoutedExperts:
			if s.prog.downAddsResidual(j, s.strategy) {
				return 0, false // it writes x, which the branch reads
			}
		case plan.OpSharedExpert:
			return j, true
		}
	}
	return 0, false
}

// forkShared issues shared-expert instruction j's gate|up|mix matvec on the
// branch: the branch waits for what the compute stream has issued so far
// (x is final after attn-out), runs the matvec as a plain launch, and
// records the join event after it.
func (s *stepper) forkShared(j int) error {
	b, br := s.b, s.sfork
	l := s.prog.body[j].Layer
	xn, err := s.stagedNorm(j)
	if err != nil {
		return err
	}
	if err := br.forkFrom(b.compute); err != nil {
		return fmt.Errorf("shared-expert fork: %w", err)
	}
	if b.tune.sharedForkEmpty {
		// The control: one empty kernel on the branch, so that the graph
		// has the fork and the join, and the shared expert in line.
		main, prev := b.compute, b.pdlPrev
		b.compute, b.pdlPrev = br.stream, false
		err := b.launch(b.k.empty, 1, 32, 0)
		b.compute, b.pdlPrev = main, prev
		if err == nil {
			err = br.mark()
		}
		if err != nil {
			return fmt.Errorf("shared-expert fork (empty): %w", err)
		}
		br.layer = l
		b.sharedForks++
		return nil
	}
	D, S := s.cfg.HiddenSize, s.cfg.SharedFFN
	nr := sharedForkBlocks
	if b.tune.sharedForkNR > 0 {
		nr = b.tune.sharedForkNR
	}
	lw, grid := &s.spec.Weights.Layers[l], nr*b.sms
	main, prev := b.compute, b.pdlPrev
	b.compute, b.pdlPrev = br.stream, false // the branch's first kernel: a plain launch
	err = b.matvecF16LaunchGrid(grid, s.sgum, ptr(lw.SharedGUM), ptr(s.spec.X), 0, 0, 2*S+1, D, xn)
	if err == nil && !b.tune.sharedForkGUM {
		// SiLU·up and the down matvec too (the three-launch path's first
		// two, into sd), so that only the gated add waits for the join.
		err = b.launch(b.k.siluMul, b.elementwiseGrid(S), block, 0, argPtr(s.sa), argPtr(s.sgum), argPtr(s.sgum+cu.DevicePtr(4*S)), argInt(S))
		if err == nil {
			err = b.matvecF16LaunchGrid(grid, s.sd, ptr(lw.SharedDown), s.sa, 0, 0, D, S, normSpec{})
		}
	}
	b.compute, b.pdlPrev = main, prev // the router follows attn-out on the compute stream, as before
	if err != nil {
		return fmt.Errorf("shared-expert fork: %w", err)
	}
	if s.timelineOn() {
		if err := s.timelineMark(s.tl.branch[l], br.stream); err != nil {
			return fmt.Errorf("shared-expert fork: %w", err)
		}
		s.tl.forked[l] = true
	}
	if err := br.mark(); err != nil {
		return fmt.Errorf("shared-expert fork: %w", err)
	}
	br.layer = l
	b.sharedForks++
	return nil
}

// joinShared makes the compute stream wait for layer l's forked
// gate|up|mix and reports whether there was one. The launch after the join
// is a plain one.
func (s *stepper) joinShared(l int) (bool, error) {
	br := s.sfork
	if br == nil || br.layer != l {
		return false, nil
	}
	br.layer = -1
	if err := br.waitOn(s.b.compute); err != nil {
		return false, fmt.Errorf("shared-expert join: %w", err)
	}
	s.b.pdlPrev = false
	return true, nil
}
