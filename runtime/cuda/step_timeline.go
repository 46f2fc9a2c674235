//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/plan"
)

// An instruction timeline of a graph-full step (tuning.timeline): the body
// graph records a device event before its first instruction, after each
// instruction on the compute stream, and after the last kernel of each
// layer's shared-expert branch, so that after a step every instruction's
// end, and each branch's, is known on the device's clock. There is no
// Nsight Systems on the GPU machine; this is the timeline it would give, at
// the cost of one event node between instructions. The kernel after an
// event node is a plain launch, so with programmatic dependent launch on
// the timeline changes what it measures: read it with tuning.noPDL, whose
// step it leaves as it is but for the nodes. The kernels and their
// arguments are unchanged, so are the bits.
type instrTimeline struct {
	start  cu.Event
	ends   []cu.Event // per body instruction
	branch []cu.Event // per layer: the end of its shared-expert branch
	forked []bool     // per layer: the branch was recorded in the body graph
	body   []plan.Instr
}

// setupTimeline creates a graph-full stepper's timeline events when
// tuning.timeline asks for them (other modes record none); owner thread.
func (s *stepper) setupTimeline() error {
	if !s.b.tune.timeline || s.mode != device.StepGraphFull {
		return nil
	}
	tl := &instrTimeline{body: s.prog.body, ends: make([]cu.Event, len(s.prog.body)),
		branch: make([]cu.Event, s.L), forked: make([]bool, s.L)}
	events := append([]*cu.Event{&tl.start}, ptrsOf(tl.ends)...)
	events = append(events, ptrsOf(tl.branch)...)
	for _, ev := range events {
		var err error
		if *ev, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return fmt.Errorf("cuda: timeline event: %w", err)
		}
	}
	s.tl = tl
	s.b.timelines = append(s.b.timelines, tl)
	return nil
}

func ptrsOf(evs []cu.Event) []*cu.Event {
	out := make([]*cu.Event, len(evs))
	for i := range evs {
		out[i] = &evs[i]
	}
	return out
}

// closeTimeline frees the timeline's events; owner thread.
func (s *stepper) closeTimeline() error {
	tl := s.tl
	if tl == nil {
		return nil
	}
	s.tl = nil
	for i, t := range s.b.timelines {
		if t == tl {
			s.b.timelines = append(s.b.timelines[:i], s.b.timelines[i+1:]...)
			break
		}
	}
	errs := []error{cu.DestroyEvent(&tl.start)}
	for i := range tl.ends {
		errs = append(errs, cu.DestroyEvent(&tl.ends[i]))
	}
	for i := range tl.branch {
		errs = append(errs, cu.DestroyEvent(&tl.branch[i]))
	}
	return errors.Join(errs...)
}

// timelineMark records ev as an event node of the graph being captured on
// stream st (the compute stream: its next kernel is a plain launch).
func (s *stepper) timelineMark(ev cu.Event, st cu.Stream) error {
	if err := recordEventExternal(ev, st); err != nil {
		return fmt.Errorf("timeline event: %w", err)
	}
	if st == s.b.compute {
		s.b.pdlPrev = false
	}
	return nil
}

// timelineOn reports whether the capture in progress records the timeline:
// the whole body of a graph-full step.
func (s *stepper) timelineOn() bool {
	return s.tl != nil && s.b.capturing && s.b.rec == nil
}

// instrSpan is one instruction of a timeline read back: its end and the
// time since the instruction before it ended (since the step's start for
// the first), in microseconds.
type instrSpan struct {
	op         plan.Op
	layer      int
	end, took  float64
	branchEnd  float64 // shared-expert instructions whose layer forked: the branch's end
	branchFork bool
}

// read returns the last launched body's spans; owner thread, after the
// step completed.
func (tl *instrTimeline) read() ([]instrSpan, error) {
	out := make([]instrSpan, len(tl.ends))
	prev := 0.0
	for i, ev := range tl.ends {
		ms, err := tl.start.Elapsed(ev)
		if err != nil {
			return nil, fmt.Errorf("timeline: instruction %d (%s): %w", i, tl.body[i].Op, err)
		}
		in := tl.body[i]
		out[i] = instrSpan{op: in.Op, layer: in.Layer, end: 1e3 * ms, took: 1e3*ms - prev}
		prev = 1e3 * ms
		if in.Op == plan.OpSharedExpert && in.Layer >= 0 && in.Layer < len(tl.forked) && tl.forked[in.Layer] {
			bms, err := tl.start.Elapsed(tl.branch[in.Layer])
			if err != nil {
				return nil, fmt.Errorf("timeline: layer %d's branch: %w", in.Layer, err)
			}
			out[i].branchEnd, out[i].branchFork = 1e3*bms, true
		}
	}
	return out, nil
}
