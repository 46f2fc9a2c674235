package verifier

import (
	"fmt"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/horizon-runmap/horizon/editions"
)

// Check 4, continued: the decode rate per context depth
// (configs/<id>.json /metrics/decode_depths), present exactly under a
// contract that declares its prompts' lengths and decodes (a prompt_rule
// and output_tokens >= 2: PERF-DEPTH-v1), one entry per contract prompt
// the configuration's model context holds (contractTerms.runs), in
// contract order. Each entry is recomputed from the configuration's
// measured requests of that prompt, in block order, with code of its own:
// tokens_i = n_i - 1 and decode_seconds_i summed in float64, the pooled
// rate their ratio, the mean and gonum empirical median of the per-request
// rates, the time per output token (seconds over tokens), and bootstrap-v1
// of the pooled rate (B resamples of n indices from PCG(seed,
// FNV-1a-64("<config>/<prompt>/decode")), index = high bits of Uint64() *
// n, each resample's Σ tokens / Σ seconds in draw order, bounds
// stat.Quantile(0.025) and (0.975) of the sorted values). The depth's
// prefill rate is its prefill_lengths entry (checkPrefillLengths).
// Everything is compared exactly.
func checkDecodeDepths(v *view, c *configView, fs *findings) {
	f := c.path
	got := c.doc.Metrics.DecodeDepths
	t := v.terms
	if !t.decodeByPrompt() {
		if got != nil {
			fs.add(IDRecomputeDecodeDepth, f, "/metrics/decode_depths", "absent", "present",
				"the contract declares no prompt lengths with a decode interval: there is no decode rate per depth")
		}
		return
	}
	run := t.runs(configPositions(c))
	if len(got) != len(run) {
		fs.add(IDRecomputeDecodeDepth, f, "/metrics/decode_depths", len(run), len(got),
			"one entry per contract depth the model's context holds, in contract order")
		return
	}
	for i, ki := range run {
		id := t.Prompts[ki]
		p := ptr("metrics", "decode_depths", i)
		g := got[i]
		want := recomputeDecodeDepth(c, id)
		bad := func(member string, w, x any, what string) {
			fs.add(IDRecomputeDecodeDepth, f, p+member, w, x, "depth %s: %s recomputed from raw (exact comparison, request order)", id, what)
		}
		if g.PromptID != id {
			bad("/prompt_id", id, g.PromptID, "the contract's depth at this position")
		}
		if g.DepthTokens != t.PromptTokens[ki] {
			bad("/depth_tokens", t.PromptTokens[ki], g.DepthTokens, "the contract's declared length")
		}
		if g.Requests != want.requests {
			bad("/requests", want.requests, g.Requests, "the measured requests of the depth")
		}
		if g.DecodeTokens != want.tokens {
			bad("/decode_tokens", want.tokens, g.DecodeTokens, "sum(n - 1)")
		}
		if g.DecodeSeconds != want.seconds {
			bad("/decode_seconds", want.seconds, g.DecodeSeconds, "sum(decode_seconds)")
		}
		for _, x := range []struct {
			member    string
			want, got editions.Obs[float64]
			what      string
		}{
			{"/pooled_tok_s", want.pooled, g.PooledTokS, "sum(n - 1) / sum(decode_seconds)"},
			{"/mean_tok_s", want.mean, g.MeanTokS, "mean of (n - 1) / decode_seconds"},
			{"/median_tok_s", want.median, g.MedianTokS, "empirical median of (n - 1) / decode_seconds"},
			{"/tpot_s", want.tpot, g.TPOTS, "sum(decode_seconds) / sum(n - 1)"},
		} {
			obsFloatEq(fs, IDRecomputeDecodeDepth, f, p+x.member, x.want, x.got, fmt.Sprintf("depth %s: %s", id, x.what))
		}
		switch iv := g.Interval; {
		case want.interval == nil && iv != nil:
			bad("/interval", nil, iv.Algorithm, "no interval: the depth has no decode interval")
		case want.interval != nil && iv == nil:
			bad("/interval", "bootstrap-v1", nil, "the bootstrap-v1 interval of the pooled rate")
		case iv != nil && *iv != *want.interval:
			bad("/interval", *want.interval, *iv, "bootstrap-v1 of the pooled rate (algorithm, B, seed, level and bounds)")
		}
	}
}

// decodeDepth is one depth's recomputation.
type decodeDepth struct {
	requests                   int
	tokens                     int64
	seconds                    float64
	pooled, mean, median, tpot editions.Obs[float64]
	interval                   *editions.PrefillInterval
}

func recomputeDecodeDepth(c *configView, promptID string) decodeDepth {
	u := editions.UnknownObs[float64]()
	out := decodeDepth{pooled: u, mean: u, median: u, tpot: u}
	var toks []int64
	var secs []float64
	for _, w := range c.workers {
		for _, r := range w.rec.Requests {
			if r.PromptID != promptID {
				continue
			}
			out.requests++
			out.tokens += int64(r.N - 1)
			out.seconds += r.DecodeSeconds
			toks = append(toks, int64(r.N-1))
			secs = append(secs, r.DecodeSeconds)
		}
	}
	n := len(toks)
	if n == 0 || out.tokens == 0 || !(out.seconds > 0) {
		return out
	}
	rates := make([]float64, n)
	var sum float64
	for i := range toks {
		if !(secs[i] > 0) {
			return out
		}
		rates[i] = float64(toks[i]) / secs[i]
		sum += rates[i]
	}
	out.pooled = editions.Observed(float64(out.tokens) / out.seconds)
	out.mean = editions.Observed(sum / float64(n))
	out.tpot = editions.Observed(out.seconds / float64(out.tokens))
	sorted := slices.Clone(rates)
	slices.Sort(sorted)
	out.median = editions.Observed(stat.Quantile(0.5, stat.Empirical, sorted, nil))

	var tok int64
	var sec float64
	out.interval = bootstrapV1(c.id+"/"+promptID+"/decode", n,
		func(k int) { tok += toks[k]; sec += secs[k] },
		func() float64 { v := float64(tok) / sec; tok, sec = 0, 0; return v })
	return out
}
