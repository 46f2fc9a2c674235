package report

import (
	"fmt"

	"github.com/horizon-runmap/horizon/editions"
)

// Claims lists the edition's claims: for each configuration its pooled
// decode rate (with numerator and denominator), overall output rate
// (likewise), TTFT mean, H2D bytes, and the RSS and VRAM peaks where they
// were observed. Every value is its source rounded to Decimals.
func Claims(c *Campaign, docs []editions.ConfigDoc) editions.ClaimsDoc {
	out := editions.ClaimsDoc{Schema: editions.SchemaClaims, Version: editions.Version, Edition: c.Edition, Claims: []editions.Claim{}}
	for i := range docs {
		d := &docs[i]
		file := editions.ConfigPath(d.ID)
		ref := func(ptr string, v float64) *editions.SourceRef {
			return &editions.SourceRef{File: file, Pointer: ptr, Value: v}
		}
		who := fmt.Sprintf("%s (%s, capacity %d/%d, %s, %s)", d.ID, editions.CheckpointLabel(d.Checkpoint), d.Capacity, d.ExpertsPerLayer, d.Executor, d.Device)
		add := func(metric, unit string, decimals int, v float64, statement string, num, den *editions.SourceRef) {
			out.Claims = append(out.Claims, editions.Claim{
				ID: d.ID + "." + metric, Statement: statement, Value: Round(v, decimals), Unit: unit, Decimals: decimals,
				Source: *ref("/metrics/"+metric, v), Numerator: num, Denominator: den,
				Evidence: c.Evidence, Validation: "valid", Publication: c.Publication, Reproduction: "not_attempted",
			})
		}
		// withInterval gives the last claim its bootstrap interval, at
		// /uncertainty/<metric>/lo and /hi, when the configuration has one.
		withInterval := func(metric string, iv func(u *editions.Uncertainty) editions.Interval) {
			u := d.Uncertainty
			if u == nil {
				return
			}
			x := iv(u)
			out.Claims[len(out.Claims)-1].Interval = &editions.ClaimInterval{Algorithm: u.Algorithm, Level: u.Level,
				Lo: *ref("/uncertainty/"+metric+"/lo", x.Lo), Hi: *ref("/uncertainty/"+metric+"/hi", x.Hi)}
		}
		m := d.Metrics
		// With one output token per request there is no decode interval:
		// no pooled decode claim (its metric is UNKNOWN).
		if m.PooledDecodeTokS.Ok() {
			add("pooled_decode_tok_s", "tokens/s", 2, m.PooledDecodeTokS.Value,
				fmt.Sprintf("%s: pooled decode rate over %d measured requests, sum(N-1) / sum(decode seconds), first-token wait excluded", who, d.Requests),
				ref("/metrics/decode_tokens", float64(m.DecodeTokens)), ref("/metrics/decode_seconds", m.DecodeSeconds))
			withInterval("pooled_decode_tok_s", func(u *editions.Uncertainty) editions.Interval { return u.PooledDecodeTokS })
		}
		add("overall_output_tok_s", "tokens/s", 2, m.OverallOutputTokS,
			fmt.Sprintf("%s: overall output rate over %d measured requests, sum(N) / sum(runtime seconds), admission to last token", who, d.Requests),
			ref("/metrics/output_tokens", float64(m.OutputTokens)), ref("/metrics/runtime_seconds", m.RuntimeSeconds))
		add("ttft_mean_s", "s", 4, m.TTFTMeanS,
			fmt.Sprintf("%s: mean time to first token (admission to first token, prefill included) over %d measured requests", who, d.Requests), nil, nil)
		withInterval("ttft_mean_s", func(u *editions.Uncertainty) editions.Interval { return u.TTFTMeanS })
		if p := m.Prefill; p != nil && p.TokS.Ok() {
			out.Claims = append(out.Claims, editions.Claim{
				ID: d.ID + ".prefill_tok_s", Value: Round(p.TokS.Value, 2), Unit: "tokens/s", Decimals: 2,
				Statement: fmt.Sprintf("%s: isolated prefill rate over %d measured requests, sum(prompt tokens) / sum(prefill seconds), admission to the prompt's last logits before selection", who, d.Requests),
				Source:    *ref("/metrics/prefill/tok_s", p.TokS.Value),
				Numerator: ref("/metrics/prefill/prompt_tokens", float64(p.PromptTokens)), Denominator: ref("/metrics/prefill/seconds", p.Seconds.Value),
				Evidence: c.Evidence, Validation: "valid", Publication: c.Publication, Reproduction: "not_attempted",
			})
		}
		for i, pl := range m.PrefillLengths {
			out.Claims = append(out.Claims, PrefillLengthClaims(d, i, pl, c.Evidence, c.Publication)...)
		}
		for i, dd := range m.DecodeDepths {
			out.Claims = append(out.Claims, DecodeDepthClaims(d, i, dd, c.Evidence, c.Publication)...)
		}
		add("h2d_bytes", "bytes", 0, float64(m.H2DBytes),
			fmt.Sprintf("%s: host-to-device expert bytes summed over %d measured requests (not a rate)", who, d.Requests), nil, nil)
		if m.RSSPeakBytes.Ok() {
			add("rss_peak_bytes", "bytes", 0, float64(m.RSSPeakBytes.Value),
				fmt.Sprintf("%s: whole-worker RSS peak (VmHWM), maximum over %d workers", who, d.Blocks), nil, nil)
		}
		if m.VRAMPeakBytes.Ok() {
			add("vram_peak_bytes", "bytes", 0, float64(m.VRAMPeakBytes.Value),
				fmt.Sprintf("%s: device-wide whole-worker VRAM peak (preparation and warmup included), maximum over %d workers", who, d.Blocks), nil, nil)
		}
	}
	return out
}

// PrefillLengthClaims are the claims of one prompt length (entry i of
// d.Metrics.PrefillLengths) where its rates were observed: the mean prompt
// rate with its bootstrap interval, and the median.
// Claim ids are <config>.prefill_lengths.<prompt id>.<stat>.
func PrefillLengthClaims(d *editions.ConfigDoc, i int, pl editions.PrefillLength, evidence, publication string) []editions.Claim {
	if !pl.MeanTokS.Ok() || !pl.MedianTokS.Ok() || pl.Interval == nil {
		return nil
	}
	file := editions.ConfigPath(d.ID)
	base := fmt.Sprintf("/metrics/prefill_lengths/%d/", i)
	who := fmt.Sprintf("%s (%s, capacity %d/%d, %s, %s)", d.ID, editions.CheckpointLabel(d.Checkpoint), d.Capacity, d.ExpertsPerLayer, d.Executor, d.Device)
	claim := func(stat string, v float64, statement string) editions.Claim {
		return editions.Claim{
			ID: d.ID + ".prefill_lengths." + pl.PromptID + "." + stat, Statement: who + ": " + statement,
			Value: Round(v, 2), Unit: "tokens/s", Decimals: 2,
			Source:   editions.SourceRef{File: file, Pointer: base + stat, Value: v},
			Evidence: evidence, Validation: "valid", Publication: publication, Reproduction: "not_attempted",
		}
	}
	mean := claim("mean_tok_s", pl.MeanTokS.Value, PrefillLengthStatement("mean", pl))
	iv := pl.Interval
	mean.Interval = &editions.ClaimInterval{Algorithm: iv.Algorithm, Level: iv.Level,
		Lo: editions.SourceRef{File: file, Pointer: base + "interval/lo", Value: iv.Lo},
		Hi: editions.SourceRef{File: file, Pointer: base + "interval/hi", Value: iv.Hi}}
	return []editions.Claim{mean, claim("median_tok_s", pl.MedianTokS.Value, PrefillLengthStatement("median", pl))}
}

// PrefillLengthStatement is the text of a prompt length's mean or median
// claim after "<who>: ".
func PrefillLengthStatement(stat string, pl editions.PrefillLength) string {
	return fmt.Sprintf("%s isolated prefill rate of the %d-token prompt %s over %d measured requests, prompt tokens / prefill seconds per request, admission to the prompt's last logits before selection",
		stat, pl.PromptTokens, pl.PromptID, pl.Requests)
}

// DecodeDepthClaims are the claims of one context depth (entry i of
// d.Metrics.DecodeDepths) where its decode was observed: the pooled rate
// with its numerator, denominator and bootstrap interval, the mean and
// median of the per-request rates, and the time per output token. Claim
// ids are <config>.decode_depths.<prompt id>.<stat>. The depth's prefill
// rate is claimed by PrefillLengthClaims.
func DecodeDepthClaims(d *editions.ConfigDoc, i int, dd editions.DecodeDepth, evidence, publication string) []editions.Claim {
	if !dd.PooledTokS.Ok() || !dd.MeanTokS.Ok() || !dd.MedianTokS.Ok() || !dd.TPOTS.Ok() || dd.Interval == nil {
		return nil
	}
	file := editions.ConfigPath(d.ID)
	base := fmt.Sprintf("/metrics/decode_depths/%d/", i)
	who := fmt.Sprintf("%s (%s, capacity %d/%d, %s, %s)", d.ID, editions.CheckpointLabel(d.Checkpoint), d.Capacity, d.ExpertsPerLayer, d.Executor, d.Device)
	ref := func(member string, v float64) *editions.SourceRef {
		return &editions.SourceRef{File: file, Pointer: base + member, Value: v}
	}
	claim := func(stat, unit string, decimals int, v float64) editions.Claim {
		return editions.Claim{
			ID: d.ID + ".decode_depths." + dd.PromptID + "." + stat, Statement: who + ": " + DecodeDepthStatement(stat, dd),
			Value: Round(v, decimals), Unit: unit, Decimals: decimals, Source: *ref(stat, v),
			Evidence: evidence, Validation: "valid", Publication: publication, Reproduction: "not_attempted",
		}
	}
	pooled := claim("pooled_tok_s", "tokens/s", 2, dd.PooledTokS.Value)
	pooled.Numerator, pooled.Denominator = ref("decode_tokens", float64(dd.DecodeTokens)), ref("decode_seconds", dd.DecodeSeconds)
	iv := dd.Interval
	pooled.Interval = &editions.ClaimInterval{Algorithm: iv.Algorithm, Level: iv.Level,
		Lo: *ref("interval/lo", iv.Lo), Hi: *ref("interval/hi", iv.Hi)}
	return []editions.Claim{pooled,
		claim("mean_tok_s", "tokens/s", 2, dd.MeanTokS.Value),
		claim("median_tok_s", "tokens/s", 2, dd.MedianTokS.Value),
		claim("tpot_s", "s", 6, dd.TPOTS.Value),
	}
}

// DecodeDepthStatement is the text of a depth's claim after "<who>: ".
func DecodeDepthStatement(stat string, dd editions.DecodeDepth) string {
	what := map[string]string{
		"pooled_tok_s": "pooled decode rate, sum(N-1) / sum(decode seconds),",
		"mean_tok_s":   "mean of the per-request decode rates (N-1) / decode seconds",
		"median_tok_s": "median of the per-request decode rates (N-1) / decode seconds",
		"tpot_s":       "time per output token after the first, sum(decode seconds) / sum(N-1),",
	}[stat]
	return fmt.Sprintf("%s at context depth %d (prompt %s) over %d measured requests, first token to last: the depth's prefill and the first-token wait excluded",
		what, dd.DepthTokens, dd.PromptID, dd.Requests)
}
