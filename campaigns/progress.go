package campaigns

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/horizon-runmap/horizon/editions"
)

// ProgressTokens starts the worker's progress lines: "tokens <n>" after
// each request with the tokens it produced. The first line is the
// contract's warmup request (worker.Run runs it first, and it is excluded
// from every metric); the others are the measured requests.
const ProgressTokens = "tokens"

// Progress follows a run. Calls come from one goroutine at a time.
//
// What a display shows is what was measured: the measured tokens (never
// the warmups', which are counted apart as warmup requests), and a rate
// and an ETA only once measured tokens have arrived. The log's rate is
// measured tokens over the wall time since Start, loads and warmups
// included, so that the ETA holds for the workers still to load (the
// terminal bar's is the library's, see NewBar). Weak spot: the
// worker's lines do not mark the warmup, it is known by being first
// (ProgressTokens); worker.Run is their one writer.
type Progress interface {
	// Start announces the work: configurations, workers in the campaign,
	// how many were finished before, and the measured tokens left to
	// produce, the warmups excluded (each worker left runs one warmup
	// request first).
	Start(configs, workers, finished int, tokens int64)
	// Worker announces the n-th of the workers left to run, before its
	// process starts: it loads its artifact and runs its warmup before its
	// first measured token.
	Worker(n, left, config, configs int, id string, block, blocks int)
	// Tokens adds the tokens of one finished request of the running worker
	// (ProgressTokens): the first since Worker is the warmup's.
	Tokens(n int64)
	// Say reports a step (artifact preparation, aggregation).
	Say(msg string)
	// Done ends the progress display.
	Done()
}

// ShardProgress is implemented by displays that can follow an IFEval run:
// its workers generate shards of prompts, have no warmup (their first
// progress line is "tokens 0") and stop each response at EOS, so the
// token total is an upper bound. RunIFEval calls Shards before Start.
type ShardProgress interface {
	Shards()
}

type quiet struct{}

func (quiet) Start(int, int, int, int64)                  {}
func (quiet) Worker(int, int, int, int, string, int, int) {}
func (quiet) Tokens(int64)                                {}
func (quiet) Say(string)                                  {}
func (quiet) Done()                                       {}

// tally is what both displays know of a run: the plan from Start, the
// running worker from Worker, and what Tokens brought.
type tally struct {
	configs, workers, finished int
	total                      int64 // measured tokens to produce
	measured                   int64 // measured tokens produced
	warmups, warmupsDone       int   // warmup requests: one per worker left
	warmupTokens               int64
	started                    time.Time // Start

	// The running worker (n is 0 before the first).
	n, left, config, block, blocks int
	id                             string
	requests                       int // its finished requests, the warmup first
	workerStarted                  time.Time
	workerWarmupAt                 time.Duration // when its warmup ended, since workerStarted
	workerTokens                   int64         // its measured tokens
	workerWarmup                   int64         // its warmup's tokens

	// shards: an IFEval run (ShardProgress): "shard" for "block", no
	// warmup, and the total is an upper bound.
	shards bool
	// pr: a run of a contract with declared prompt lengths
	// (PromptProgress; mode 0 otherwise).
	pr promptTally
}

func (t *tally) start(configs, workers, finished int, tokens int64, now time.Time) {
	*t = tally{configs: configs, workers: workers, finished: finished, total: tokens,
		warmups: workers - finished, started: now, shards: t.shards, pr: promptTally{mode: t.pr.mode}}
}

// tokenWord is what the counts count: measured tokens (the warmups'
// apart), or an IFEval run's generated tokens (out of at most the total).
func (t *tally) tokenWord() string {
	switch {
	case t.shards:
		return "tokens"
	case t.pr.mode == PromptsPrefill:
		return "prompt tokens"
	}
	return "measured tokens"
}

// unit is what a worker measures: a block, or a shard of prompts.
func (t *tally) unit() string {
	if t.shards {
		return "shard"
	}
	return "block"
}

func (t *tally) worker(n, left, config, configs int, id string, block, blocks int, now time.Time) {
	t.n, t.left, t.config, t.configs, t.id, t.block, t.blocks = n, left, config, configs, id, block, blocks
	t.requests, t.workerStarted, t.workerWarmupAt, t.workerTokens, t.workerWarmup = 0, now, 0, 0, 0
	t.pr.worker()
}

// tokens counts one finished request; warmup says it was the worker's
// warmup.
func (t *tally) tokens(n int64, now time.Time) (warmup bool) {
	t.requests++
	if t.requests == 1 {
		t.warmupsDone++
		t.warmupTokens += n
		t.workerWarmup = n
		t.workerWarmupAt = now.Sub(t.workerStarted)
		return true
	}
	if t.pr.mode != 0 {
		n = t.pr.request(n) // prompt tokens under a prefill contract
	}
	t.measured += n
	t.workerTokens += n
	return false
}

// rate is measured tokens per second of wall time since Start; ok is false
// before anything was measured.
func (t *tally) rate(now time.Time) (float64, bool) {
	s := now.Sub(t.started).Seconds()
	if t.measured == 0 || s <= 0 {
		return 0, false
	}
	return float64(t.measured) / s, true
}

// plan is the line that opens the workers' part of a run.
func (t *tally) plan() string {
	s := fmt.Sprintf("%d configurations, %d workers (%d finished before, %d to run)", t.configs, t.workers, t.finished, t.workers-t.finished)
	if t.workers == t.finished {
		return s + ": nothing to run"
	}
	switch {
	case t.shards:
		return s + fmt.Sprintf(": at most %d tokens to generate (each response stops at EOS or max_new_tokens; no warmup)", t.total)
	case t.pr.mode == PromptsPrefill:
		return s + fmt.Sprintf(": %d prompt tokens to prefill (one output token a request), after one warmup request per worker (excluded)", t.total)
	}
	return s + fmt.Sprintf(": %d measured tokens to produce, after one warmup request per worker (excluded)", t.total)
}

// workerLine is the line printed before a worker's process starts: it is
// silent until its warmup is over.
func (t *tally) workerLine() string {
	if t.shards {
		return fmt.Sprintf("worker %d/%d: %s (config %d/%d) shard %d/%d: starting; it loads the artifact before generating…",
			t.n, t.left, t.id, t.config, t.configs, t.block, t.blocks)
	}
	return fmt.Sprintf("worker %d/%d: %s (config %d/%d) block %d/%d: starting; it loads the artifact and runs the warmup before measuring…",
		t.n, t.left, t.id, t.config, t.configs, t.block, t.blocks)
}

// workerDone summarises the running worker once it is over.
func (t *tally) workerDone(now time.Time) string {
	s := fmt.Sprintf("worker %d/%d: %s %s %d/%d: %d %s in %s", t.n, t.left, t.id, t.unit(), t.block, t.blocks,
		t.workerTokens, t.tokenWord(), short(now.Sub(t.workerStarted)))
	if t.pr.mode == PromptsPrefill {
		s = fmt.Sprintf("worker %d/%d: %s %s %d/%d: %d prompt tokens prefilled in %s, %s", t.n, t.left, t.id, t.unit(), t.block, t.blocks,
			t.workerTokens, short(now.Sub(t.workerStarted)), t.pr.prefillText())
	}
	switch {
	case t.shards:
	case t.requests > 0:
		s += fmt.Sprintf(" (warmup: %d tokens, excluded, over after %s)", t.workerWarmup, short(t.workerWarmupAt))
	default:
		s += " (its warmup never ended)"
	}
	if t.pr.mode == PromptsDepth {
		s += t.pr.depthsText()
	}
	return s + "; in all " + t.sofar(now)
}

// sofar is the run's measured progress in words.
func (t *tally) sofar(now time.Time) string {
	s := fmt.Sprintf("%d/%d %s", t.measured, t.total, t.tokenWord())
	if r, ok := t.rate(now); ok {
		s += ", " + rateText(r)
		if eta, ok := t.eta(r); ok {
			s += ", ETA " + short(eta)
		}
	}
	return s
}

func (t *tally) eta(rate float64) (time.Duration, bool) {
	left := t.total - t.measured
	if left <= 0 || rate <= 0 {
		return 0, false
	}
	return time.Duration(float64(left) / rate * float64(time.Second)), true
}

// summary is the last line of a run's workers.
func (t *tally) summary(now time.Time) string {
	switch {
	case t.shards:
		return fmt.Sprintf("%d tokens generated in %s (at most %d)", t.measured, short(now.Sub(t.started)), t.total)
	case t.pr.mode == PromptsPrefill:
		return fmt.Sprintf("%d/%d prompt tokens prefilled in %s (%d/%d warmup requests, %d tokens, excluded)",
			t.measured, t.total, short(now.Sub(t.started)), t.warmupsDone, t.warmups, t.warmupTokens)
	}
	return fmt.Sprintf("%d/%d measured tokens in %s (%d/%d warmup requests, %d tokens, excluded)",
		t.measured, t.total, short(now.Sub(t.started)), t.warmupsDone, t.warmups, t.warmupTokens)
}

// describe is the terminal bar's description: the warmups, counted apart
// from the measured tokens, and the running worker, e.g.
// "warmup 1/4 · worker 2/4 qwen2moe-tiny-c8 block 2/2: loading, warmup".
func (t *tally) describe() string {
	if t.shards {
		if t.n == 0 {
			return ""
		}
		phase := "loading"
		if t.requests > 0 {
			phase = "generating"
		}
		return fmt.Sprintf("worker %d/%d %s shard %d/%d: %s", t.n, t.left, t.id, t.block, t.blocks, phase)
	}
	s := fmt.Sprintf("warmup %d/%d", t.warmupsDone, t.warmups)
	if t.n > 0 {
		phase := "loading, warmup"
		switch {
		case t.requests > 0 && t.pr.mode != 0:
			phase = t.pr.running()
		case t.requests > 0:
			phase = "measuring"
		}
		s += fmt.Sprintf(" · worker %d/%d %s block %d/%d: %s", t.n, t.left, t.id, t.block, t.blocks, phase)
	}
	return s
}

// rateText prints a rate of tokens per second with two or three
// significant digits (a slow CPU run makes well under one a second).
func rateText(r float64) string {
	switch {
	case r < 10:
		return fmt.Sprintf("%.2f tok/s", r)
	case r < 100:
		return fmt.Sprintf("%.1f tok/s", r)
	}
	return fmt.Sprintf("%.0f tok/s", r)
}

// short prints a duration to the second (tenths below ten seconds), e.g.
// 3.2s, 48s, 5m06s, 1h02m.
func short(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// NewBar returns a Progress for a terminal (meant for its stderr), drawn by
// github.com/schollz/progressbar: the plan and a line per worker above a
// bar of measured tokens, its description (tally.describe) at its end.
// Until measured tokens arrive there is no rate to show, so a spinner says
// "measuring…" in its place (its clock moves while the first worker loads
// and warms up); then the bar takes over, its clock started at Start.
//
// Weak spots: the library's rate is a rolling average over the last few
// Tokens calls, and the bar is redrawn only on calls, so its clock stands
// still while a later worker loads (its description says so).
func NewBar(w io.Writer) Progress { return newBar(w, time.Now) }

func newBar(w io.Writer, now func() time.Time) *bar { return &bar{w: w, now: now} }

type bar struct {
	w    io.Writer
	now  func() time.Time // the tally's clock; the library reads time.Now
	t    tally
	bar  *progressbar.ProgressBar // measured tokens; nil when there are none to produce
	live *progressbar.ProgressBar // on screen: the spinner, then bar; nil once over
	done bool
}

// Shards implements ShardProgress.
func (b *bar) Shards() { b.t.shards = true }

// Prompts, Prompt and Request implement PromptProgress.
func (b *bar) Prompts(m PromptMode) { b.t.pr.mode = m }
func (b *bar) Prompt(id string, tokens int64) {
	b.t.pr.id, b.t.pr.promptTokens = id, tokens
	b.redraw()
}
func (b *bar) Request(prefill editions.Obs[float64], decodeSeconds float64) {
	b.t.pr.prefill, b.t.pr.decodeSeconds, b.t.pr.timed = prefill, decodeSeconds, true
}

func (b *bar) Start(configs, workers, finished int, tokens int64) {
	b.t.start(configs, workers, finished, tokens, b.now())
	fmt.Fprintln(b.w, b.t.plan())
	if workers == finished {
		return
	}
	if tokens > 0 {
		b.bar = progressbar.NewOptions64(tokens,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("tok"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }),
		)
		b.bar.StartWithoutRender() // the rate and the elapsed time count from Start
	}
	b.live = progressbar.NewOptions64(-1, // a spinner, redrawn by the library
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(),
	)
	b.redraw() // the first frame
}

func (b *bar) Worker(n, left, config, configs int, id string, block, blocks int) {
	b.t.worker(n, left, config, configs, id, block, blocks, b.now())
	b.above(b.t.workerLine())
}

func (b *bar) Tokens(n int64) {
	if warmup := b.t.tokens(n, b.now()); warmup || b.live == nil || b.bar == nil || b.t.measured == 0 {
		b.redraw()
		return
	}
	if b.live != b.bar { // the first measured tokens: the bar replaces the spinner
		b.live.Finish()
		b.live = b.bar
		defer b.redraw() // its description
	}
	b.bar.Add64(n)
}

func (b *bar) Say(msg string) { b.above(msg) }

func (b *bar) Done() {
	if b.done || b.t.started.IsZero() || b.t.warmups == 0 {
		return
	}
	b.done = true
	switch {
	case b.live == nil || b.live.IsFinished():
	case b.live == b.bar:
		b.bar.Clear()
	default:
		b.live.Finish() // the spinner, cleared
	}
	b.live = nil
	fmt.Fprintln(b.w, b.t.summary(b.now()))
}

// redraw brings the description up to date, which redraws what is on
// screen; a bar that filled up is left as it is.
func (b *bar) redraw() {
	switch {
	case b.live == nil:
	case b.live.IsFinished():
		b.live = nil
	case b.live == b.bar:
		b.bar.Describe(b.t.describe())
	default:
		b.live.Describe("measuring… · " + b.t.describe())
	}
}

// above prints a line above what is on screen: the library holds it
// (Bprintln) and writes it on the cleared line when it redraws.
func (b *bar) above(msg string) {
	if b.live == nil {
		fmt.Fprintln(b.w, msg)
		return
	}
	progressbar.Bprintln(b.live, msg)
	b.redraw()
}

// NewLog returns a Progress for output that is not a terminal (CI logs,
// pipes): whole lines only, the plan, then two per worker (before it
// starts, and what it measured once it is over), and a summary.
func NewLog(w io.Writer) Progress { return newLog(w, time.Now) }

func newLog(w io.Writer, now func() time.Time) *logProgress {
	return &logProgress{w: w, now: now}
}

type logProgress struct {
	w    io.Writer
	now  func() time.Time
	t    tally
	done bool
}

// Shards implements ShardProgress.
func (l *logProgress) Shards() { l.t.shards = true }

// Prompts, Prompt and Request implement PromptProgress.
func (l *logProgress) Prompts(m PromptMode)           { l.t.pr.mode = m }
func (l *logProgress) Prompt(id string, tokens int64) { l.t.pr.id, l.t.pr.promptTokens = id, tokens }
func (l *logProgress) Request(prefill editions.Obs[float64], decodeSeconds float64) {
	l.t.pr.prefill, l.t.pr.decodeSeconds, l.t.pr.timed = prefill, decodeSeconds, true
}

func (l *logProgress) Start(configs, workers, finished int, tokens int64) {
	l.t.start(configs, workers, finished, tokens, l.now())
	fmt.Fprintln(l.w, l.t.plan())
}

func (l *logProgress) Worker(n, left, config, configs int, id string, block, blocks int) {
	l.endWorker()
	l.t.worker(n, left, config, configs, id, block, blocks, l.now())
	fmt.Fprintln(l.w, l.t.workerLine())
}

func (l *logProgress) Tokens(n int64) { l.t.tokens(n, l.now()) }
func (l *logProgress) Say(msg string) { fmt.Fprintln(l.w, msg) }

func (l *logProgress) Done() {
	if l.done || l.t.started.IsZero() || l.t.warmups == 0 {
		return
	}
	l.done = true
	l.endWorker()
	fmt.Fprintln(l.w, l.t.summary(l.now()))
}

// endWorker prints the running worker's summary, once.
func (l *logProgress) endWorker() {
	if l.t.n == 0 {
		return
	}
	fmt.Fprintln(l.w, l.t.workerDone(l.now()))
	l.t.n = 0
}

// Step implements StepProgress: a byte bar for one long step of artifact
// preparation (before Start: nothing else is on screen), its line
// replaced at the end by the step's "done" line, as the log prints it.
func (b *bar) Step(what string) StepReport { return &barStep{b: b, what: what, start: b.now()} }

type barStep struct {
	b     *bar
	what  string
	start time.Time
	total int64
	pb    *progressbar.ProgressBar // nil until the first Progress with a total
}

func (s *barStep) Progress(done, total int64) {
	if total <= 0 {
		return
	}
	if s.pb == nil {
		s.total = total
		s.pb = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(s.b.w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetDescription(s.what),
			progressbar.OptionClearOnFinish(),
		)
	}
	_ = s.pb.Set64(done)
}

func (s *barStep) End() {
	if s.pb != nil {
		_ = s.pb.Finish()
	}
	fmt.Fprintf(s.b.w, "%s: done, %s in %s\n", s.what, ByteSize(s.total), Elapsed(s.b.now().Sub(s.start)))
}
