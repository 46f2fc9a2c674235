//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/plan"
)

// A captured step's L2 prefetch branch. At batch 1 the latency-bound
// instructions (attention, route) leave HBM idle for several microseconds
// a layer, while the matvecs after them are bound by how fast their
// weights stream in. While such an instruction runs, a side branch of the
// graph brings the next dense weights into L2 (plan.L2Prefetches:
// o_proj and the router during attention, the next q|k|v or Qwen's shared
// expert during routing), so the matvecs that follow find them there.
//
// The branch forks from the compute stream inside the capture (an event
// the side stream waits on, so the prefetch follows the instruction before
// the fork) and joins it at the end of the captured graph. Its kernel
// (kernels/prefetch.cu) loads into no register and writes nothing, so no
// value a step computes can depend on it: TestStepperMatchesOps still
// compares every captured mode with op by op bit for bit.
//
// It is off by default (tuning.l2Prefetch turns it on) because on the H200
// it made decode slower, not faster: 935 against 987 tok/s on the
// OLMoE-1B-7B shape and 450 against 463 on Qwen1.5-MoE, at every budget and
// eviction priority tried (results/l2-prefetch-h200). BenchmarkDecodeModes
// keeps the variants that tell why (an empty branch, other grids).

// l2PrefetchBudget is the most one fork prefetches: half the H200's 50 MB
// L2, which still holds a whole OLMoE q|k|v (24 MiB).
const l2PrefetchBudget = 24 << 20

// l2PrefetchGrid is the prefetch kernel's grid: 32 blocks of 256 threads,
// ~24 prefetches a thread for 24 MiB. Few blocks: the matvec grids are
// sized to one wave of resident blocks, and a prefetch block that is
// still resident when one starts would push one of its blocks to a
// second wave.
const l2PrefetchGrid = 32

// l2Range is bytes at p to prefetch.
type l2Range struct {
	p     cu.DevicePtr
	bytes int64
}

// sideBranch is the stepper's prefetch branch.
type sideBranch struct {
	branch
	// at[i] are the ranges prefetched while body instruction i runs.
	at map[int][]l2Range
	// forked is set once the capture in progress has forked (it must
	// join before the capture ends).
	forked bool
}

// denseReads are instruction i's dense weights (body, then head: index
// len(body)+j is head instruction j), in the order it reads them.
func (s *stepper) denseReads(i int) []backend.Tensor {
	var in plan.Instr
	if i < len(s.prog.body) {
		in = s.prog.body[i]
	} else {
		in = s.prog.head[i-len(s.prog.body)]
	}
	w := s.spec.Weights
	switch in.Op {
	case plan.OpAttnIn:
		return []backend.Tensor{w.Layers[in.Layer].QKV}
	case plan.OpAttnOut:
		return []backend.Tensor{w.Layers[in.Layer].O}
	case plan.OpRoute:
		return []backend.Tensor{w.Layers[in.Layer].Router}
	case plan.OpSharedExpert:
		return []backend.Tensor{w.Layers[in.Layer].SharedGUM, w.Layers[in.Layer].SharedDown}
	case plan.OpHead:
		return []backend.Tensor{w.LMHead}
	}
	return nil
}

// setupPrefetch schedules the branch (captured modes; not with
// only with tuning.l2Prefetch) and makes its stream and events; owner
// thread.
func (s *stepper) setupPrefetch() error {
	instrs := append(append([]plan.Instr(nil), s.prog.body...), s.prog.head...)
	bytes := func(i int) []int64 {
		var out []int64
		for _, t := range s.denseReads(i) {
			if t != nil {
				out = append(out, int64(t.Len()*elemSize(t.DType())))
			}
		}
		return out
	}
	budget := int64(l2PrefetchBudget)
	if s.b.tune.l2Budget > 0 {
		budget = int64(s.b.tune.l2Budget)
	}
	sched := plan.L2Prefetches(instrs, bytes, budget)
	if len(sched) == 0 {
		return nil
	}
	br := &sideBranch{at: map[int][]l2Range{}}
	for _, pf := range sched {
		var ts []backend.Tensor
		for _, t := range s.denseReads(pf.Read.Instr) {
			if t != nil {
				ts = append(ts, t)
			}
		}
		br.at[pf.At] = append(br.at[pf.At], l2Range{p: ptr(ts[pf.Read.Weight]), bytes: pf.Bytes})
	}
	var err error
	if br.branch, err = newBranch("prefetch"); err != nil {
		return err
	}
	s.side = br
	return nil
}

// forkPrefetch issues body instruction i's prefetches on the side branch,
// when a graph is being captured (not op by op, not while the persistent
// kernel's program is recorded).
func (s *stepper) forkPrefetch(i int) error {
	br, b := s.side, s.b
	if br == nil || !b.capturing || b.rec != nil || len(br.at[i]) == 0 {
		return nil
	}
	if err := br.forkFrom(b.compute); err != nil {
		return fmt.Errorf("prefetch fork: %w", err)
	}
	br.forked = true
	keep, grid := 1, l2PrefetchGrid
	if b.tune.l2Normal {
		keep = 0
	}
	if b.tune.l2Grid > 0 {
		grid = b.tune.l2Grid
	}
	for _, r := range br.at[i] {
		n := uint64(r.bytes)
		if b.tune.l2Empty {
			n = 0
		}
		if err := launchKernel(b.k.prefetchL2, grid, block, 0, br.stream,
			[]uint64{argPtr(r.p), n, argInt(keep)}, nil); err != nil {
			return fmt.Errorf("prefetch %d bytes: %w", r.bytes, err)
		}
		b.prefetchLaunches++
	}
	return nil
}

// joinPrefetch joins the side branch into the compute stream before a
// capture ends, if it forked.
func (s *stepper) joinPrefetch() error {
	br := s.side
	if br == nil || !br.forked {
		return nil
	}
	br.forked = false
	if err := errors.Join(br.mark(), br.waitOn(s.b.compute)); err != nil {
		return fmt.Errorf("prefetch join: %w", err)
	}
	return nil
}

// closePrefetch frees the branch's stream and events.
func (s *stepper) closePrefetch() error {
	br := s.side
	if br == nil {
		return nil
	}
	s.side = nil
	return br.destroy()
}
