package campaigns

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is when the tests' runs start; clock offsets are from it.
var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// event is one call on a Progress at a time since t0.
type event struct {
	at time.Duration
	do func(Progress)
}

func at(d time.Duration, do func(Progress)) event { return event{d, do} }

// The mini plan the tests follow: 2 configurations x 2 blocks, nothing
// finished before, each worker a warmup of 2 tokens and 12 measured
// tokens (48 in all).
func evStart(p Progress) { p.Start(2, 4, 0, 48) }
func evWorker(n, config int, id string, block int) func(Progress) {
	return func(p Progress) { p.Worker(n, 4, config, 2, id, block, 2) }
}
func evTokens(n int64) func(Progress) { return func(p Progress) { p.Tokens(n) } }

// replay runs events on p with a clock it controls.
func replay(p Progress, clock *time.Time, events []event) {
	for _, e := range events {
		*clock = t0.Add(e.at)
		e.do(p)
	}
}

// The terminal bar after each step of a run, as its last frame: a
// "measuring…" spinner and no rate until measured tokens arrive, the
// warmups counted apart in the description and never in the count. The
// library draws the rest (its times come from time.Now, so only the count
// and the rate's unit are checked).
func TestBarFrames(t *testing.T) {
	w1 := evWorker(1, 1, "qwen2moe-tiny-c8", 1)
	first := []event{at(0, evStart), at(0, w1), at(3*time.Second, evTokens(2)), at(4*time.Second, evTokens(4))}
	for _, tc := range []struct {
		name   string
		events []event
		desc   string
		count  string // "": the spinner, no rate
	}{
		{"first frame: nothing measured, no rate",
			[]event{at(0, evStart)},
			"measuring… · warmup 0/4", ""},
		{"first worker loading",
			[]event{at(0, evStart), at(0, w1)},
			"measuring… · warmup 0/4 · worker 1/4 qwen2moe-tiny-c8 block 1/2: loading, warmup", ""},
		{"warmup over: counted apart, not in the count",
			[]event{at(0, evStart), at(0, w1), at(3*time.Second, evTokens(2))},
			"measuring… · warmup 1/4 · worker 1/4 qwen2moe-tiny-c8 block 1/2: measuring", ""},
		{"first measured tokens: the bar, with a rate",
			first,
			"warmup 1/4 · worker 1/4 qwen2moe-tiny-c8 block 1/2: measuring", "(4/48, "},
		{"next worker loading",
			append(first, at(5*time.Second, evTokens(4)), at(6*time.Second, evTokens(4)), at(6*time.Second, evWorker(2, 1, "qwen2moe-tiny-c8", 2))),
			"warmup 1/4 · worker 2/4 qwen2moe-tiny-c8 block 2/2: loading, warmup", "(12/48, "},
		{"everything measured: the full bar stays",
			[]event{at(0, evStart), at(0, evWorker(4, 2, "olmoe-tiny-c6", 2)), at(time.Second, evTokens(2)),
				at(2*time.Second, evTokens(24)), at(64*time.Second, evTokens(24))},
			"warmup 1/4 · worker 4/4 olmoe-tiny-c6 block 2/2: measuring", "(48/48, "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := t0
			var out lockedBuilder
			b := newBar(&out, func() time.Time { return clock })
			replay(b, &clock, tc.events)
			got := lastFrame(out.String())
			b.Done()
			if !strings.Contains(got, tc.desc) {
				t.Fatalf("frame %q does not show %q", got, tc.desc)
			}
			if tc.count == "" && strings.Contains(got, "tok/") || tc.count != "" && (!strings.Contains(got, tc.count) || !strings.Contains(got, " tok/")) {
				t.Fatalf("frame %q, want count %q and a rate only with it", got, tc.count)
			}
		})
	}
}

// lastFrame is the last thing drawn in out: the library clears a frame
// with spaces and "\r" before it draws the next.
func lastFrame(out string) string {
	f := strings.FieldsFunc(out, func(r rune) bool { return r == '\r' || r == '\n' })
	for i := len(f) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(f[i]); s != "" {
			return s
		}
	}
	return ""
}

// screen is what a terminal shows after out: "\r" goes back to the start
// of the line (the library clears it with spaces first), "\n" ends it.
func screen(out string) []string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l[strings.LastIndex(l, "\r")+1:], " ")
	}
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// A whole run on each display: the terminal keeps whole lines above one
// frame and ends with a summary; a log gets whole lines only, two per
// worker.
func TestDisplays(t *testing.T) {
	run := []event{
		at(0, func(p Progress) { p.Say("artifacts of mini: 1 to prepare under runs/mini/artifacts (…)…") }),
		at(time.Second, evStart),
		at(time.Second, evWorker(1, 1, "qwen2moe-tiny-c8", 1)),
		at(4*time.Second, evTokens(2)),
		at(5*time.Second, evTokens(4)),
		at(6*time.Second, evTokens(4)),
		at(7*time.Second, evTokens(4)),
		at(7*time.Second, evWorker(2, 1, "qwen2moe-tiny-c8", 2)),
		at(9*time.Second, evTokens(2)),
		at(10*time.Second, evTokens(12)),
		at(11*time.Second, func(p Progress) { p.Done() }),
		at(12*time.Second, func(p Progress) { p.Done() }), // twice: once
	}
	for _, tc := range []struct {
		name string
		new  func(w io.Writer, now func() time.Time) Progress
		want []string
	}{
		{"terminal", func(w io.Writer, now func() time.Time) Progress { return newBar(w, now) }, []string{
			"artifacts of mini: 1 to prepare under runs/mini/artifacts (…)…",
			"2 configurations, 4 workers (0 finished before, 4 to run): 48 measured tokens to produce, after one warmup request per worker (excluded)",
			"worker 1/4: qwen2moe-tiny-c8 (config 1/2) block 1/2: starting; it loads the artifact and runs the warmup before measuring…",
			"worker 2/4: qwen2moe-tiny-c8 (config 1/2) block 2/2: starting; it loads the artifact and runs the warmup before measuring…",
			"24/48 measured tokens in 10s (2/4 warmup requests, 4 tokens, excluded)",
		}},
		{"log", func(w io.Writer, now func() time.Time) Progress { return newLog(w, now) }, []string{
			"artifacts of mini: 1 to prepare under runs/mini/artifacts (…)…",
			"2 configurations, 4 workers (0 finished before, 4 to run): 48 measured tokens to produce, after one warmup request per worker (excluded)",
			"worker 1/4: qwen2moe-tiny-c8 (config 1/2) block 1/2: starting; it loads the artifact and runs the warmup before measuring…",
			"worker 1/4: qwen2moe-tiny-c8 block 1/2: 12 measured tokens in 6.0s (warmup: 2 tokens, excluded, over after 3.0s); in all 12/48 measured tokens, 2.00 tok/s, ETA 18s",
			"worker 2/4: qwen2moe-tiny-c8 (config 1/2) block 2/2: starting; it loads the artifact and runs the warmup before measuring…",
			"worker 2/4: qwen2moe-tiny-c8 block 2/2: 12 measured tokens in 4.0s (warmup: 2 tokens, excluded, over after 2.0s); in all 24/48 measured tokens, 2.40 tok/s, ETA 10s",
			"24/48 measured tokens in 10s (2/4 warmup requests, 4 tokens, excluded)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := t0
			var out lockedBuilder // the library's spinner draws from its goroutine
			p := tc.new(&out, func() time.Time { return clock })
			replay(p, &clock, run)
			got := screen(out.String())
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("screen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if tc.name == "log" && strings.ContainsAny(out.String(), "\r\x1b") {
				t.Fatalf("log output redraws: %q", out.String())
			}
		})
	}
}

// The terminal's first frame, drawn at Start, shows no rate: the old bar
// printed "0 tok/hr" before anything was measured.
func TestFirstFrameHasNoRate(t *testing.T) {
	var out lockedBuilder
	b := newBar(&out, func() time.Time { return t0 })
	b.Start(2, 4, 0, 48)
	first := screen(out.String())
	b.Done()
	if len(first) != 2 || !strings.Contains(first[1], "measuring…") || strings.Contains(first[1], "tok/") {
		t.Fatalf("first frame %q", first)
	}
}

func TestDurationsAndRates(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{short(0), "0.0s"},
		{short(3240 * time.Millisecond), "3.2s"},
		{short(48 * time.Second), "48s"},
		{short(5*time.Minute + 6*time.Second), "5m06s"},
		{short(time.Hour + 2*time.Minute + 20*time.Second), "1h02m"},
		{rateText(0.123), "0.12 tok/s"},
		{rateText(42.25), "42.2 tok/s"},
		{rateText(1234.5), "1234 tok/s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// While the first worker is silent (loading, warming up) the library's
// spinner redraws itself; Done stops it before it returns.
func TestBarSpinnerStops(t *testing.T) {
	var out lockedBuilder
	b := newBar(&out, time.Now)
	b.Start(1, 1, 0, 4)
	b.Worker(1, 1, 1, 1, "c", 1, 1)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(out.String(), "measuring…") < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	b.Done()
	n := len(out.String())
	time.Sleep(300 * time.Millisecond) // the spinner redraws every 100ms
	if got := strings.Count(out.String(), "measuring…"); got < 4 || len(out.String()) != n {
		t.Fatalf("%d frames drawn (want 4 or more), %d bytes after Done", got, len(out.String())-n)
	}
}

// lockedBuilder is a strings.Builder the test reads while the library's
// spinner writes.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
