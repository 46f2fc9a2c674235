package engine

import (
	"fmt"
	"time"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// Request is one greedy generation.
type Request struct {
	Prompt []int // token ids, at least one
	Tokens int   // N: output tokens to produce
	// SuppressEOS masks every EOS id out of the argmax, so exactly Tokens
	// tokens are produced (PERF-REAL-v1). Without it generation stops after
	// an EOS token, which is included in the output.
	SuppressEOS bool
	// LogitSteps > 0 keeps the logits of the first LogitSteps selections
	// (step 0 is the prefill's output) for oracle comparisons.
	LogitSteps int
	// Forced, when set, teacher-forces the request: step i emits and feeds
	// Forced[i] instead of its greedy choice, whatever it is (an EOS id
	// among them does not end it), and Result.Greedy keeps the choices it
	// overrode. Tokens must equal len(Forced). The logits of step i are
	// then the model's next-token distribution after the prompt and
	// Forced[:i], the same context for every arm given the same ids (the
	// paired fidelity edition reads them with LogitSteps = len(Forced)).
	Forced []int
}

// Result is what a request produced, with the timing points of
// PERF-REAL-v1 measured on the monotonic clock from admission (the moment
// Generate is entered).
type Result struct {
	Tokens []int
	// TokenNs[i] is when token i was available on the host, in ns from
	// admission.
	TokenNs []int64
	// TTFTSeconds: admission to the first token.
	TTFTSeconds float64
	// DecodeSeconds: first token to last token (excludes the first-token
	// wait); 0 when one token was produced.
	DecodeSeconds float64
	// RuntimeSeconds: admission to the last token.
	RuntimeSeconds float64
	// PrefillSeconds: admission to the prompt's last logits, before the
	// first selection, when PrefillTimed: a backend.Synchronous backend run
	// op by op (the logits are then on the device when the head's last op
	// returns), or a captured step whose stepper is a device.PrefillTimer
	// (device events: admission marked on an idle stream, the end recorded
	// between the head and the selection kernel). Op by op on an
	// asynchronous backend leaves it untimed. It is at most TTFTSeconds:
	// a device interval runs on the GPU's clock, and over a prefill of
	// seconds the two clocks' rates differ by more than the few
	// microseconds between the head and the token reaching the host (seen
	// on the H200: 2.231616 s against a TTFT of 2.231614 s), so finish
	// caps it at the TTFT.
	PrefillSeconds float64
	PrefillTimed   bool
	// Logits holds LogitSteps rows of [V] values.
	Logits [][]float32
	// Greedy is, for a teacher-forced request (Request.Forced), the
	// greedy choice of every step (with the request's EOS mask), which
	// Tokens replaced by the forced ids; nil otherwise.
	Greedy []int
}

// DecodeTokS is (N-1)/DecodeSeconds, the per-request decode rate; 0 when
// one token was produced (no decode interval): callers that publish it
// must show that as UNKNOWN, not as a rate of 0.
func (r Result) DecodeTokS() float64 {
	if r.DecodeSeconds <= 0 || len(r.Tokens) < 2 {
		return 0
	}
	return float64(len(r.Tokens)-1) / r.DecodeSeconds
}

// TimesPrefill reports whether Generate times the end of prefill
// (Result.PrefillTimed): a batched prefill on a backend.Synchronous or
// backend.Waiter backend, a token-at-a-time one through a stepper that is
// a device.PrefillTimer for its mode, or op by op on a
// backend.Synchronous backend.
func (e *Engine) TimesPrefill() bool {
	if e.batched != nil {
		return e.hostTimesHead()
	}
	if e.stepper != nil {
		pt, ok := e.stepper.(device.PrefillTimer)
		return ok && pt.TimesPrefill()
	}
	sb, ok := e.be.(backend.Synchronous)
	return ok && sb.Synchronous()
}

// hostTimesHead: the host can take the time the head's logits are on the
// device, its ops having completed on return or through a wait.
func (e *Engine) hostTimesHead() bool {
	if sb, ok := e.be.(backend.Synchronous); ok && sb.Synchronous() {
		return true
	}
	_, ok := e.be.(backend.Waiter)
	return ok
}

// timedPrefill runs the prompt op by op (prefill: batched or token at a
// time) and records res's prefill end when the head's logits are on the
// device: at once on a backend.Synchronous backend, after a wait on a
// backend.Waiter one in a batched prefill.
func (e *Engine) timedPrefill(res *Result, t0 time.Time, prompt, masked []int) (int, error) {
	var werr error
	if sb, ok := e.be.(backend.Synchronous); ok && sb.Synchronous() {
		e.headDone = func() { res.PrefillSeconds, res.PrefillTimed = time.Since(t0).Seconds(), true }
	} else if w, ok := e.be.(backend.Waiter); ok && e.batched != nil {
		e.headDone = func() {
			if err := w.Wait(); err != nil {
				werr = fmt.Errorf("wait for the prompt's logits: %w", err)
				return
			}
			res.PrefillSeconds, res.PrefillTimed = time.Since(t0).Seconds(), true
		}
	}
	next, err := e.prefill(prompt, masked)
	e.headDone = nil
	if err == nil {
		err = werr
	}
	return next, err
}

// Generate runs prefill over the prompt, then decodes greedily. The KV cache
// is reused from position 0, so requests are independent.
func (e *Engine) Generate(req Request) (Result, error) {
	t0 := time.Now()
	if len(req.Prompt) == 0 {
		return Result{}, fmt.Errorf("generate: empty prompt")
	}
	if req.Tokens <= 0 {
		return Result{}, fmt.Errorf("generate: tokens must be positive, got %d", req.Tokens)
	}
	if n := len(req.Prompt) + req.Tokens - 1; n > e.maxSeq {
		return Result{}, fmt.Errorf("generate: prompt (%d) + tokens (%d) needs %d positions, the KV cache holds %d",
			len(req.Prompt), req.Tokens, n, e.maxSeq)
	}
	for i, t := range req.Prompt {
		if t < 0 || t >= e.cfg.VocabSize {
			return Result{}, fmt.Errorf("generate: prompt token %d (%d) outside the vocabulary of %d", i, t, e.cfg.VocabSize)
		}
	}
	if req.Forced != nil {
		if len(req.Forced) != req.Tokens {
			return Result{}, fmt.Errorf("generate: %d forced tokens for a request of %d tokens (teacher forcing emits exactly the forced ids)", len(req.Forced), req.Tokens)
		}
		for i, t := range req.Forced {
			if t < 0 || t >= e.cfg.VocabSize {
				return Result{}, fmt.Errorf("generate: forced token %d (%d) outside the vocabulary of %d", i, t, e.cfg.VocabSize)
			}
		}
	}
	var masked []int
	if req.SuppressEOS {
		masked = e.cfg.EOSTokenIDs
	}
	res := Result{Tokens: make([]int, 0, req.Tokens), TokenNs: make([]int64, 0, req.Tokens)}
	if e.stepper != nil {
		return e.generateDevice(req, res, t0)
	}
	// The prompt's positions before the last run the plan without its head;
	// the last one and every decode step run it whole, ending in the
	// selected token.
	n := len(req.Prompt)
	next, err := e.timedPrefill(&res, t0, req.Prompt, masked)
	if err != nil {
		return Result{}, err
	}
	pos := n
	for {
		if err := e.keepLogits(&res, req); err != nil {
			return Result{}, err
		}
		next = res.force(req, next)
		res.Tokens = append(res.Tokens, next)
		res.TokenNs = append(res.TokenNs, time.Since(t0).Nanoseconds())
		if res.ends(req, e.cfg.IsEOS(next)) {
			break
		}
		if next, err = e.run(e.full, next, pos, masked); err != nil {
			return Result{}, fmt.Errorf("decode position %d: %w", pos, err)
		}
		pos++
	}
	return res.finish(), nil
}

// prefill runs the prompt (batched, or one position at a time) and
// returns the greedy next token.
func (e *Engine) prefill(prompt []int, masked []int) (int, error) {
	if e.batched != nil {
		return e.prefillBatched(prompt, masked)
	}
	n := len(prompt)
	for pos, t := range prompt[:n-1] {
		if _, err := e.run(e.body, t, pos, masked); err != nil {
			return -1, fmt.Errorf("prefill position %d: %w", pos, err)
		}
	}
	next, err := e.run(e.full, prompt[n-1], n-1, masked)
	if err != nil {
		return -1, fmt.Errorf("prefill position %d: %w", n-1, err)
	}
	return next, nil
}

// force returns the token step len(r.Tokens) emits: the greedy choice, or
// under teacher forcing the forced id (the choice is kept in r.Greedy).
func (r *Result) force(req Request, greedy int) int {
	if req.Forced == nil {
		return greedy
	}
	r.Greedy = append(r.Greedy, greedy)
	return req.Forced[len(r.Tokens)]
}

// ends reports whether the request is complete after its latest token:
// Tokens tokens, or an EOS id when EOS is neither suppressed nor forced
// past.
func (r *Result) ends(req Request, eos bool) bool {
	return len(r.Tokens) == req.Tokens || (eos && !req.SuppressEOS && req.Forced == nil)
}

// finish sets the request's timing summary from TokenNs.
func (r Result) finish() Result {
	first, last := r.TokenNs[0], r.TokenNs[len(r.TokenNs)-1]
	r.TTFTSeconds = float64(first) / 1e9
	r.DecodeSeconds = float64(last-first) / 1e9
	r.RuntimeSeconds = float64(last) / 1e9
	if r.PrefillTimed && r.PrefillSeconds > r.TTFTSeconds {
		r.PrefillSeconds = r.TTFTSeconds // clock rates (PrefillSeconds)
	}
	return r
}

// generateDevice is Generate's loop over a device stepper: the prompt's
// steps set the token and position on the device (only the last one runs
// the head), and each decode step runs on the state the previous head left.
// With batched prefill the prompt runs op by op instead (decodeDevice).
// Timing points are taken when the host holds each token, as in the
// op-by-op loop.
func (e *Engine) generateDevice(req Request, res Result, t0 time.Time) (Result, error) {
	n := len(req.Prompt)
	var next int
	var err error
	if e.batched != nil {
		return e.decodeDevice(req, res, t0)
	}
	// A stepper that can time the prefill on the device marks admission
	// now; the prompt's last step then ends its interval (device.PrefillTimer).
	var pt device.PrefillTimer
	var marked time.Time
	if p, ok := e.stepper.(device.PrefillTimer); ok && p.TimesPrefill() {
		pt, marked = p, time.Now()
		if err := pt.MarkAdmission(); err != nil {
			return Result{}, fmt.Errorf("prefill timer: %w", err)
		}
	}
	// The prompt's last step selects the first token: a step launched
	// ahead of it serves the second (lookahead).
	e.stepper.SetLookahead(lookahead(req, 1))
	for i, t := range req.Prompt {
		if next, err = e.stepper.Step(t, i, true, i == n-1, req.SuppressEOS); err != nil {
			return Result{}, fmt.Errorf("prefill position %d: %w", i, err)
		}
	}
	if pt != nil {
		d, err := pt.PrefillDone()
		if err != nil {
			return Result{}, fmt.Errorf("prefill timer: %w", err)
		}
		res.PrefillSeconds, res.PrefillTimed = marked.Sub(t0).Seconds()+d.Seconds(), true
	}
	return e.decodeSteps(req, res, t0, next, false)
}

// decodeDevice is generateDevice after a batched prefill: the prompt runs
// op by op in batches (filling the KV cache the stepper reads), then the
// decode steps start from the selected token, the first one setting the
// token and position on the device.
func (e *Engine) decodeDevice(req Request, res Result, t0 time.Time) (Result, error) {
	var masked []int
	if req.SuppressEOS {
		masked = e.cfg.EOSTokenIDs
	}
	next, err := e.timedPrefill(&res, t0, req.Prompt, masked)
	if err != nil {
		return Result{}, err
	}
	return e.decodeSteps(req, res, t0, next, true)
}

// lookahead reports whether the step that selects the request's token
// number made (counting from 1) may launch the next decode step before its
// own token reaches the host (device.Stepper.SetLookahead). The step
// launched ahead reads the device's own choice, so logits read back or
// forced ids (which need the host's token) rule it out. And the step that
// selects the request's last token launches none: nothing would take it,
// and the next request's prefill would queue behind it on the device, a
// whole decode step added to its TTFT. (A request that ends early on an
// EOS id still leaves one step launched ahead; the stepper discards it.)
func lookahead(req Request, made int) bool {
	return req.LogitSteps == 0 && req.Forced == nil && made < req.Tokens
}

// decodeSteps runs the decode steps on the stepper from the first
// selected token next (position len(req.Prompt)); set: the first step sets
// the token and position on the device (the prompt did not run on the
// stepper). Under teacher forcing every step sets them: the device's state
// holds its own greedy choice, not the forced id.
func (e *Engine) decodeSteps(req Request, res Result, t0 time.Time, next int, set bool) (Result, error) {
	var err error
	pos := len(req.Prompt)
	for {
		if err := e.keepLogits(&res, req); err != nil {
			return Result{}, err
		}
		if next < 0 || next >= e.cfg.VocabSize {
			return Result{}, fmt.Errorf("select token %d: the device picked id %d (every logit masked or NaN?)", len(res.Tokens), next)
		}
		next = res.force(req, next)
		res.Tokens = append(res.Tokens, next)
		res.TokenNs = append(res.TokenNs, time.Since(t0).Nanoseconds())
		if res.ends(req, e.cfg.IsEOS(next)) {
			break
		}
		e.stepper.SetLookahead(lookahead(req, len(res.Tokens)+1))
		// A forced id is not the device's own choice: the step sets it
		// (and the position) on the device.
		if next, err = e.stepper.Step(next, pos, set || req.Forced != nil, true, req.SuppressEOS); err != nil {
			return Result{}, fmt.Errorf("decode position %d: %w", pos, err)
		}
		set = false
		pos++
	}
	return res.finish(), nil
}

// keepLogits appends the current logits to res while the request asks for
// more of them (LogitSteps).
func (e *Engine) keepLogits(res *Result, req Request) error {
	if len(res.Logits) >= req.LogitSteps {
		return nil
	}
	row := make([]float32, e.cfg.VocabSize)
	if err := e.be.ReadF32(e.logits, row); err != nil {
		return fmt.Errorf("read logits: %w", err)
	}
	res.Logits = append(res.Logits, row)
	return nil
}
