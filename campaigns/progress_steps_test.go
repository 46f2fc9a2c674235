package campaigns

import (
	"strings"
	"testing"
	"time"
)

// A step's lines: a new tenth at least stepLineEvery after the step began
// or the last line, then the end; never the same tenth twice, and only the
// end for a step shorter than stepLineEvery.
func TestStepLines(t *testing.T) {
	const total = 10 << 20 // 10 MiB: tenths are exact
	type report struct {
		at   time.Duration // since the step began
		done int64
	}
	for _, tc := range []struct {
		name    string
		reports []report
		end     time.Duration
		want    []string
	}{
		{"tiny step: only the end", []report{{0, total / 2}, {300 * time.Millisecond, total}}, 300 * time.Millisecond,
			[]string{"q: done, 10.0 MiB in 0.3s"}},
		{"no line for the last bytes", []report{{time.Second, total / 4}, {9 * time.Second, total}}, 9 * time.Second,
			[]string{"q: done, 10.0 MiB in 9.0s"}},
		{"throttled to stepLineEvery", []report{
			{1 * time.Second, total / 10},      // too soon
			{5 * time.Second, 3 * total / 10},  // 5s after the start: said
			{7 * time.Second, 4*total/10 - 1},  // too soon
			{11 * time.Second, 4*total/10 - 1}, // the same tenth: not said
			{12 * time.Second, 5 * total / 10}, // said
			{80 * time.Second, 9 * total / 10}, // said
			{81 * time.Second, total},
		}, 81 * time.Second, []string{
			"q: 30% of 10.0 MiB, 5.0s", "q: 50% of 10.0 MiB, 12.0s", "q: 90% of 10.0 MiB, 1m20s", "q: done, 10.0 MiB in 1m21s",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			now := t0
			var got []string
			s := newStepLines(func(m string) { got = append(got, m) }, "q", func() time.Time { return now })
			for _, r := range tc.reports {
				now = t0.Add(r.at)
				s.Progress(r.done, total)
			}
			now = t0.Add(tc.end)
			s.End()
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {3 << 19, "1.5 MiB"}, {5 << 30, "5.0 GiB"}} {
		if got := ByteSize(tc.n); got != tc.want {
			t.Errorf("ByteSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// On a terminal a long preparation step is a byte bar, cleared at the end
// and replaced by the step's done line; the log display has no Step, so a
// runtime prints lines (Report.Begin).
func TestPrepareSteps(t *testing.T) {
	var buf strings.Builder
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	b := newBar(&buf, func() time.Time { return now })
	rep := ReportTo(b)
	if rep.Step == nil {
		t.Fatal("the terminal bar draws no steps")
	}
	s := rep.Begin("[1/2] artifact x: quantising the experts to int4")
	s.Progress(5<<20, 10<<20)
	now = t0.Add(1500 * time.Millisecond)
	s.Progress(10<<20, 10<<20)
	s.End()
	out := buf.String()
	if !strings.Contains(out, "[1/2] artifact x: quantising the experts to int4") || !strings.Contains(out, "MB") {
		t.Fatalf("no byte bar for the step:\n%q", out)
	}
	if !strings.HasSuffix(out, "[1/2] artifact x: quantising the experts to int4: done, 10.0 MiB in 1.5s\n") {
		t.Fatalf("the step does not end with its done line:\n%q", out)
	}
	var lines []string
	lr := ReportTo(newLog(&buf, time.Now))
	lr.Say = func(m string) { lines = append(lines, m) }
	if lr.Step != nil {
		t.Fatal("the log display draws steps")
	}
	ls := lr.Begin("q")
	ls.Progress(1, 2)
	ls.End()
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "q: done, 2 B in ") {
		t.Fatalf("log lines %q, want the done line alone", lines)
	}
}
