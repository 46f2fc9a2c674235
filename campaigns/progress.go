package campaigns

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// ProgressTokens starts the worker's progress lines: "tokens <n>" after
// each request (the warmup included) with the tokens it produced.
const ProgressTokens = "tokens"

// Progress follows a run. Calls come from one goroutine at a time.
type Progress interface {
	// Start announces the work: configurations, workers in the campaign,
	// how many were finished before, and the tokens left to produce.
	Start(configs, workers, finished int, tokens int64)
	// Worker announces the n-th of the workers left to run.
	Worker(n, left, config, configs int, id string, block, blocks int)
	// Tokens adds tokens produced by the running worker.
	Tokens(n int64)
	// Say reports a step (artifact preparation, aggregation).
	Say(msg string)
	// Done ends the progress display.
	Done()
}

type quiet struct{}

func (quiet) Start(int, int, int, int64)                  {}
func (quiet) Worker(int, int, int, int, string, int, int) {}
func (quiet) Tokens(int64)                                {}
func (quiet) Say(string)                                  {}
func (quiet) Done()                                       {}

// NewBar returns a Progress drawing a progress bar of tokens on w (meant
// for a terminal's stderr), its description naming the configuration and
// worker.
func NewBar(w io.Writer) Progress { return &bar{w: w} }

type bar struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (b *bar) Start(configs, workers, finished int, tokens int64) {
	fmt.Fprintf(b.w, "%d configurations, %d workers (%d finished before, %d to run)\n", configs, workers, finished, workers-finished)
	if tokens == 0 {
		return
	}
	b.bar = progressbar.NewOptions64(tokens,
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetItsString("tok"),
		progressbar.OptionShowIts(),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }),
	)
}

func (b *bar) Worker(n, left, config, configs int, id string, block, blocks int) {
	if b.bar != nil {
		b.bar.Describe(fmt.Sprintf("config %d/%d %s · block %d/%d · worker %d/%d", config, configs, id, block, blocks, n, left))
	}
}

func (b *bar) Tokens(n int64) {
	if b.bar != nil {
		b.bar.Add64(n)
	}
}

func (b *bar) Say(msg string) {
	if b.bar != nil && !b.bar.IsFinished() {
		b.bar.Clear()
	}
	fmt.Fprintln(b.w, msg)
}

func (b *bar) Done() {
	if b.bar != nil && !b.bar.IsFinished() {
		b.bar.Finish()
	}
}

// NewLog returns a Progress that prints one line per worker, for output
// that is not a terminal (CI logs).
func NewLog(w io.Writer) Progress { return &logProgress{w: w} }

type logProgress struct {
	w       io.Writer
	started time.Time
	tokens  int64
}

func (l *logProgress) Start(configs, workers, finished int, tokens int64) {
	fmt.Fprintf(l.w, "%d configurations, %d workers (%d finished before, %d to run), %d tokens to produce\n",
		configs, workers, finished, workers-finished, tokens)
}

func (l *logProgress) Worker(n, left, config, configs int, id string, block, blocks int) {
	l.started, l.tokens = time.Now(), 0
	fmt.Fprintf(l.w, "worker %d/%d: config %d/%d %s block %d/%d\n", n, left, config, configs, id, block, blocks)
}

func (l *logProgress) Tokens(n int64) { l.tokens += n }
func (l *logProgress) Say(msg string) { fmt.Fprintln(l.w, msg) }
func (l *logProgress) Done()          {}
