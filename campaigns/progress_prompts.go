package campaigns

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// Progress of a run under a contract with declared prompt lengths
// (contracts.PromptRule: PERF-PREFILL-v1, PERF-DEPTH-v1). Their requests
// differ from PERF-REAL-v1's: a prefill contract's have one output token,
// so output tokens a second say nothing and the display counts prompt
// tokens prefilled instead; a depth contract's decode after contexts of
// very different lengths, so the display names the depth that is running
// and the decode rate at each. The worker says what it measured in two
// more lines around each measured request (worker.Run writes them, the
// runner reads them):
//
//	prompt <id> <prompt tokens>                       the request starts
//	request <prefill seconds|UNKNOWN> <decode seconds> its timings, before its "tokens <n>"
const (
	ProgressPrompt  = "prompt"
	ProgressRequest = "request"
)

// PromptMode is what a display counts under a contract with declared
// prompt lengths.
type PromptMode int

const (
	// PromptsPrefill: one output token a request; Start's tokens are the
	// prompt tokens to prefill, and the rates are prompt tokens a second.
	PromptsPrefill PromptMode = iota + 1
	// PromptsDepth: decode after each declared depth; counts as a
	// PERF-REAL-v1 run, and says which depth is running and the decode
	// rate at each.
	PromptsDepth
)

// ProgressMode is the PromptMode of contract k, 0 for a contract without
// declared prompt lengths.
func ProgressMode(k *contracts.Contract) PromptMode {
	switch {
	case k.PromptRule == nil:
		return 0
	case k.DecodeByPrompt():
		return PromptsDepth
	}
	return PromptsPrefill
}

// PromptProgress is implemented by displays that follow a run of a
// contract with declared prompt lengths. The runner calls Prompts before
// Start, then Prompt and Request for each measured request of the running
// worker (its warmup has neither), before that request's Tokens.
type PromptProgress interface {
	Prompts(mode PromptMode)
	// Prompt says a measured request of prompt id (tokens long) started.
	Prompt(id string, tokens int64)
	// Request gives the request's prefill seconds (UNKNOWN when its device
	// does not time it) and decode seconds, first token to last.
	Request(prefill editions.Obs[float64], decodeSeconds float64)
}

// progressTokens is what the display counts for one worker of cfg: its
// measured output tokens (measuredTokens), or under a prefill contract the
// prompt tokens it prefills.
func progressTokens(k *contracts.Contract, cat Catalog, c *Campaign, cfg *Configuration) int64 {
	if ProgressMode(k) != PromptsPrefill {
		return measuredTokens(k, cat, c, cfg)
	}
	positions := 0
	if m, err := cat.Shape(c, cfg); err == nil {
		positions = m.MaxPositions
	}
	var n int64
	for _, p := range k.PromptsFor(positions) {
		n += int64(p.Tokens)
	}
	return n
}

// startPrompts tells a display that can follow it the contract's prompt
// mode, before Start.
func startPrompts(prog Progress, k *contracts.Contract) {
	if pp, ok := prog.(PromptProgress); ok {
		if m := ProgressMode(k); m != 0 {
			pp.Prompts(m)
		}
	}
}

// progressLine hands one of the worker's progress lines to prog; lines it
// does not know, or cannot parse, are ignored (progress is not evidence).
func progressLine(prog Progress, line string) {
	name, val, _ := strings.Cut(line, " ")
	switch name {
	case ProgressTokens:
		if n, err := strconv.ParseInt(val, 10, 64); err == nil {
			prog.Tokens(n)
		}
	case ProgressPrompt:
		pp, ok := prog.(PromptProgress)
		id, tok, _ := strings.Cut(val, " ")
		n, err := strconv.ParseInt(tok, 10, 64)
		if ok && err == nil && id != "" {
			pp.Prompt(id, n)
		}
	case ProgressRequest:
		pp, ok := prog.(PromptProgress)
		pf, dec, _ := strings.Cut(val, " ")
		d, err := strconv.ParseFloat(dec, 64)
		if !ok || err != nil {
			return
		}
		prefill := editions.UnknownObs[float64]()
		if s, err := strconv.ParseFloat(pf, 64); err == nil {
			prefill = editions.Observed(s)
		}
		pp.Request(prefill, d)
	}
}

// FormatPromptLine and FormatRequestLine are the worker's two lines.
func FormatPromptLine(id string, tokens int) string {
	return fmt.Sprintf("%s %s %d", ProgressPrompt, id, tokens)
}

func FormatRequestLine(prefill editions.Obs[float64], decodeSeconds float64) string {
	pf := editions.Unknown
	if prefill.Ok() {
		pf = strconv.FormatFloat(prefill.Value, 'g', -1, 64)
	}
	return fmt.Sprintf("%s %s %s", ProgressRequest, pf, strconv.FormatFloat(decodeSeconds, 'g', -1, 64))
}

// promptTally is what a tally knows of a prompt-mode run (mode != 0).
type promptTally struct {
	mode PromptMode
	// The running worker's request in flight: its prompt, then its timings
	// (pending until its Tokens call).
	id            string
	promptTokens  int64
	prefill       editions.Obs[float64]
	decodeSeconds float64
	timed         bool // Request came for the request in flight
	// The running worker's measured requests so far.
	workerPrompt  int64   // prompt tokens
	workerPrefill float64 // Σ prefill seconds of the timed ones
	workerUntimed bool    // some request's prefill was not timed
	depths        []depthRate
}

// depthRate is one measured request's decode at its depth.
type depthRate struct {
	id     string
	tokens int64 // N - 1
	secs   float64
}

func (p *promptTally) worker() {
	*p = promptTally{mode: p.mode}
}

// request ends the request in flight with its n output tokens; it returns
// what the display counts of it (prompt tokens under a prefill contract,
// else n).
func (p *promptTally) request(n int64) int64 {
	count := n
	if p.mode == PromptsPrefill {
		count = p.promptTokens
	}
	p.workerPrompt += p.promptTokens
	switch {
	case !p.timed || !p.prefill.Ok():
		p.workerUntimed = true
	default:
		p.workerPrefill += p.prefill.Value
	}
	if p.mode == PromptsDepth && p.timed {
		p.depths = append(p.depths, depthRate{id: p.id, tokens: n - 1, secs: p.decodeSeconds})
	}
	p.id, p.promptTokens, p.timed = "", 0, false
	return count
}

// prefillText is the running worker's prefill rate, "410 prompt tok/s in
// prefill": its prompt tokens over their prefill seconds (the worker's
// timing, admission to the prompt's last logits), UNKNOWN where a
// request's prefill was not timed.
func (p *promptTally) prefillText() string {
	if p.workerUntimed || !(p.workerPrefill > 0) {
		return "prompt tok/s in prefill UNKNOWN (not timed)"
	}
	return strings.Replace(rateText(float64(p.workerPrompt)/p.workerPrefill), "tok/s", "prompt tok/s in prefill", 1)
}

// depthsText is the decode rate at each depth the running worker ran:
// "decode by depth: d0 336 tok/s, d64 303 tok/s".
func (p *promptTally) depthsText() string {
	var parts []string
	for _, d := range p.depths {
		r := "UNKNOWN"
		if d.tokens > 0 && d.secs > 0 {
			r = rateText(float64(d.tokens) / d.secs)
		}
		parts = append(parts, d.id+" "+r)
	}
	if len(parts) == 0 {
		return ""
	}
	return "; decode by depth: " + strings.Join(parts, ", ")
}

// running is the request in flight, for the bar: "prefilling pp64 (64
// tokens)", "decoding at depth d256 (256 tokens)".
func (p *promptTally) running() string {
	if p.id == "" {
		return "measuring"
	}
	if p.mode == PromptsPrefill {
		return fmt.Sprintf("prefilling %s (%d tokens)", p.id, p.promptTokens)
	}
	return fmt.Sprintf("measuring depth %s (%d tokens)", p.id, p.promptTokens)
}
