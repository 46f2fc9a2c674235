package campaigns

import (
	"fmt"
	"math"

	"github.com/horizon-runmap/horizon/editions"
)

// Aggregate computes a configuration's document from its workers' raw
// records, given in block order. Every metric follows DESIGN section 8 and
// the contract: sums run in request order (block, then prompt order) in
// float64, means divide those sums, and whole-worker peaks are the maximum
// over workers. An observation some worker lacks stays UNKNOWN; one every
// worker reports UNSUPPORTED stays UNSUPPORTED.
func Aggregate(c *Campaign, cfg *Configuration, recs []*editions.RawRecord) (editions.ConfigDoc, error) {
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
		if blockSeconds <= 0 {
			return d, fmt.Errorf("configuration %s block %d: no decode time", cfg.ID, r.Block)
		}
		rate := float64(blockTokens) / blockSeconds
		if bi == 0 {
			m.BlockSpread = editions.Spread{Min: rate, Max: rate}
		}
		m.BlockSpread.Min = math.Min(m.BlockSpread.Min, rate)
		m.BlockSpread.Max = math.Max(m.BlockSpread.Max, rate)
		vram = append(vram, r.Observations.VRAMPeakBytes)
		vramProc = append(vramProc, r.Observations.VRAMProcessPeakBytes)
		rss = append(rss, r.Observations.RSSPeakBytes)
	}
	if m.DecodeSeconds <= 0 || m.RuntimeSeconds <= 0 || d.Requests == 0 {
		return d, fmt.Errorf("configuration %s: no measured time", cfg.ID)
	}
	m.PooledDecodeTokS = float64(m.DecodeTokens) / m.DecodeSeconds
	m.OverallOutputTokS = float64(m.OutputTokens) / m.RuntimeSeconds
	m.TTFTMeanS = ttftSum / float64(d.Requests)
	m.ResponseMeanS = m.RuntimeSeconds / float64(d.Requests)
	m.VRAMPeakBytes = MaxObs(vram)
	m.VRAMProcessPeakBytes = MaxObs(vramProc)
	m.RSSPeakBytes = MaxObs(rss)
	d.Invariants = editions.Invariants{
		D2HExpertBytes: SumObs(inv[0]), Writebacks: SumObs(inv[1]), AuthorityWrites: SumObs(inv[2]),
		RequestHashBytes: SumObs(inv[3]), RequestArtifactReads: SumObs(inv[4]),
	}
	return d, nil
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
		who := fmt.Sprintf("%s (%s, capacity %d/%d, %s, %s)", d.ID, CheckpointLabel(d.Checkpoint), d.Capacity, d.ExpertsPerLayer, d.Executor, d.Device)
		add := func(metric, unit string, decimals int, v float64, statement string, num, den *editions.SourceRef) {
			out.Claims = append(out.Claims, editions.Claim{
				ID: d.ID + "." + metric, Statement: statement, Value: Round(v, decimals), Unit: unit, Decimals: decimals,
				Source: *ref("/metrics/"+metric, v), Numerator: num, Denominator: den,
				Evidence: c.Evidence, Validation: "valid", Publication: c.Publication, Reproduction: "not_attempted",
			})
		}
		m := d.Metrics
		add("pooled_decode_tok_s", "tokens/s", 2, m.PooledDecodeTokS,
			fmt.Sprintf("%s: pooled decode rate over %d measured requests, sum(N-1) / sum(decode seconds), first-token wait excluded", who, d.Requests),
			ref("/metrics/decode_tokens", float64(m.DecodeTokens)), ref("/metrics/decode_seconds", m.DecodeSeconds))
		add("overall_output_tok_s", "tokens/s", 2, m.OverallOutputTokS,
			fmt.Sprintf("%s: overall output rate over %d measured requests, sum(N) / sum(runtime seconds), admission to last token", who, d.Requests),
			ref("/metrics/output_tokens", float64(m.OutputTokens)), ref("/metrics/runtime_seconds", m.RuntimeSeconds))
		add("ttft_mean_s", "s", 4, m.TTFTMeanS,
			fmt.Sprintf("%s: mean time to first token (admission to first token, prefill included) over %d measured requests", who, d.Requests), nil, nil)
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

// CheckpointLabel says what kind of checkpoint a configuration ran:
// "synthetic olmoe-1b-7b seed 924" or "hf <dir>@<revision>".
func CheckpointLabel(k editions.Checkpoint) string {
	if k.Kind == "synthetic" {
		seed := "?"
		if k.Seed != nil {
			seed = fmt.Sprint(*k.Seed)
		}
		return fmt.Sprintf("synthetic %s seed %s", k.Arch, seed)
	}
	if k.Revision != "" {
		return fmt.Sprintf("hf %s %s@%s", k.Arch, k.Dir, k.Revision)
	}
	return fmt.Sprintf("hf %s %s", k.Arch, k.Dir)
}
