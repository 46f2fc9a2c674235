package engine

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// lookaheadStepper is a device.Stepper that runs each step op by op on the
// engine and keeps a graph-full stepper's lookahead books: a head step
// under lookahead "launches" the next decode step, which the next Step
// call takes when it is that step and discards otherwise.
type lookaheadStepper struct {
	e          *Engine
	on         bool
	dev        int // the token the device holds (the last head's choice)
	ahead      int // the position of the step launched ahead; -1: none
	launched   int
	used       int
	discarded  int
	lastCallOn bool // lookahead at the last head step
}

func (s *lookaheadStepper) SetLookahead(on bool) { s.on = on }
func (s *lookaheadStepper) Mode() string         { return StepGraphFull }
func (s *lookaheadStepper) Close() error         { return nil }

func (s *lookaheadStepper) Step(tok, pos int, set, head, suppress bool) (int, error) {
	if s.ahead >= 0 {
		if !set && head && s.ahead == pos {
			s.used++
		} else {
			s.discarded++
		}
		s.ahead = -1
	}
	if !set {
		tok = s.dev
	}
	var masked []int
	if suppress {
		masked = s.e.cfg.EOSTokenIDs
	}
	if !head {
		_, err := s.e.run(s.e.body, tok, pos, masked)
		return 0, err
	}
	next, err := s.e.run(s.e.full, tok, pos, masked)
	if err != nil {
		return 0, err
	}
	s.dev, s.lastCallOn = next, s.on
	if s.on && pos+1 < s.e.maxSeq {
		s.ahead = pos + 1
		s.launched++
	}
	return next, nil
}

// TestLookaheadStopsAtTheLastToken: a request's decode steps are launched
// ahead where nothing reads their logits or forces their ids, and the step
// that selects the last token launches none, so no step is left running
// into the next request's prefill (whose TTFT it would lengthen). The
// tokens are the op-by-op engine's, on both prefill paths.
func TestLookaheadStopsAtTheLastToken(t *testing.T) {
	prompt := promptIDs("Lookahead stops at the last token.")
	for _, prefill := range []string{PrefillToken, PrefillBatched} {
		ref := loadEngine(t, "olmoe-tiny", qpack.SchemeInt4, LoadOptions{Prefill: prefill}).Engine
		e := loadEngine(t, "olmoe-tiny", qpack.SchemeInt4, LoadOptions{Prefill: prefill}).Engine
		for _, tc := range []struct {
			name      string
			req       Request
			lookahead bool // some step launches ahead
		}{
			{"eight", Request{Prompt: prompt, Tokens: 8, SuppressEOS: true}, true},
			// the prompt's last step launches the second token's ahead; a
			// batched prefill selects the first token itself, and the step
			// that sets it selects the last one
			{"two", Request{Prompt: prompt, Tokens: 2, SuppressEOS: true}, prefill == PrefillToken},
			{"one", Request{Prompt: prompt, Tokens: 1, SuppressEOS: true}, false},
			{"logits", Request{Prompt: prompt, Tokens: 6, SuppressEOS: true, LogitSteps: 2}, false},
			{"forced", Request{Prompt: prompt, Tokens: 4, SuppressEOS: true, Forced: []int{65, 66, 67, 68}}, false},
		} {
			t.Run(fmt.Sprintf("%s/%s", prefill, tc.name), func(t *testing.T) {
				want, err := ref.Generate(tc.req)
				if err != nil {
					t.Fatal(err)
				}
				st := &lookaheadStepper{e: e, ahead: -1}
				e.stepper = st
				defer func() { e.stepper = nil }()
				got, err := e.Generate(tc.req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.Tokens, want.Tokens) {
					t.Fatalf("tokens %v, op by op %v", got.Tokens, want.Tokens)
				}
				if st.ahead >= 0 {
					t.Errorf("a step launched ahead for position %d is left after the request's last token", st.ahead)
				}
				if st.discarded != 0 {
					t.Errorf("%d steps launched ahead were discarded", st.discarded)
				}
				if st.used != st.launched {
					t.Errorf("%d steps launched ahead, %d taken", st.launched, st.used)
				}
				if (st.launched > 0) != tc.lookahead {
					t.Errorf("%d steps launched ahead, want some: %v", st.launched, tc.lookahead)
				}
				if st.lastCallOn {
					t.Errorf("the step that selected the last token ran with lookahead on")
				}
			})
		}
	}
}
