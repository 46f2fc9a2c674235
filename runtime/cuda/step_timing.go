//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"time"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// The stepper times a request's prefill on the device (device.PrefillTimer):
// from an admission event, recorded on a stream that runs nothing else and
// so completes as soon as it is recorded, to an event captured between the
// prompt's last head and its selection kernel (headsTimed). Both are
// device timestamps of one context, so their difference is the prefill as
// the device saw it, queueing behind any earlier work included.

var _ device.PrefillTimer = (*stepper)(nil)

// setupTiming creates the timing stream and events; owner thread.
func (s *stepper) setupTiming() error {
	var err error
	if s.tstream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("prefill timing stream: %w", err)
	}
	if s.evAdm, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return fmt.Errorf("prefill timing event: %w", err)
	}
	if s.evHead, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return fmt.Errorf("prefill timing event: %w", err)
	}
	s.timing = true
	return nil
}

// closeTiming frees what setupTiming made; owner thread.
func (s *stepper) closeTiming() error {
	if !s.timing {
		return nil
	}
	s.timing, s.marked = false, false
	return errors.Join(cu.DestroyEvent(&s.evAdm), cu.DestroyEvent(&s.evHead), s.tstream.Destroy())
}

// headGraph is the head graph a step of a single-slot mode launches: the
// timed one for the prompt's last position (set: the step set the state).
func (s *stepper) headGraph(set bool, mask int) *graph {
	if set && s.timing {
		return s.headsTimed[0][mask]
	}
	return s.heads[0][mask]
}

// TimesPrefill implements device.PrefillTimer: every captured mode but
// persistent (one launch runs body, head and selection).
func (s *stepper) TimesPrefill() bool { return s.timing }

// MarkAdmission implements device.PrefillTimer.
func (s *stepper) MarkAdmission() error {
	if !s.timing {
		return fmt.Errorf("cuda: stepper: %s steps do not time prefill", s.mode)
	}
	return s.b.o.do(func() error {
		if err := s.evAdm.Record(s.tstream); err != nil {
			return fmt.Errorf("cuda: stepper: record the admission event: %w", err)
		}
		s.marked = true
		return nil
	})
}

// PrefillDone implements device.PrefillTimer: the time from the admission
// event to the prompt's last logits (the timed head's event). Call it after
// the Step that ran the prompt's last position.
func (s *stepper) PrefillDone() (time.Duration, error) {
	var d time.Duration
	err := s.b.o.do(func() error {
		if !s.marked {
			return fmt.Errorf("cuda: stepper: prefill end asked without an admission mark")
		}
		s.marked = false
		if err := errors.Join(s.evAdm.Synchronize(), s.evHead.Synchronize()); err != nil {
			return fmt.Errorf("cuda: stepper: wait for the prefill end event: %w", err)
		}
		ms, err := s.evAdm.Elapsed(s.evHead)
		if err != nil {
			return fmt.Errorf("cuda: stepper: prefill events: %w", err)
		}
		if ms <= 0 {
			return fmt.Errorf("cuda: stepper: the prefill ended %.6f ms after admission: the end event did not follow the mark", ms)
		}
		d = time.Duration(ms * float64(time.Millisecond))
		return nil
	})
	return d, err
}
