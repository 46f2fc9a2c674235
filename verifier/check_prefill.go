package verifier

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/horizon-runmap/horizon/editions"
)

// Check 4, continued: the isolated prefill rate per prompt length
// (configs/<id>.json /metrics/prefill_lengths), present exactly under a
// contract that declares its prompts' lengths (a prompt_rule:
// PERF-PREFILL-v1), one entry per contract prompt in contract order. Each
// entry is recomputed from the configuration's measured requests of that
// prompt, in block order, with code of its own: rate_i = prompt_tokens_i /
// prefill_seconds_i, their float64 mean in request order, gonum's empirical
// median of the sorted rates, and bootstrap-v1 of the mean (B resamples of
// n indices from PCG(seed, FNV-1a-64("<config>/<prompt>")), index = high
// bits of Uint64() * n, each resample's mean in draw order, bounds
// stat.Quantile(0.025) and (0.975) of the sorted means). Everything is
// compared exactly.
func checkPrefillLengths(v *view, c *configView, fs *findings) {
	f := c.path
	got := c.doc.Metrics.PrefillLengths
	t := v.terms
	if !t.declaredLengths() {
		if got != nil {
			fs.add(IDRecomputePrefillLength, f, "/metrics/prefill_lengths", "absent", "present",
				"the contract declares no prompt lengths: there is no prefill rate per length")
		}
		return
	}
	run := t.runs(configPositions(c))
	if len(got) != len(run) {
		fs.add(IDRecomputePrefillLength, f, "/metrics/prefill_lengths", len(run), len(got),
			"one entry per contract prompt (declared length) the model's context holds, in contract order")
		return
	}
	for i, ki := range run {
		id := t.Prompts[ki]
		p := ptr("metrics", "prefill_lengths", i)
		g := got[i]
		want := recomputePrefillLength(c, id)
		bad := func(member string, w, x any, what string) {
			fs.add(IDRecomputePrefillLength, f, p+member, w, x, "prompt %s: %s recomputed from raw (exact comparison, request order)", id, what)
		}
		if g.PromptID != id {
			bad("/prompt_id", id, g.PromptID, "the contract's prompt at this position")
		}
		if g.PromptTokens != t.PromptTokens[ki] {
			bad("/prompt_tokens", t.PromptTokens[ki], g.PromptTokens, "the contract's declared length")
		}
		if g.Requests != want.requests {
			bad("/requests", want.requests, g.Requests, "the measured requests of the prompt")
		}
		for _, x := range []struct {
			member    string
			want, got editions.Obs[float64]
			what      string
		}{
			{"/mean_tok_s", want.mean, g.MeanTokS, "mean of prompt_tokens / prefill_seconds"},
			{"/median_tok_s", want.median, g.MedianTokS, "empirical median of prompt_tokens / prefill_seconds"},
		} {
			obsFloatEq(fs, IDRecomputePrefillLength, f, p+x.member, x.want, x.got, fmt.Sprintf("prompt %s: %s", id, x.what))
		}
		switch iv := g.Interval; {
		case want.interval == nil && iv != nil:
			bad("/interval", nil, iv.Algorithm, "no interval: some request's prefill was not timed")
		case want.interval != nil && iv == nil:
			bad("/interval", "bootstrap-v1", nil, "the bootstrap-v1 interval of the mean")
		case iv != nil && *iv != *want.interval:
			bad("/interval", *want.interval, *iv, "bootstrap-v1 of the mean (algorithm, B, seed, level and bounds)")
		}
	}
}

// prefillLength is one prompt length's recomputation.
type prefillLength struct {
	requests     int
	mean, median editions.Obs[float64]
	interval     *editions.PrefillInterval
}

func recomputePrefillLength(c *configView, promptID string) prefillLength {
	out := prefillLength{mean: editions.UnknownObs[float64](), median: editions.UnknownObs[float64]()}
	var rates []float64
	timed := true
	for _, w := range c.workers {
		for _, r := range w.rec.Requests {
			if r.PromptID != promptID {
				continue
			}
			out.requests++
			if ps := r.PrefillSeconds; ps == nil || !ps.Ok() || !(ps.Value > 0) {
				timed = false
				continue
			}
			rates = append(rates, float64(r.PromptTokens)/r.PrefillSeconds.Value)
		}
	}
	n := len(rates)
	if !timed || n == 0 {
		return out
	}
	var sum float64
	for _, x := range rates {
		sum += x
	}
	out.mean = editions.Observed(sum / float64(n))

	var acc float64
	out.interval = bootstrapV1(c.id+"/"+promptID, n,
		func(k int) { acc += rates[k] },
		func() float64 { v := acc / float64(n); acc = 0; return v })
	sorted := slices.Clone(rates)
	slices.Sort(sorted)
	out.median = editions.Observed(stat.Quantile(0.5, stat.Empirical, sorted, nil))
	return out
}

// configPositions is the model context its first worker's record states
// (setup.model.max_positions; 0 when absent or unrecorded). Every worker
// of a configuration runs one artifact (checked elsewhere), and each block
// is held to its own record's context by checkRequests.
func configPositions(c *configView) int {
	for _, w := range c.workers {
		if w.rec != nil {
			return w.rec.Setup.Model.MaxPositions
		}
	}
	return 0
}

// bootstrapV1 is bootstrap-v1 over n samples on stream key, computed here
// on its own: B resamples of n indices from PCG(seed, FNV-1a-64(key)),
// index = the high bits of Uint64() * n, in draw order; add(k) takes sample
// k into the resample being drawn and done() returns its value (and starts
// the next); the bounds are stat.Quantile(0.025) and (0.975) of the sorted
// values.
func bootstrapV1(key string, n int, add func(k int), done func() float64) *editions.PrefillInterval {
	h := fnv.New64a()
	h.Write([]byte(key))
	src := rand.NewPCG(editions.BootstrapSeed, h.Sum64())
	vals := make([]float64, 0, editions.BootstrapResamples)
	for range editions.BootstrapResamples {
		for range n {
			k, _ := bits.Mul64(src.Uint64(), uint64(n))
			add(int(k))
		}
		vals = append(vals, done())
	}
	slices.Sort(vals)
	return &editions.PrefillInterval{
		Algorithm: editions.BootstrapV1, Resamples: editions.BootstrapResamples, Seed: editions.BootstrapSeed, Level: editions.BootstrapLevel,
		Lo: stat.Quantile(0.025, stat.Empirical, vals, nil), Hi: stat.Quantile(0.975, stat.Empirical, vals, nil),
	}
}
