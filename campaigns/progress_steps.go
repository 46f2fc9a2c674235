package campaigns

import (
	"fmt"
	"time"
)

// Artifact preparation reports through a Report: lines (Say) and the
// progress of its long steps in bytes (Begin: synthesis, quantisation).
// A terminal's display draws a step as a bar (StepProgress, the bar of
// NewBar); anything else gets stepLines.

// StepReport is one long step's progress: Progress(done, total) in bytes
// as it goes, End once it is over.
type StepReport interface {
	Progress(done, total int64)
	End()
}

// StepProgress is implemented by displays that draw a step of artifact
// preparation themselves (the terminal bar).
type StepProgress interface {
	Step(what string) StepReport
}

// Report is how a runtime reports artifact preparation (Runtime
// .PrepareArtifacts): Say prints a line; Step, when set, draws a long step
// (nil: lines).
type Report struct {
	Say  func(string)
	Step func(what string) StepReport
}

// Begin starts a long step: Step's, or lines through Say.
func (r Report) Begin(what string) StepReport {
	if r.Step != nil {
		return r.Step(what)
	}
	return newStepLines(r.Say, what, time.Now)
}

// ReportTo is the Report of a progress display: its Say, and its Step when
// it draws steps.
func ReportTo(p Progress) Report {
	r := Report{Say: p.Say}
	if sp, ok := p.(StepProgress); ok {
		r.Step = sp.Step
	}
	return r
}

// stepLineEvery is the least time between two progress lines of one step.
const stepLineEvery = 5 * time.Second

// stepLines reports a long step of artifact preparation (synthesis,
// quantisation) as lines: one at a new tenth of its bytes when
// stepLineEvery has passed since the step began or the last line, and one
// at the end, each with the elapsed time. Lines, not a bar: they read the
// same on a terminal and in a CI log, the line before the step says what
// it is, and a step shorter than stepLineEvery (a tiny model) prints only
// its end. Progress calls never overlap (qpack.PrepareOptions,
// model.SynthOptions).
type stepLines struct {
	say         func(string)
	what        string // "artifact <key>: quantising the experts to int4"
	now         func() time.Time
	start, last time.Time
	tenth       int64 // the last tenth reported
	total       int64
}

func newStepLines(say func(string), what string, now func() time.Time) *stepLines {
	t := now()
	return &stepLines{say: say, what: what, now: now, start: t, last: t}
}

// Progress implements StepReport.
func (s *stepLines) Progress(done, total int64) {
	s.total = total
	if total <= 0 {
		return
	}
	tenth := done * 10 / total
	t := s.now()
	if done >= total || tenth <= s.tenth || t.Sub(s.last) < stepLineEvery {
		return // the end line says it, or said already, or too soon
	}
	s.tenth, s.last = tenth, t
	s.say(fmt.Sprintf("%s: %d%% of %s, %s", s.what, done*100/total, ByteSize(total), Elapsed(t.Sub(s.start))))
}

// End implements StepReport.
func (s *stepLines) End() {
	s.say(fmt.Sprintf("%s: done, %s in %s", s.what, ByteSize(s.total), Elapsed(s.now().Sub(s.start))))
}

// Elapsed rounds a duration for progress lines: 0.3s, 12.0s, 2m5s.
func Elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// ByteSize prints a byte count in binary units.
func ByteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
