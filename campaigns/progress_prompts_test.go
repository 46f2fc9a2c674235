package campaigns

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/editions"
)

// A worker's progress lines under a contract with declared prompt lengths,
// as the runner hands them on (progressLine).
func promptLines(id string, tokens int, prefill editions.Obs[float64], decode float64, n int64) func(Progress) {
	return func(p Progress) {
		progressLine(p, FormatPromptLine(id, tokens))
		progressLine(p, FormatRequestLine(prefill, decode))
		progressLine(p, ProgressTokens+" "+strconv.FormatInt(n, 10))
	}
}

// The displays of a prefill and of a depth run: a prefill run counts the
// prompt tokens prefilled and their rate in prefill (UNKNOWN when not
// timed), never output tokens a second; a depth run counts as a
// PERF-REAL-v1 run and adds the decode rate at each depth, and the bar
// names the request in flight.
func TestPromptDisplays(t *testing.T) {
	obs := editions.Observed[float64]
	unknown := editions.UnknownObs[float64]()
	cases := []struct {
		name  string
		mode  PromptMode
		total int64
		steps []event
		log   []string
		frame string // the bar's description after the last step but Done
	}{
		{name: "prefill", mode: PromptsPrefill, total: 160,
			steps: []event{
				at(0, func(p Progress) { p.Start(1, 2, 0, 160) }),
				at(0, evWorker(1, 1, "tiny-c6", 1)),
				at(time.Second, evTokens(1)),
				at(2*time.Second, promptLines("pp16", 16, obs(0.5), 0, 1)),
				at(3*time.Second, promptLines("pp64", 64, obs(0.5), 0, 1)),
				at(3*time.Second, evWorker(2, 1, "tiny-c6", 2)),
				at(4*time.Second, evTokens(1)),
				at(5*time.Second, promptLines("pp16", 16, obs(0.25), 0, 1)),
				at(5*time.Second, func(p Progress) { progressLine(p, FormatPromptLine("pp64", 64)) }),
			},
			log: []string{
				"1 configurations, 2 workers (0 finished before, 2 to run): 160 prompt tokens to prefill (one output token a request), after one warmup request per worker (excluded)",
				"worker 1/4: tiny-c6 (config 1/2) block 1/2: starting; it loads the artifact and runs the warmup before measuring…",
				"worker 1/4: tiny-c6 block 1/2: 80 prompt tokens prefilled in 3.0s, 80.0 prompt tok/s in prefill (warmup: 1 tokens, excluded, over after 1.0s); in all 80/160 prompt tokens, 26.7 tok/s, ETA 3.0s",
				"worker 2/4: tiny-c6 (config 1/2) block 2/2: starting; it loads the artifact and runs the warmup before measuring…",
			},
			frame: "worker 2/4 tiny-c6 block 2/2: prefilling pp64 (64 tokens)"},
		{name: "prefill untimed", mode: PromptsPrefill, total: 80,
			steps: []event{
				at(0, func(p Progress) { p.Start(1, 1, 0, 80) }),
				at(0, evWorker(1, 1, "tiny-c6", 1)),
				at(time.Second, evTokens(1)),
				at(2*time.Second, promptLines("pp16", 16, unknown, 0, 1)),
				at(2*time.Second, promptLines("pp64", 64, obs(0.5), 0, 1)),
				at(2*time.Second, func(p Progress) { p.Done() }),
			},
			log: []string{
				"1 configurations, 1 workers (0 finished before, 1 to run): 80 prompt tokens to prefill (one output token a request), after one warmup request per worker (excluded)",
				"worker 1/4: tiny-c6 (config 1/2) block 1/2: starting; it loads the artifact and runs the warmup before measuring…",
				"worker 1/4: tiny-c6 block 1/2: 80 prompt tokens prefilled in 2.0s, prompt tok/s in prefill UNKNOWN (not timed) (warmup: 1 tokens, excluded, over after 1.0s); in all 80/80 prompt tokens, 40.0 tok/s",
				"80/80 prompt tokens prefilled in 2.0s (1/1 warmup requests, 1 tokens, excluded)",
			}},
		{name: "depth", mode: PromptsDepth, total: 24,
			steps: []event{
				at(0, func(p Progress) { p.Start(1, 2, 0, 24) }),
				at(0, evWorker(1, 1, "tiny-c6", 1)),
				at(time.Second, evTokens(4)),
				at(2*time.Second, promptLines("d0", 1, obs(0.01), 0.5, 6)),
				at(4*time.Second, promptLines("d64", 64, obs(0.2), 1.25, 6)),
				at(4*time.Second, evWorker(2, 1, "tiny-c6", 2)),
				at(5*time.Second, evTokens(4)),
				at(5*time.Second, func(p Progress) { progressLine(p, FormatPromptLine("d0", 1)) }),
			},
			log: []string{
				"1 configurations, 2 workers (0 finished before, 2 to run): 24 measured tokens to produce, after one warmup request per worker (excluded)",
				"worker 1/4: tiny-c6 (config 1/2) block 1/2: starting; it loads the artifact and runs the warmup before measuring…",
				"worker 1/4: tiny-c6 block 1/2: 12 measured tokens in 4.0s (warmup: 4 tokens, excluded, over after 1.0s); decode by depth: d0 10.0 tok/s, d64 4.00 tok/s; in all 12/24 measured tokens, 3.00 tok/s, ETA 4.0s",
				"worker 2/4: tiny-c6 (config 1/2) block 2/2: starting; it loads the artifact and runs the warmup before measuring…",
			},
			frame: "worker 2/4 tiny-c6 block 2/2: measuring depth d0 (1 tokens)"},
	}
	for _, tc := range cases {
		for _, display := range []struct {
			name string
			new  func(w io.Writer, now func() time.Time) Progress
		}{
			{"log", func(w io.Writer, now func() time.Time) Progress { return newLog(w, now) }},
			{"terminal", func(w io.Writer, now func() time.Time) Progress { return newBar(w, now) }},
		} {
			t.Run(tc.name+"/"+display.name, func(t *testing.T) {
				clock := t0
				var out lockedBuilder
				p := display.new(&out, func() time.Time { return clock })
				p.(PromptProgress).Prompts(tc.mode)
				replay(p, &clock, tc.steps)
				if display.name == "log" {
					if got := screen(out.String()); strings.Join(got, "\n") != strings.Join(tc.log, "\n") {
						t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.log, "\n"))
					}
					return
				}
				got := lastFrame(out.String())
				p.Done()
				if tc.frame != "" && !strings.Contains(got, tc.frame) {
					t.Fatalf("frame %q does not show %q", got, tc.frame)
				}
			})
		}
	}
}

// The worker's lines parse back into what it measured; a line that does
// not parse is ignored, never a count.
func TestProgressLines(t *testing.T) {
	cases := []struct {
		line string
		want string
	}{
		{FormatPromptLine("pp256", 256), "prompt pp256 256"},
		{FormatRequestLine(editions.Observed(0.125), 0), "request 0.125 0 "},
		{FormatRequestLine(editions.UnknownObs[float64](), 1.5), "request UNKNOWN 1.5 "},
		{"tokens 7", "tokens 7"},
		{"prompt pp16", ""},
		{"request 0.1", ""},
		{"tokens x", ""},
		{"something else", ""},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			r := &recorder{}
			progressLine(r, tc.line)
			if r.got != tc.want {
				t.Fatalf("%q: got %q, want %q", tc.line, r.got, tc.want)
			}
		})
	}
}

// recorder notes the calls a line makes.
type recorder struct{ got string }

func (*recorder) Start(int, int, int, int64)                  {}
func (*recorder) Worker(int, int, int, int, string, int, int) {}
func (r *recorder) Tokens(n int64)                            { r.got = "tokens " + strconv.FormatInt(n, 10) }
func (*recorder) Say(string)                                  {}
func (*recorder) Done()                                       {}
func (*recorder) Prompts(PromptMode)                          {}
func (r *recorder) Prompt(id string, n int64) {
	r.got = "prompt " + id + " " + strconv.FormatInt(n, 10)
}
func (r *recorder) Request(pf editions.Obs[float64], d float64) {
	s := editions.Unknown
	if pf.Ok() {
		s = strconv.FormatFloat(pf.Value, 'g', -1, 64)
	}
	r.got = "request " + s + " " + strconv.FormatFloat(d, 'g', -1, 64) + " "
}
