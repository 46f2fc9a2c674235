package verifier

import (
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/horizon-runmap/horizon/editions"
)

// Check 4, continued: a configuration document's uncertainty (optional;
// editions made before bootstrap-v1 have none) is recomputed from the raw
// records with the declared algorithm and seed and compared exactly. The
// algorithm is written out in editions.BootstrapV1 and implemented here on
// its own, as the rest of check 4 is. The algorithm id fixes B, the level,
// the quantile rule and the seed (editions.BootstrapSeed: a free seed could
// be searched for a flattering interval).
func checkUncertainty(c *configView, fs *findings) {
	u := c.doc.Uncertainty
	if u == nil {
		return
	}
	f := c.path
	terms := true
	for _, x := range []struct {
		p         string
		want, got any
	}{
		{"/uncertainty/algorithm", editions.BootstrapV1, u.Algorithm},
		{"/uncertainty/resamples", editions.BootstrapResamples, u.Resamples},
		{"/uncertainty/level", editions.BootstrapLevel, u.Level},
		{"/uncertainty/quantiles", editions.QuantilesEmpiricalV1, u.Quantiles},
		{"/uncertainty/seed", editions.BootstrapSeed, u.Seed},
	} {
		if x.want != x.got {
			fs.add(IDRecomputeBootstrap, f, x.p, x.want, x.got, "the verifier knows bootstrap-v1 with B = %d, level %v, seed %d and %s quantiles only",
				editions.BootstrapResamples, editions.BootstrapLevel, editions.BootstrapSeed, editions.QuantilesEmpiricalV1)
			terms = false
		}
	}
	if !terms {
		return
	}
	// The request list, in block then record order.
	var tokens []int64
	var decode, ttft []float64
	for _, w := range c.workers {
		for _, r := range w.rec.Requests {
			tokens = append(tokens, int64(r.N)-1)
			decode = append(decode, r.DecodeSeconds)
			ttft = append(ttft, r.TTFTSeconds)
		}
	}
	n := len(tokens)
	if n == 0 || slices.ContainsFunc(decode, func(s float64) bool { return !(s > 0) }) {
		fs.add(IDRecomputeBootstrap, f, "/uncertainty", nil, nil,
			"an uncertainty is written, but some measured request has no decode time (or there is none): bootstrap-v1 is undefined")
		return
	}

	// Bootstrap: B resamples of n indices from PCG(seed, FNV-1a-64(id)).
	h := fnv.New64a()
	h.Write([]byte(c.id))
	src := rand.NewPCG(u.Seed, h.Sum64())
	pooled := make([]float64, 0, editions.BootstrapResamples)
	means := make([]float64, 0, editions.BootstrapResamples)
	for range editions.BootstrapResamples {
		var tok int64
		var sec, tt float64
		for range n {
			k, _ := bits.Mul64(src.Uint64(), uint64(n))
			tok += tokens[k]
			sec += decode[k]
			tt += ttft[k]
		}
		pooled = append(pooled, float64(tok)/sec)
		means = append(means, tt/float64(n))
	}
	const lo, hi = 0.025, 0.975 // the literals of bootstrap-v1, not (1-level)/2
	slices.Sort(pooled)
	slices.Sort(means)
	q := func(p float64, sorted []float64) float64 { return stat.Quantile(p, stat.Empirical, sorted, nil) }
	eq := func(id, p string, want, got float64, what string) {
		if want != got {
			fs.add(id, f, "/uncertainty/"+p, num(want), got, "%s recomputed from raw (exact comparison)", what)
		}
	}
	eq(IDRecomputeBootstrap, "pooled_decode_tok_s/lo", q(lo, pooled), u.PooledDecodeTokS.Lo, "bootstrap-v1 2.5% bound of pooled decode")
	eq(IDRecomputeBootstrap, "pooled_decode_tok_s/hi", q(hi, pooled), u.PooledDecodeTokS.Hi, "bootstrap-v1 97.5% bound of pooled decode")
	eq(IDRecomputeBootstrap, "ttft_mean_s/lo", q(lo, means), u.TTFTMeanS.Lo, "bootstrap-v1 2.5% bound of the TTFT mean")
	eq(IDRecomputeBootstrap, "ttft_mean_s/hi", q(hi, means), u.TTFTMeanS.Hi, "bootstrap-v1 97.5% bound of the TTFT mean")

	// Per-request quantiles.
	rate := make([]float64, n)
	for i := range n {
		rate[i] = float64(tokens[i]) / decode[i]
	}
	slices.Sort(rate)
	slices.Sort(ttft)
	for _, x := range []struct {
		p    float64
		name string
		r, t float64
	}{
		{0.5, "p50", u.RequestDecodeTok.P50, u.RequestTTFTS.P50},
		{0.9, "p90", u.RequestDecodeTok.P90, u.RequestTTFTS.P90},
		{0.99, "p99", u.RequestDecodeTok.P99, u.RequestTTFTS.P99},
	} {
		eq(IDRecomputeQuantiles, "request_decode_tok_s/"+x.name, q(x.p, rate), x.r, x.name+" of per-request decode rate (N-1)/decode_seconds")
		eq(IDRecomputeQuantiles, "request_ttft_s/"+x.name, q(x.p, ttft), x.t, x.name+" of per-request TTFT")
	}
}
