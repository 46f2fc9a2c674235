package verifier

import (
	"math"

	"github.com/horizon-runmap/horizon/editions"
)

// The PERF-REAL-v1 metric definitions (DESIGN section 8), implemented here
// on their own; the verifier never calls the aggregator. Every sum runs in
// request order (block 1..B, then the block's requests in record order) in
// float64, so the recomputation is exact and compared with ==.

// metrics are one configuration's recomputed aggregates.
type metrics struct {
	requests       int
	blocks         int
	decodeTokens   int64   // Σ (N_i - 1)
	decodeSeconds  float64 // Σ decode_seconds_i
	outputTokens   int64   // Σ N_i
	runtimeSeconds float64 // Σ runtime_seconds_i
	ttftSum        float64 // Σ ttft_seconds_i

	pooledDecode  editions.Obs[float64] // decodeTokens / decodeSeconds; UNKNOWN when decodeTokens is 0 (N = 1)
	overallOutput float64               // outputTokens / runtimeSeconds
	ttftMean      float64               // ttftSum / requests
	responseMean  float64               // runtimeSeconds / requests

	vramPeak        editions.Obs[int64]
	vramProcessPeak editions.Obs[int64]
	rssPeak         editions.Obs[int64]

	h2dBytes, hits, misses int64
	// spreadMin, spreadMax: of the per-block pooled decode; UNKNOWN when
	// the blocks decode nothing (N = 1).
	spreadMin, spreadMax editions.Obs[float64]

	invariants map[string]editions.Obs[int64] // Σ over requests, by counter name

	// prefill is nil when no request carries prefill_seconds; prefillMixed
	// when some do and some do not (one build writes all or none).
	prefill      *editions.Prefill
	prefillMixed bool
}

// invariantCounters are the cache contract's required-zero counters
// (resident-qpacked-cache-v1), by their names in editions.RequestCache and
// editions.Invariants; a configuration sums each over its measured requests.
var invariantCounters = []string{
	"d2h_expert_bytes",
	"writebacks",
	"authority_writes",
	"request_hash_bytes",
	"request_artifact_reads",
}

// computeMetrics recomputes a configuration's aggregates from its workers,
// which must be sorted by block.
func computeMetrics(workers []*worker) metrics {
	m := metrics{blocks: len(workers), invariants: map[string]editions.Obs[int64]{}}
	var vram, vramProc, rss []editions.Obs[int64]
	inv := map[string][]editions.Obs[int64]{}
	lo, hi := math.Inf(1), math.Inf(-1)
	var spreadTokens int64
	var promptTokens int64
	var prefillSeconds float64
	withField, timed := 0, 0
	for _, w := range workers {
		var blockTokens int64
		var blockSeconds float64
		for _, r := range w.rec.Requests {
			m.requests++
			n := int64(r.N)
			m.decodeTokens += n - 1
			m.decodeSeconds += r.DecodeSeconds
			m.outputTokens += n
			m.runtimeSeconds += r.RuntimeSeconds
			m.ttftSum += r.TTFTSeconds
			promptTokens += int64(r.PromptTokens)
			if p := r.PrefillSeconds; p != nil {
				withField++
				if p.Ok() {
					timed++
					prefillSeconds += p.Value
				}
			}
			m.h2dBytes += r.Cache.H2DBytes
			m.hits += r.Cache.Hits
			m.misses += r.Cache.Misses
			blockTokens += n - 1
			blockSeconds += r.DecodeSeconds
			for _, name := range invariantCounters {
				inv[name] = append(inv[name], counter(r.Cache, name))
			}
		}
		spreadTokens += blockTokens
		if blockTokens > 0 {
			pooled := float64(blockTokens) / blockSeconds
			lo, hi = math.Min(lo, pooled), math.Max(hi, pooled)
		}
		o := w.rec.Observations
		vram = append(vram, o.VRAMPeakBytes)
		vramProc = append(vramProc, o.VRAMProcessPeakBytes)
		rss = append(rss, o.RSSPeakBytes)
	}
	// With one output token per request no token follows the first: there
	// is no decode interval and no rate (UNKNOWN, never 0).
	m.pooledDecode, m.spreadMin, m.spreadMax = editions.UnknownObs[float64](), editions.UnknownObs[float64](), editions.UnknownObs[float64]()
	if m.decodeTokens > 0 {
		m.pooledDecode = editions.Observed(float64(m.decodeTokens) / m.decodeSeconds)
	}
	if spreadTokens > 0 {
		m.spreadMin, m.spreadMax = editions.Observed(lo), editions.Observed(hi)
	}
	m.overallOutput = float64(m.outputTokens) / m.runtimeSeconds
	m.ttftMean = m.ttftSum / float64(m.requests)
	m.responseMean = m.runtimeSeconds / float64(m.requests)
	m.vramPeak = maxObs(vram)
	m.vramProcessPeak = maxObs(vramProc)
	m.rssPeak = maxObs(rss)
	for _, name := range invariantCounters {
		m.invariants[name] = sumObs(inv[name])
	}
	// Isolated prefill: Σ prompt_tokens / Σ prefill_seconds in request
	// order, a number only when every measured request was timed.
	m.prefillMixed = withField > 0 && withField < m.requests
	if withField > 0 {
		p := &editions.Prefill{PromptTokens: promptTokens, Seconds: editions.UnknownObs[float64](), TokS: editions.UnknownObs[float64]()}
		if timed == m.requests && prefillSeconds > 0 {
			p.Seconds, p.TokS = editions.Observed(prefillSeconds), editions.Observed(float64(promptTokens)/prefillSeconds)
		}
		m.prefill = p
	}
	return m
}

// counter returns the named required-zero counter of a request.
func counter(c editions.RequestCache, name string) editions.Obs[int64] {
	return pickInvariant(name, c.D2HExpertBytes, c.Writebacks, c.AuthorityWrites, c.RequestHashBytes, c.RequestArtifactReads)
}

// configInvariant returns the named counter of a configuration's invariants.
func configInvariant(c editions.Invariants, name string) editions.Obs[int64] {
	return pickInvariant(name, c.D2HExpertBytes, c.Writebacks, c.AuthorityWrites, c.RequestHashBytes, c.RequestArtifactReads)
}

// pickInvariant selects one of the five contract counters by its JSON name;
// an unknown name is UNKNOWN.
func pickInvariant(name string, d2h, writebacks, authorityWrites, hashBytes, artifactReads editions.Obs[int64]) editions.Obs[int64] {
	switch name {
	case "d2h_expert_bytes":
		return d2h
	case "writebacks":
		return writebacks
	case "authority_writes":
		return authorityWrites
	case "request_hash_bytes":
		return hashBytes
	case "request_artifact_reads":
		return artifactReads
	}
	return editions.UnknownObs[int64]()
}

// Combining observations (the rule editions' Obs comments state, made
// complete): any UNKNOWN part makes the aggregate UNKNOWN; all parts
// UNSUPPORTED make it UNSUPPORTED; UNSUPPORTED mixed with numbers is UNKNOWN
// (the aggregate was not fully observed); no parts is UNKNOWN. Only when
// every part was observed is there a number.
func combineStatus(obs []editions.Obs[int64]) (string, bool) {
	unsupported := 0
	for _, o := range obs {
		switch o.Status {
		case editions.Unknown:
			return editions.Unknown, true
		case editions.Unsupported:
			unsupported++
		}
	}
	switch {
	case len(obs) == 0 || (unsupported > 0 && unsupported < len(obs)):
		return editions.Unknown, true
	case unsupported == len(obs):
		return editions.Unsupported, true
	}
	return "", false
}

func maxObs(obs []editions.Obs[int64]) editions.Obs[int64] {
	if s, ok := combineStatus(obs); ok {
		return editions.Obs[int64]{Status: s}
	}
	best := obs[0].Value
	for _, o := range obs[1:] {
		best = max(best, o.Value)
	}
	return editions.Observed(best)
}

func sumObs(obs []editions.Obs[int64]) editions.Obs[int64] {
	if s, ok := combineStatus(obs); ok {
		return editions.Obs[int64]{Status: s}
	}
	var sum int64
	for _, o := range obs {
		sum += o.Value
	}
	return editions.Observed(sum)
}

// obsValue is the JSON form of an observation, for findings.
func obsValue(o editions.Obs[int64]) any {
	if o.Ok() {
		return o.Value
	}
	return o.Status
}

// num is a float64 for a finding: non-finite values (a division by zero)
// have no JSON form and become a string.
func num(f float64) any {
	switch {
	case math.IsNaN(f):
		return "undefined (0/0)"
	case math.IsInf(f, 0):
		return "undefined (x/0)"
	}
	return f
}
