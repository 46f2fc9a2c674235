package report

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/stat"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// DefaultBootstrapSeed is the seed the runner declares in every new
// configuration document's uncertainty (editions.BootstrapV1).
const DefaultBootstrapSeed = editions.BootstrapSeed

// sample is one measured request's share of the bootstrap statistics.
type sample struct {
	tokens int64   // N - 1
	decode float64 // decode_seconds
	ttft   float64 // ttft_seconds
}

// bootstrapStream is the PCG stream of a configuration: FNV-1a-64 of its id,
// so configurations of one edition draw independent index sequences.
func bootstrapStream(configID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(configID))
	return h.Sum64()
}

// Uncertainty computes editions.BootstrapV1 and editions.QuantilesEmpiricalV1
// over a configuration's measured requests: its raw records' requests in
// block, then record order. It returns nil when there is no request or some request has no decode time
// (a per-request rate and a resample's pooled decode would be undefined).
func Uncertainty(configID string, seed uint64, recs []*editions.RawRecord) *editions.Uncertainty {
	var reqs []sample
	for _, rec := range recs {
		for _, q := range rec.Requests {
			reqs = append(reqs, sample{tokens: int64(q.N) - 1, decode: q.DecodeSeconds, ttft: q.TTFTSeconds})
		}
	}
	n := len(reqs)
	if n == 0 {
		return nil
	}
	for _, r := range reqs {
		if !(r.decode > 0) {
			return nil
		}
	}
	u := &editions.Uncertainty{
		Algorithm: editions.BootstrapV1, Resamples: editions.BootstrapResamples, Seed: seed,
		Level: editions.BootstrapLevel, Quantiles: editions.QuantilesEmpiricalV1,
	}
	pooled := make([]float64, u.Resamples)
	ttft := make([]float64, u.Resamples)
	var tok int64
	var sec, t float64
	resample(seed, bootstrapStream(configID), n, u.Resamples, func(k int) {
		r := reqs[k]
		tok += r.tokens
		sec += r.decode
		t += r.ttft
	}, func(b int) {
		pooled[b] = float64(tok) / sec
		ttft[b] = t / float64(n)
		tok, sec, t = 0, 0, 0
	})
	u.PooledDecodeTokS = interval(pooled)
	u.TTFTMeanS = interval(ttft)

	rate := make([]float64, n)
	tt := make([]float64, n)
	for i, r := range reqs {
		rate[i] = float64(r.tokens) / r.decode
		tt[i] = r.ttft
	}
	u.RequestDecodeTok = percentiles(rate)
	u.RequestTTFTS = percentiles(tt)
	return u
}

// resample is bootstrap-v1's draw: B resamples of n indices with
// replacement from PCG(seed, stream), index k = the high 64 bits of
// Uint64() * n. draw(k) sees each index of a resample in draw order, done(b)
// ends resample b.
func resample(seed, stream uint64, n, resamples int, draw func(k int), done func(b int)) {
	rng := rand.NewPCG(seed, stream)
	for b := range resamples {
		for range n {
			hi, _ := bits.Mul64(rng.Uint64(), uint64(n))
			draw(int(hi))
		}
		done(b)
	}
}

// PrefillLengths is each contract prompt's isolated prefill rate over a
// configuration's measured requests of that prompt (editions.PrefillLength),
// in contract order, for the prompts its model's context holds
// (contracts.PromptsFor): rate_i = prompt_tokens_i / prefill_seconds_i, their
// mean and median, and bootstrap-v1 of the mean (resample, interval: the
// machinery of Uncertainty) on the stream of editions.PrefillStream. A
// length with an untimed request has UNKNOWN rates and no interval.
func PrefillLengths(configID string, seed uint64, k *contracts.Contract, recs []*editions.RawRecord) ([]editions.PrefillLength, error) {
	run := k.PromptsFor(recordPositions(recs))
	out := make([]editions.PrefillLength, len(run))
	for i, p := range run {
		pl := editions.PrefillLength{PromptID: p.ID, PromptTokens: p.Tokens,
			MeanTokS: editions.UnknownObs[float64](), MedianTokS: editions.UnknownObs[float64]()}
		reqs, err := promptRequests(recs, p)
		if err != nil {
			return nil, err
		}
		var rates []float64
		timed := true
		for _, q := range reqs {
			pl.Requests++
			if ps := q.PrefillSeconds; ps == nil || !ps.Ok() || !(ps.Value > 0) {
				timed = false
				continue
			}
			rates = append(rates, float64(q.PromptTokens)/q.PrefillSeconds.Value)
		}
		if timed {
			n := len(rates)
			var sum float64
			for _, x := range rates {
				sum += x
			}
			pl.MeanTokS = editions.Observed(sum / float64(n))
			iv := &editions.PrefillInterval{Algorithm: editions.BootstrapV1, Resamples: editions.BootstrapResamples,
				Seed: seed, Level: editions.BootstrapLevel}
			means := make([]float64, iv.Resamples)
			var acc float64
			resample(seed, bootstrapStream(editions.PrefillStream(configID, p.ID)), n, iv.Resamples,
				func(k int) { acc += rates[k] },
				func(b int) { means[b], acc = acc/float64(n), 0 })
			x := interval(means)
			iv.Lo, iv.Hi = x.Lo, x.Hi
			pl.Interval = iv
			sorted := append([]float64(nil), rates...)
			sort.Float64s(sorted)
			pl.MedianTokS = editions.Observed(stat.Quantile(0.5, stat.Empirical, sorted, nil))
		}
		out[i] = pl
	}
	return out, nil
}

// interval is the 95% percentile interval of xs (sorted in place). The
// probabilities are the literals 0.025 and 0.975: (1-0.95)/2 in float64 is
// 0.025000000000000022, which would move the empirical quantile of 2000
// values by one order statistic.
func interval(xs []float64) editions.Interval {
	sort.Float64s(xs)
	return editions.Interval{
		Lo: stat.Quantile(0.025, stat.Empirical, xs, nil),
		Hi: stat.Quantile(0.975, stat.Empirical, xs, nil),
	}
}

// percentiles are p50/p90/p99 of xs (sorted in place).
func percentiles(xs []float64) editions.Percentiles {
	sort.Float64s(xs)
	q := func(p float64) float64 { return stat.Quantile(p, stat.Empirical, xs, nil) }
	return editions.Percentiles{P50: q(0.5), P90: q(0.9), P99: q(0.99)}
}

// promptRequests are the measured requests of prompt p in block order,
// each holding p's declared length; an error when one does not, or when
// there is none.
func promptRequests(recs []*editions.RawRecord, p contracts.Prompt) ([]editions.Request, error) {
	var out []editions.Request
	for _, r := range recs {
		for _, q := range r.Requests {
			if q.PromptID != p.ID {
				continue
			}
			if q.PromptTokens != p.Tokens {
				return nil, fmt.Errorf("block %d request %d (%s): %d prompt tokens, the contract declares %d", r.Block, q.Index, p.ID, q.PromptTokens, p.Tokens)
			}
			out = append(out, q)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("prompt %s: no measured request", p.ID)
	}
	return out, nil
}

// recordPositions is the model context (max_position_embeddings) a
// configuration's records state, 0 when they do not (records made before
// it: every prompt ran).
func recordPositions(recs []*editions.RawRecord) int {
	if len(recs) == 0 {
		return 0
	}
	return recs[0].Setup.Model.MaxPositions
}

// DecodeDepths is each context depth's decode over a configuration's
// measured requests of that prompt (editions.DecodeDepth), in contract
// order, for the prompts its model's context holds: pooled decode
// Σ(N_i - 1) / Σ decode_seconds_i, the mean and median of the per-request
// rates, the time per output token, and bootstrap-v1 of the pooled rate
// (resample, interval: the machinery of Uncertainty) on the stream of
// editions.DepthStream.
func DecodeDepths(configID string, seed uint64, k *contracts.Contract, recs []*editions.RawRecord) ([]editions.DecodeDepth, error) {
	run := k.PromptsFor(recordPositions(recs))
	out := make([]editions.DecodeDepth, len(run))
	for i, p := range run {
		dd := editions.DecodeDepth{PromptID: p.ID, DepthTokens: p.Tokens,
			PooledTokS: editions.UnknownObs[float64](), MeanTokS: editions.UnknownObs[float64](),
			MedianTokS: editions.UnknownObs[float64](), TPOTS: editions.UnknownObs[float64]()}
		type sample struct {
			tokens  int64
			seconds float64
		}
		reqs, err := promptRequests(recs, p)
		if err != nil {
			return nil, err
		}
		var samples []sample
		for _, q := range reqs {
			dd.Requests++
			dd.DecodeTokens += int64(q.N - 1)
			dd.DecodeSeconds += q.DecodeSeconds
			samples = append(samples, sample{int64(q.N - 1), q.DecodeSeconds})
		}
		pooled, err := decodeRate(dd.DecodeTokens, dd.DecodeSeconds)
		if err != nil {
			return nil, fmt.Errorf("depth %s: %w", p.ID, err)
		}
		dd.PooledTokS = pooled
		if pooled.Ok() {
			rates := make([]float64, len(samples))
			var sum float64
			for j, x := range samples {
				if !(x.seconds > 0) {
					return nil, fmt.Errorf("depth %s: a request decoded %d tokens in %v s", p.ID, x.tokens, x.seconds)
				}
				rates[j] = float64(x.tokens) / x.seconds
				sum += rates[j]
			}
			n := len(rates)
			dd.MeanTokS = editions.Observed(sum / float64(n))
			dd.TPOTS = editions.Observed(dd.DecodeSeconds / float64(dd.DecodeTokens))
			sorted := append([]float64(nil), rates...)
			sort.Float64s(sorted)
			dd.MedianTokS = editions.Observed(stat.Quantile(0.5, stat.Empirical, sorted, nil))
			iv := &editions.PrefillInterval{Algorithm: editions.BootstrapV1, Resamples: editions.BootstrapResamples,
				Seed: seed, Level: editions.BootstrapLevel}
			vals := make([]float64, iv.Resamples)
			var tok int64
			var sec float64
			resample(seed, bootstrapStream(editions.DepthStream(configID, p.ID)), n, iv.Resamples,
				func(k int) { tok += samples[k].tokens; sec += samples[k].seconds },
				func(b int) { vals[b], tok, sec = float64(tok)/sec, 0, 0 })
			x := interval(vals)
			iv.Lo, iv.Hi = x.Lo, x.Hi
			dd.Interval = iv
		}
		out[i] = dd
	}
	return out, nil
}
