package report

import (
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/stat"

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
	rng := rand.NewPCG(seed, bootstrapStream(configID))
	pooled := make([]float64, u.Resamples)
	ttft := make([]float64, u.Resamples)
	for b := range u.Resamples {
		var tok int64
		var sec, t float64
		for range n {
			hi, _ := bits.Mul64(rng.Uint64(), uint64(n))
			r := reqs[hi]
			tok += r.tokens
			sec += r.decode
			t += r.ttft
		}
		pooled[b] = float64(tok) / sec
		ttft[b] = t / float64(n)
	}
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
