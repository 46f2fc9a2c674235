package editions

import "strconv"

// A reproduction directory (horizon-bench reproduce EDITION --out DIR) lives
// outside the edition it reproduces:
//
//	DIR/reproduction.json                 the ReproductionDoc
//	DIR/original/raw/<id>/block-<k>.json  byte copies of the edition's records
//	DIR/rerun/raw/<id>/block-<k>.json     the records of the rerun workers
//	DIR/run/                              scratch: prepared artifacts (unless
//	                                      --run-dir put them elsewhere)
//
// It keeps both sets of raw records so that horizon-verify EDITION
// --reproduction DIR recomputes every comparison from them instead of
// trusting the booleans in reproduction.json.
const (
	SchemaReproduction = "horizon.reproduction"
	ReproductionFile   = "reproduction.json"
	ReproOriginalDir   = "original"
	ReproRerunDir      = "rerun"
	ReproRunDir        = "run"
)

// ReproOriginalPath is original/raw/<config>/block-<k>.json, relative to a
// reproduction directory.
func ReproOriginalPath(configID string, block int) string {
	return ReproOriginalDir + "/" + RawPath(configID, block)
}

// ReproRerunPath is rerun/raw/<config>/block-<k>.json, relative to a
// reproduction directory.
func ReproRerunPath(configID string, block int) string {
	return ReproRerunDir + "/" + RawPath(configID, block)
}

// DefaultSpeedTolerance is the speed tolerance reproduce declares unless
// told otherwise: a rerun's pooled decode rate within ±10 % of the
// edition's is "within tolerance". Speed is reported against it, never
// enforced: machines differ; tokens and cache counters may not.
const DefaultSpeedTolerance = 0.10

// ReproductionDoc is reproduction.json: which edition was reproduced (by the
// SHA-256 of its manifest.json, which pins every file of it), where, and
// per rerun worker whether its prompts, tokens and cache counters are
// identical to the edition's worker of the same configuration and block.
type ReproductionDoc struct {
	Schema  string `json:"schema"`  // SchemaReproduction
	Version int    `json:"version"` // Version
	Edition string `json:"edition"` // the edition id (its manifest's)
	// EditionManifestSHA256 is the SHA-256 of the edition's manifest.json
	// bytes when the reproduction ran.
	EditionManifestSHA256 string `json:"edition_manifest_sha256"`
	CreatedAt             string `json:"created_at"` // RFC 3339, UTC
	// Environment is the reproducing machine, as the first rerun worker
	// recorded it.
	Environment Environment `json:"environment"`
	// SpeedTolerance declares what "within tolerance" means: a speed ratio
	// (rerun / edition) in [1 - SpeedTolerance, 1 + SpeedTolerance].
	SpeedTolerance float64 `json:"speed_tolerance"`
	// Identical is true when every rerun worker is Identical.
	Identical bool `json:"identical"`
	// Workers are the rerun workers, by configuration (campaign order), then
	// block.
	Workers []ReproWorker `json:"workers"`
	// Configurations summarise each rerun configuration's speed, over the
	// rerun blocks only (the edition's number is recomputed over the same
	// blocks, so a partial reproduction compares like with like).
	Configurations []ReproConfig `json:"configurations"`
}

// ReproFile names one raw record of a reproduction directory.
type ReproFile struct {
	Path   string `json:"path"` // relative to the reproduction directory
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ReproWorker compares one rerun worker with the edition's.
type ReproWorker struct {
	ConfigID string `json:"config_id"`
	Block    int    `json:"block"`
	// Original is the byte copy of the edition's raw record; its SHA-256
	// is the one the edition's manifest lists.
	Original ReproFile `json:"original"`
	Rerun    ReproFile `json:"rerun"`
	// WarmupIdentical: the excluded warmup produced the same tokens.
	WarmupIdentical bool `json:"warmup_identical"`
	// Identical: the warmup and every request are identical in prompts,
	// tokens and counters, and both records hold the same requests.
	Identical bool           `json:"identical"`
	Requests  []ReproRequest `json:"requests"`
}

// ReproRequest compares one measured request, matched by position.
type ReproRequest struct {
	Index    int    `json:"index"`
	PromptID string `json:"prompt_id"` // the edition's
	// PromptIdentical: same prompt id and prompt token ids.
	PromptIdentical bool `json:"prompt_identical"`
	// TokensIdentical: same output token ids.
	TokensIdentical bool `json:"tokens_identical"`
	// FirstTokenDifference is the first index where the output tokens
	// differ (the shorter length when one is a prefix of the other), -1
	// when they are identical.
	FirstTokenDifference int `json:"first_token_difference"`
	// CountersIdentical: same hits, misses, evictions, h2d_bytes,
	// h2d_copies, layer_misses and prefetch counters.
	CountersIdentical bool `json:"counters_identical"`
	// CounterDifferences names the counters that differ (ReproCounters
	// names), empty when they are identical.
	CounterDifferences []string `json:"counter_differences"`
}

// ReproConfig is one rerun configuration's speed comparison.
type ReproConfig struct {
	ConfigID string `json:"config_id"`
	Blocks   []int  `json:"blocks"` // the rerun blocks, ascending
	// The pooled decode rates, Σ (N-1) / Σ decode_seconds over the rerun
	// blocks in block then request order, of the edition's records and the
	// rerun's.
	OriginalPooledDecodeTokS float64 `json:"original_pooled_decode_tok_s"`
	RerunPooledDecodeTokS    float64 `json:"rerun_pooled_decode_tok_s"`
	SpeedRatio               float64 `json:"speed_ratio"` // rerun / original
	WithinTolerance          bool    `json:"within_tolerance"`
	// Identical is true when every rerun worker of the configuration is.
	Identical bool `json:"identical"`
	// PrefillLengths compares each declared prompt length's isolated
	// prefill rates (configs/<id>.json /metrics/prefill_lengths: the
	// ReproPrefillMetrics), present exactly under a contract with declared
	// prompt lengths (PERF-PREFILL-v1, PERF-DEPTH-v1), one entry per
	// prompt the configuration ran, in contract order; recomputed over the
	// rerun blocks of both record sets, as the pooled decode above.
	PrefillLengths []ReproPrompt `json:"prefill_lengths,omitempty"`
	// DecodeDepths compares each context depth's decode
	// (/metrics/decode_depths: the ReproDepthMetrics), present exactly
	// under a contract with declared prompt lengths and a decode interval
	// (PERF-DEPTH-v1).
	DecodeDepths []ReproPrompt `json:"decode_depths,omitempty"`
}

// ReproPrompt compares one declared prompt's per-prompt metrics.
type ReproPrompt struct {
	PromptID     string `json:"prompt_id"`
	PromptTokens int    `json:"prompt_tokens"` // the declared length (the depth)
	// Metrics are the compared members of the prompt's configs/<id>.json
	// entry, in the order ReproPrefillMetrics or ReproDepthMetrics names
	// them.
	Metrics []ReproMetric `json:"metrics"`
}

// ReproMetric is one per-prompt metric of the edition's records and the
// rerun's over the rerun blocks, their ratio (rerun / original: UNKNOWN
// when either was not observed or the original is not positive) and the
// tolerance verdict (false when the ratio is UNKNOWN). Reported, not
// enforced, like the speed ratio.
type ReproMetric struct {
	Metric          string       `json:"metric"` // the entry's member, e.g. mean_tok_s
	Original        Obs[float64] `json:"original"`
	Rerun           Obs[float64] `json:"rerun"`
	Ratio           Obs[float64] `json:"ratio"`
	WithinTolerance bool         `json:"within_tolerance"`
}

// ReproPrefillMetrics are the members of a prefill_lengths entry a
// reproduction compares; ReproDepthMetrics those of a decode_depths entry.
// They are the members the edition's per-prompt claims cite.
var (
	ReproPrefillMetrics = []string{"mean_tok_s", "median_tok_s"}
	ReproDepthMetrics   = []string{"pooled_tok_s", "mean_tok_s", "median_tok_s", "tpot_s"}
)

// CompareMetric is the ReproMetric of two observations under tolerance
// tol.
func CompareMetric(metric string, orig, rerun Obs[float64], tol float64) ReproMetric {
	m := ReproMetric{Metric: metric, Original: orig, Rerun: rerun, Ratio: UnknownObs[float64]()}
	if orig.Ok() && rerun.Ok() && orig.Value > 0 {
		m.Ratio = Observed(rerun.Value / orig.Value)
		m.WithinTolerance = WithinTolerance(m.Ratio.Value, tol)
	}
	return m
}

// ReproCounters are the cache counters a reproduction requires identical,
// by the names CounterDifferences uses.
var ReproCounters = []string{"hits", "misses", "evictions", "h2d_bytes", "h2d_copies", "layer_misses", "prefetch"}

// WithinTolerance reports whether ratio lies in [1 - tol, 1 + tol].
func WithinTolerance(ratio, tol float64) bool {
	return ratio >= 1-tol && ratio <= 1+tol
}

// ReproWorkerName is "<config> block <k>", for messages.
func ReproWorkerName(configID string, block int) string {
	return configID + " block " + strconv.Itoa(block)
}
