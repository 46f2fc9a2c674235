package campaigns

import (
	"fmt"
	"slices"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// The comparisons of a reproduction (horizon-bench reproduce). They are
// pure functions of two raw records, so the verifier can recompute them
// with its own implementation from the records the reproduction directory
// keeps, and disagree with a record that lies about them.

// CompareWorker compares a rerun worker's record with the edition's record
// of the same configuration and block. Requests are matched by position; a
// request only one record has counts as different in every respect. The
// returned ReproWorker has no file names (the caller fills them in).
func CompareWorker(orig, rerun *editions.RawRecord) editions.ReproWorker {
	w := editions.ReproWorker{
		ConfigID: orig.ConfigID, Block: orig.Block,
		WarmupIdentical: orig.Warmup.PromptID == rerun.Warmup.PromptID && slices.Equal(orig.Warmup.TokenIDs, rerun.Warmup.TokenIDs),
		Requests:        []editions.ReproRequest{},
	}
	w.Identical = w.WarmupIdentical && len(orig.Requests) == len(rerun.Requests)
	for i := range max(len(orig.Requests), len(rerun.Requests)) {
		var q editions.ReproRequest
		switch {
		case i >= len(rerun.Requests):
			o := orig.Requests[i]
			q = editions.ReproRequest{Index: i, PromptID: o.PromptID, FirstTokenDifference: 0, CounterDifferences: slices.Clone(editions.ReproCounters)}
		case i >= len(orig.Requests):
			q = editions.ReproRequest{Index: i, PromptID: rerun.Requests[i].PromptID, FirstTokenDifference: 0, CounterDifferences: slices.Clone(editions.ReproCounters)}
		default:
			q = CompareRequest(i, &orig.Requests[i], &rerun.Requests[i])
		}
		w.Identical = w.Identical && q.PromptIdentical && q.TokensIdentical && q.CountersIdentical
		w.Requests = append(w.Requests, q)
	}
	return w
}

// CompareRequest compares request i of two records.
func CompareRequest(i int, a, b *editions.Request) editions.ReproRequest {
	q := editions.ReproRequest{
		Index: i, PromptID: a.PromptID,
		PromptIdentical:      a.PromptID == b.PromptID && slices.Equal(a.PromptTokenIDs, b.PromptTokenIDs),
		FirstTokenDifference: FirstDifference(a.TokenIDs, b.TokenIDs),
		CounterDifferences:   CounterDifferences(a.Cache, b.Cache),
	}
	q.TokensIdentical = q.FirstTokenDifference == -1
	q.CountersIdentical = len(q.CounterDifferences) == 0
	return q
}

// FirstDifference is the first index where a and b differ (the shorter
// length when one is a prefix of the other), -1 when they are equal.
func FirstDifference(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// CounterDifferences names the counters (editions.ReproCounters) in which
// two requests' cache records differ. The required-zero observations are
// left out: the contract's invariants check them, and an older build may
// have recorded UNKNOWN where this one observes 0.
func CounterDifferences(a, b editions.RequestCache) []string {
	out := []string{}
	same := map[string]bool{
		"hits": a.Hits == b.Hits, "misses": a.Misses == b.Misses, "evictions": a.Evictions == b.Evictions,
		"h2d_bytes": a.H2DBytes == b.H2DBytes, "h2d_copies": a.H2DCopies == b.H2DCopies,
		"layer_misses": slices.Equal(a.LayerMisses, b.LayerMisses),
		"prefetch":     (a.Prefetch == nil) == (b.Prefetch == nil) && (a.Prefetch == nil || *a.Prefetch == *b.Prefetch),
	}
	for _, name := range editions.ReproCounters {
		if !same[name] {
			out = append(out, name)
		}
	}
	return out
}

// PooledDecode is Σ (N-1) / Σ decode_seconds over records in the given
// order (block, then request order), in float64: the edition's
// pooled_decode_tok_s formula over a subset of blocks. 0 when no decode
// time was recorded.
func PooledDecode(recs []*editions.RawRecord) float64 {
	var tokens int64
	var seconds float64
	for _, r := range recs {
		for _, q := range r.Requests {
			tokens += int64(q.N) - 1
			seconds += q.DecodeSeconds
		}
	}
	if seconds <= 0 {
		return 0
	}
	return float64(tokens) / seconds
}

// ReproPair is one rerun worker's two records and their files.
type ReproPair struct {
	Original, Rerun         *editions.RawRecord
	OriginalFile, RerunFile editions.ReproFile
}

// Reproduction assembles the reproduction document from the pairs, given
// by configuration then block. The environment is the first rerun
// worker's. Under a contract k with declared prompt lengths each
// configuration also compares its per-prompt metrics (PromptComparisons);
// k may be nil for a contract without them.
func Reproduction(edition, manifestSHA, createdAt string, tol float64, k *contracts.Contract, pairs []ReproPair) (editions.ReproductionDoc, error) {
	d := editions.ReproductionDoc{
		Schema: editions.SchemaReproduction, Version: editions.Version, Edition: edition,
		EditionManifestSHA256: manifestSHA, CreatedAt: createdAt, SpeedTolerance: tol, Identical: true,
		Workers: []editions.ReproWorker{}, Configurations: []editions.ReproConfig{},
	}
	if len(pairs) == 0 {
		return d, fmt.Errorf("reproduction of %s: no workers", edition)
	}
	d.Environment = pairs[0].Rerun.Environment
	var orig, rerun []*editions.RawRecord
	var err error
	flush := func() {
		if len(orig) == 0 || err != nil {
			return
		}
		c := editions.ReproConfig{ConfigID: orig[0].ConfigID, Identical: true,
			OriginalPooledDecodeTokS: PooledDecode(orig), RerunPooledDecodeTokS: PooledDecode(rerun)}
		for _, w := range d.Workers {
			if w.ConfigID == c.ConfigID {
				c.Blocks = append(c.Blocks, w.Block)
				c.Identical = c.Identical && w.Identical
			}
		}
		if c.OriginalPooledDecodeTokS > 0 {
			c.SpeedRatio = c.RerunPooledDecodeTokS / c.OriginalPooledDecodeTokS
		}
		c.WithinTolerance = editions.WithinTolerance(c.SpeedRatio, tol)
		if k != nil {
			if c.PrefillLengths, c.DecodeDepths, err = PromptComparisons(c.ConfigID, k, tol, orig, rerun); err != nil {
				err = fmt.Errorf("reproduction of %s: configuration %s: %w", edition, c.ConfigID, err)
			}
		}
		d.Configurations = append(d.Configurations, c)
		orig, rerun = nil, nil
	}
	for i, p := range pairs {
		if i > 0 && p.Original.ConfigID != pairs[i-1].Original.ConfigID {
			flush()
		}
		w := CompareWorker(p.Original, p.Rerun)
		w.Original, w.Rerun = p.OriginalFile, p.RerunFile
		d.Identical = d.Identical && w.Identical
		d.Workers = append(d.Workers, w)
		orig, rerun = append(orig, p.Original), append(rerun, p.Rerun)
	}
	flush()
	return d, err
}

// prefillStat and depthStat read the members editions.ReproPrefillMetrics
// and editions.ReproDepthMetrics name.
var (
	prefillStat = map[string]func(editions.PrefillLength) editions.Obs[float64]{
		"mean_tok_s":   func(p editions.PrefillLength) editions.Obs[float64] { return p.MeanTokS },
		"median_tok_s": func(p editions.PrefillLength) editions.Obs[float64] { return p.MedianTokS },
	}
	depthStat = map[string]func(editions.DecodeDepth) editions.Obs[float64]{
		"pooled_tok_s": func(d editions.DecodeDepth) editions.Obs[float64] { return d.PooledTokS },
		"mean_tok_s":   func(d editions.DecodeDepth) editions.Obs[float64] { return d.MeanTokS },
		"median_tok_s": func(d editions.DecodeDepth) editions.Obs[float64] { return d.MedianTokS },
		"tpot_s":       func(d editions.DecodeDepth) editions.Obs[float64] { return d.TPOTS },
	}
)

// PromptComparisons compares one configuration's per-prompt metrics over
// the rerun blocks (orig and rerun in block order): under a contract with
// declared prompt lengths the ReproPrefillMetrics of each prompt length
// (report.PrefillLengths), and with a decode interval too the
// ReproDepthMetrics of each context depth (report.DecodeDepths), computed
// by the edition's own aggregation over each record set. Both are nil
// under a contract without declared lengths. The prompts are the ones the
// edition's records ran (their recorded context); a rerun record that ran
// others has already failed CheckRecord.
func PromptComparisons(configID string, k *contracts.Contract, tol float64, orig, rerun []*editions.RawRecord) (prefill, depths []editions.ReproPrompt, err error) {
	if k.PromptRule == nil {
		return nil, nil, nil
	}
	op, err := report.PrefillLengths(configID, report.DefaultBootstrapSeed, k, orig)
	if err != nil {
		return nil, nil, fmt.Errorf("the edition's prefill by length: %w", err)
	}
	rp, err := report.PrefillLengths(configID, report.DefaultBootstrapSeed, k, rerun)
	if err != nil {
		return nil, nil, fmt.Errorf("the rerun's prefill by length: %w", err)
	}
	if len(op) != len(rp) {
		return nil, nil, fmt.Errorf("the edition's records ran %d prompt lengths, the rerun's %d", len(op), len(rp))
	}
	for i, o := range op {
		r := rp[i]
		q := editions.ReproPrompt{PromptID: o.PromptID, PromptTokens: o.PromptTokens, Metrics: []editions.ReproMetric{}}
		for _, m := range editions.ReproPrefillMetrics {
			q.Metrics = append(q.Metrics, editions.CompareMetric(m, prefillStat[m](o), prefillStat[m](r), tol))
		}
		prefill = append(prefill, q)
	}
	if !k.DecodeByPrompt() {
		return prefill, nil, nil
	}
	od, err := report.DecodeDepths(configID, report.DefaultBootstrapSeed, k, orig)
	if err != nil {
		return nil, nil, fmt.Errorf("the edition's decode by depth: %w", err)
	}
	rd, err := report.DecodeDepths(configID, report.DefaultBootstrapSeed, k, rerun)
	if err != nil {
		return nil, nil, fmt.Errorf("the rerun's decode by depth: %w", err)
	}
	if len(od) != len(rd) {
		return nil, nil, fmt.Errorf("the edition's records ran %d depths, the rerun's %d", len(od), len(rd))
	}
	for i, o := range od {
		r := rd[i]
		q := editions.ReproPrompt{PromptID: o.PromptID, PromptTokens: o.DepthTokens, Metrics: []editions.ReproMetric{}}
		for _, m := range editions.ReproDepthMetrics {
			q.Metrics = append(q.Metrics, editions.CompareMetric(m, depthStat[m](o), depthStat[m](r), tol))
		}
		depths = append(depths, q)
	}
	return prefill, depths, nil
}

// Differences lists, for people, where a reproduction's workers differ
// (at most max lines, then a count of the rest).
func Differences(d editions.ReproductionDoc, limit int) []string {
	var out []string
	n := 0
	add := func(s string) {
		n++
		if len(out) < limit {
			out = append(out, s)
		}
	}
	for _, w := range d.Workers {
		name := editions.ReproWorkerName(w.ConfigID, w.Block)
		if !w.WarmupIdentical {
			add(name + ": warmup tokens differ")
		}
		for _, q := range w.Requests {
			if !q.PromptIdentical {
				add(fmt.Sprintf("%s request %d (%s): prompt differs", name, q.Index, q.PromptID))
			}
			if !q.TokensIdentical {
				add(fmt.Sprintf("%s request %d (%s): tokens differ from index %d", name, q.Index, q.PromptID, q.FirstTokenDifference))
			}
			if !q.CountersIdentical {
				add(fmt.Sprintf("%s request %d (%s): counters differ: %v", name, q.Index, q.PromptID, q.CounterDifferences))
			}
		}
	}
	if n > len(out) {
		out = append(out, fmt.Sprintf("... and %d more", n-len(out)))
	}
	return out
}
