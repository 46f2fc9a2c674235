package report

import (
	"fmt"
	"math"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// Aggregate computes a configuration's document from its workers' raw
// records, given in block order. Every metric follows DESIGN section 8 and
// the contract: sums run in request order (block, then prompt order) in
// float64, means divide those sums, and whole-worker peaks are the maximum
// over workers. With one output token per request there is no decode
// interval: the decode rate and block spread are UNKNOWN. Under a contract
// with declared prompt lengths (k.PromptRule) it adds each length's prefill
// rate (PrefillLengths), and with a decode interval each depth's decode
// (DecodeDepths). An observation some worker lacks stays UNKNOWN; one every
// worker reports UNSUPPORTED stays UNSUPPORTED. The uncertainty is
// editions.BootstrapV1 under DefaultBootstrapSeed (see Uncertainty).
func Aggregate(c *Campaign, k *contracts.Contract, cfg *Configuration, recs []*editions.RawRecord) (editions.ConfigDoc, error) {
	if len(recs) == 0 {
		return editions.ConfigDoc{}, fmt.Errorf("configuration %s: no raw records", cfg.ID)
	}
	first := recs[0]
	d := editions.ConfigDoc{
		Schema: editions.SchemaConfig, Version: editions.Version, ID: cfg.ID, Device: c.Device,
		Model: first.Setup.Model, Checkpoint: first.Checkpoint, Artifact: first.Artifact,
		ExpertFormat: first.Artifact.ExpertFormat, Capacity: first.Setup.Capacity,
		ExpertsPerLayer: first.Setup.Model.ExpertsPerLayer, Executor: first.Setup.Executor,
		SeedExecutor: cfg.SeedExecutor, Placement: first.Setup.Placement, Policy: first.Setup.Policy,
		Regime: first.Setup.Regime, Blocks: len(recs),
	}
	m := &d.Metrics
	var ttftSum float64
	pf := prefillSum{}
	var vram, vramProc, rss []editions.Obs[int64]
	inv := make([][]editions.Obs[int64], 5)
	for bi, r := range recs {
		if r.Block != bi+1 || r.ConfigID != cfg.ID {
			return d, fmt.Errorf("configuration %s: record %d is %s block %d", cfg.ID, bi, r.ConfigID, r.Block)
		}
		if r.Artifact.SHA256 != first.Artifact.SHA256 || r.Checkpoint.SHA256 != first.Checkpoint.SHA256 {
			return d, fmt.Errorf("configuration %s: block %d ran another artifact or checkpoint than block 1", cfg.ID, r.Block)
		}
		d.Workers = append(d.Workers, editions.RawPath(cfg.ID, r.Block))
		var blockTokens int64
		var blockSeconds float64
		for _, q := range r.Requests {
			n := int64(q.N)
			m.DecodeTokens += n - 1
			m.DecodeSeconds += q.DecodeSeconds
			m.OutputTokens += n
			m.RuntimeSeconds += q.RuntimeSeconds
			ttftSum += q.TTFTSeconds
			pf.add(q)
			m.H2DBytes += q.Cache.H2DBytes
			m.Misses += q.Cache.Misses
			m.Hits += q.Cache.Hits
			blockTokens += n - 1
			blockSeconds += q.DecodeSeconds
			for i, o := range []editions.Obs[int64]{q.Cache.D2HExpertBytes, q.Cache.Writebacks, q.Cache.AuthorityWrites,
				q.Cache.RequestHashBytes, q.Cache.RequestArtifactReads} {
				inv[i] = append(inv[i], o)
			}
			d.Requests++
		}
		rate, err := decodeRate(blockTokens, blockSeconds)
		if err != nil {
			return d, fmt.Errorf("configuration %s block %d: %w", cfg.ID, r.Block, err)
		}
		switch {
		case bi == 0:
			m.BlockSpread = editions.Spread{Min: rate, Max: rate}
		case rate.Ok() != m.BlockSpread.Min.Ok():
			return d, fmt.Errorf("configuration %s block %d: a decode interval in some blocks and none in others", cfg.ID, r.Block)
		case rate.Ok():
			m.BlockSpread.Min.Value = math.Min(m.BlockSpread.Min.Value, rate.Value)
			m.BlockSpread.Max.Value = math.Max(m.BlockSpread.Max.Value, rate.Value)
		}
		vram = append(vram, r.Observations.VRAMPeakBytes)
		vramProc = append(vramProc, r.Observations.VRAMProcessPeakBytes)
		rss = append(rss, r.Observations.RSSPeakBytes)
	}
	if m.RuntimeSeconds <= 0 || d.Requests == 0 {
		return d, fmt.Errorf("configuration %s: no measured time", cfg.ID)
	}
	var err error
	if m.PooledDecodeTokS, err = decodeRate(m.DecodeTokens, m.DecodeSeconds); err != nil {
		return d, fmt.Errorf("configuration %s: %w", cfg.ID, err)
	}
	m.OverallOutputTokS = float64(m.OutputTokens) / m.RuntimeSeconds
	m.TTFTMeanS = ttftSum / float64(d.Requests)
	m.ResponseMeanS = m.RuntimeSeconds / float64(d.Requests)
	m.VRAMPeakBytes = MaxObs(vram)
	m.VRAMProcessPeakBytes = MaxObs(vramProc)
	m.RSSPeakBytes = MaxObs(rss)
	m.Prefill = pf.metrics()
	if k.PromptRule != nil {
		if m.PrefillLengths, err = PrefillLengths(cfg.ID, DefaultBootstrapSeed, k, recs); err != nil {
			return d, fmt.Errorf("configuration %s: %w", cfg.ID, err)
		}
	}
	if k.DecodeByPrompt() {
		if m.DecodeDepths, err = DecodeDepths(cfg.ID, DefaultBootstrapSeed, k, recs); err != nil {
			return d, fmt.Errorf("configuration %s: %w", cfg.ID, err)
		}
	}
	d.Uncertainty = Uncertainty(cfg.ID, DefaultBootstrapSeed, recs)
	d.Invariants = editions.Invariants{
		D2HExpertBytes: SumObs(inv[0]), Writebacks: SumObs(inv[1]), AuthorityWrites: SumObs(inv[2]),
		RequestHashBytes: SumObs(inv[3]), RequestArtifactReads: SumObs(inv[4]),
	}
	return d, nil
}

// decodeRate is tokens / seconds, the pooled decode rate of some requests:
// UNKNOWN when they have no decode interval (every N is 1, so no tokens
// follow the first), an error when tokens were decoded in no time.
func decodeRate(tokens int64, seconds float64) (editions.Obs[float64], error) {
	switch {
	case tokens == 0:
		return editions.UnknownObs[float64](), nil
	case !(seconds > 0):
		return editions.Obs[float64]{}, fmt.Errorf("%d decoded tokens in %v s: no decode time", tokens, seconds)
	}
	return editions.Observed(float64(tokens) / seconds), nil
}

// prefillSum sums the measured requests' prompt tokens and prefill times
// in request order.
type prefillSum struct {
	tokens        int64
	seconds       float64
	timed, absent int // requests with an observed time, with no field
	requests      int
}

func (p *prefillSum) add(q editions.Request) {
	p.requests++
	p.tokens += int64(q.PromptTokens)
	switch {
	case q.PrefillSeconds == nil:
		p.absent++
	case q.PrefillSeconds.Ok():
		p.timed++
		p.seconds += q.PrefillSeconds.Value
	}
}

// metrics is the configuration's Prefill: nil when no record carries the
// field (records made before it), UNKNOWN unless every request was timed.
func (p *prefillSum) metrics() *editions.Prefill {
	if p.requests == 0 || p.absent == p.requests {
		return nil
	}
	out := &editions.Prefill{PromptTokens: p.tokens, Seconds: editions.UnknownObs[float64](), TokS: editions.UnknownObs[float64]()}
	if p.timed == p.requests && p.seconds > 0 {
		out.Seconds, out.TokS = editions.Observed(p.seconds), editions.Observed(float64(p.tokens)/p.seconds)
	}
	return out
}

// combine applies the rule for absent observations: any UNKNOWN makes the
// result UNKNOWN; all UNSUPPORTED stays UNSUPPORTED; UNSUPPORTED mixed with
// numbers is UNKNOWN (the aggregate was not fully observed).
func combine(obs []editions.Obs[int64], f func(a, b int64) int64) editions.Obs[int64] {
	unsupported := 0
	for _, o := range obs {
		switch o.Status {
		case editions.Unknown:
			return editions.UnknownObs[int64]()
		case editions.Unsupported:
			unsupported++
		}
	}
	if len(obs) == 0 || (unsupported > 0 && unsupported < len(obs)) {
		return editions.UnknownObs[int64]()
	}
	if unsupported == len(obs) {
		return editions.UnsupportedObs[int64]()
	}
	acc := obs[0].Value
	for _, o := range obs[1:] {
		acc = f(acc, o.Value)
	}
	return editions.Observed(acc)
}

// MaxObs is the maximum of observations (see combine for absent ones).
func MaxObs(obs []editions.Obs[int64]) editions.Obs[int64] {
	return combine(obs, func(a, b int64) int64 { return max(a, b) })
}

// SumObs is the sum of observations (see combine for absent ones).
func SumObs(obs []editions.Obs[int64]) editions.Obs[int64] {
	return combine(obs, func(a, b int64) int64 { return a + b })
}

// Round rounds v to decimals places, half away from zero: a claim's value
// is its source rounded this way.
func Round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}
