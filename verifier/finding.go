package verifier

import (
	"fmt"
	"sort"
	"strconv"
)

// Severity says whether a finding fails the edition.
//
// An error means the edition is wrong: a hash does not match, a metric does
// not recompute, a contract term is broken. A hint means something could not
// be checked or is worth a look (a counter that was never observed, executors
// that declare different numerics); hints never change the exit code, but a
// hint is not a pass: it says which check did not run to the end.
type Severity string

const (
	Error Severity = "error"
	Hint  Severity = "hint"
)

// Finding is one result of one check. File is slash-separated and relative
// to the edition root; Pointer is an RFC 6901 JSON pointer into File ("" for
// the whole file). Expected and Found are JSON values (numbers keep their
// exact float64 value), nil when they do not apply.
type Finding struct {
	Check    string   `json:"check"`
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	File     string   `json:"file,omitempty"`
	Pointer  string   `json:"pointer,omitempty"`
	Expected any      `json:"expected,omitempty"`
	Found    any      `json:"found,omitempty"`
	Message  string   `json:"message"`
}

// Where returns "file#pointer", "file" or "".
func (f Finding) Where() string {
	if f.Pointer == "" {
		return f.File
	}
	return f.File + "#" + f.Pointer
}

// findings collects the findings of one check.
type findings struct {
	check string
	list  []Finding
}

// add records a finding of the catalogued id. The severity comes from the
// catalogue, so an ID always has the same severity.
func (fs *findings) add(id, file, pointer string, expected, found any, format string, args ...any) {
	info, ok := catalogue[id]
	if !ok {
		// A programming error; report it rather than panic so that a
		// verification still completes.
		info = IDInfo{ID: id, Check: fs.check, Severity: Error}
	}
	fs.list = append(fs.list, Finding{
		Check:    info.Check, // a check may report another's finding (claims -> invariants)
		ID:       id,
		Severity: info.Severity,
		File:     file,
		Pointer:  pointer,
		Expected: expected,
		Found:    found,
		Message:  fmt.Sprintf(format, args...),
	})
}

// IDInfo documents one finding ID.
type IDInfo struct {
	ID       string
	Check    string
	Severity Severity
	Summary  string
}

// Checks are the verifier's checks in the order they run and are reported.
var Checks = []string{"edition", "manifest", "schema", "contract", "recompute", "claims", "invariants", "consistency",
	"binding", "physics", "replay", "derived", "ifeval", "fidelity", "signature", "reproduction"}

// IDs lists every finding ID the verifier can report, by check, then ID.
// IDs are stable: tools and tests match on them, so an ID is never renamed
// or reused for another meaning.
func IDs() []IDInfo {
	order := map[string]int{}
	for i, c := range Checks {
		order[c] = i
	}
	out := make([]IDInfo, 0, len(catalogue))
	for _, info := range catalogue {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Check != out[j].Check {
			return order[out[i].Check] < order[out[j].Check]
		}
		return out[i].ID < out[j].ID
	})
	return out
}

var catalogue = map[string]IDInfo{}

func def(check, id string, sev Severity, summary string) string {
	catalogue[id] = IDInfo{ID: id, Check: check, Severity: sev, Summary: summary}
	return id
}

// The catalogue. Each ID is "<check>.<what>".
var (
	// edition: reading the edition at all.
	IDEditionUnreadable = def("edition", "edition.unreadable", Error, "the edition directory or its manifest.json cannot be read (exit 3)")
	IDInternalPanic     = def("edition", "internal.panic", Error, "a check crashed on this edition (a verifier bug); the check did not complete")

	// manifest: check 1.
	IDManifestMissingFile  = def("manifest", "manifest.missing-file", Error, "a file listed in the manifest does not exist")
	IDManifestRepublished  = def("manifest", "manifest.republished", Hint, "the edition's derived documents were rewritten from its raw records by a later build (horizon-bench republish): when, by which build, why")
	IDManifestSize         = def("manifest", "manifest.size-mismatch", Error, "a listed file's size differs from the manifest")
	IDManifestHash         = def("manifest", "manifest.hash-mismatch", Error, "a listed file's SHA-256 differs from the manifest")
	IDManifestUnlisted     = def("manifest", "manifest.unlisted-file", Error, "a file exists in the edition but is not listed in the manifest")
	IDManifestNotRegular   = def("manifest", "manifest.not-regular", Error, "an edition entry is a symlink or special file")
	IDManifestBadPath      = def("manifest", "manifest.bad-path", Error, "a listed path is not a clean relative slash path inside the edition (or lists manifest.json itself)")
	IDManifestDuplicate    = def("manifest", "manifest.duplicate-entry", Error, "a path is listed twice")
	IDManifestUnsorted     = def("manifest", "manifest.unsorted", Error, "manifest files are not sorted by path")
	IDManifestBadDigest    = def("manifest", "manifest.bad-sha256", Error, "a listed SHA-256 is not 64 lowercase hex digits")
	IDManifestEditionID    = def("manifest", "manifest.edition-id", Error, "a document names another edition than the manifest")
	IDManifestNoEditionID  = def("manifest", "manifest.no-edition-id", Error, "the manifest has no edition id")
	IDManifestWrongDocKind = def("manifest", "manifest.wrong-kind", Error, "manifest.json does not carry schema horizon.manifest version 1")

	// schema: check 2.
	IDSchemaInvalid     = def("schema", "schema.invalid", Error, "a document does not validate against its JSON Schema")
	IDSchemaMalformed   = def("schema", "schema.malformed-json", Error, "a .json file is not one well-formed JSON value")
	IDSchemaDecode      = def("schema", "schema.decode", Error, "a document does not decode into its Go type (editions package)")
	IDSchemaUnknownName = def("schema", "schema.unknown-name", Error, "a JSON document has no schema field or names no known schema")
	IDSchemaWrongName   = def("schema", "schema.wrong-name", Error, "a document's schema does not fit its path (e.g. a raw record that says horizon.config)")
	IDSchemaVersion     = def("schema", "schema.version", Error, "a document's version is not the one this verifier knows")
	IDSchemaUnavailable = def("schema", "schema.unavailable", Hint, "no JSON Schema is available for a document kind; it was not validated")

	// contract: check 3.
	IDContractMissing        = def("contract", "contract.missing-document", Error, "contract.json, campaign.json or a configuration document is missing or unreadable")
	IDContractTerms          = def("contract", "contract.terms", Error, "the frozen contract lacks a term the verifier enforces (blocks, prompts, output tokens, warmup, greedy, EOS suppressed)")
	IDContractHash           = def("contract", "contract.hash-mismatch", Error, "the frozen contract's canonical SHA-256 differs from the hash it carries")
	IDContractCampaignHash   = def("contract", "contract.campaign-hash-mismatch", Error, "the frozen campaign's canonical SHA-256 differs from the hash it carries")
	IDContractRef            = def("contract", "contract.ref-mismatch", Error, "a raw record or the campaign names another contract id or hash than contract.json")
	IDContractCampaignConfig = def("contract", "contract.campaign-config", Error, "a configuration's document or raw records differ from what the campaign declares (capacity, executor, placement, policy, device)")
	IDContractPolicy         = def("contract", "contract.policy", Error, "a configuration or worker ran an eviction policy the contract does not admit (its cache.policy, or one of the cache.policies it declares)")
	IDContractConfigMissing  = def("contract", "contract.config-missing", Error, "a configuration of the campaign has no configs/<id>.json")
	IDContractConfigExtra    = def("contract", "contract.config-unexpected", Error, "a configs/<id>.json is not a configuration of the campaign")
	IDContractCampaign       = def("contract", "contract.campaign-unreadable", Hint, "campaign.json lists no configurations the verifier can read; the configuration set was not checked")
	IDContractBlockCount     = def("contract", "contract.block-count", Error, "a configuration declares another number of blocks than the contract")
	IDContractBlockMissing   = def("contract", "contract.block-missing", Error, "a block the contract declares has no raw record")
	IDContractBlockExtra     = def("contract", "contract.block-unexpected", Error, "a raw record exists for a block the contract does not declare, or a stray file under raw/")
	IDContractWorkers        = def("contract", "contract.workers", Error, "a configuration's workers list is not its raw records in block order")
	IDContractRecordIdentity = def("contract", "contract.record-identity", Error, "a raw record's config_id or block does not match its path")
	IDContractRequestCount   = def("contract", "contract.request-count", Error, "a block does not hold one measured request per contract prompt")
	IDContractPromptOrder    = def("contract", "contract.prompt-order", Error, "measured requests are not in the contract's prompt order")
	IDContractRequestIndex   = def("contract", "contract.request-index", Error, "a request's index is not its position in the block")
	IDContractPromptTokens   = def("contract", "contract.prompt-tokens", Error, "prompt_tokens is not the length of prompt_token_ids, or is 0")
	IDContractPromptLength   = def("contract", "contract.prompt-length", Error, "under a contract with declared prompt lengths (prompt_rule), a request's prompt_tokens is not its prompt's declared tokens")
	IDContractObservation    = def("contract", "contract.observation", Error, "an observation is not recorded as the contract requires for the device (a number, UNKNOWN or UNSUPPORTED)")
	IDContractTokenCount     = def("contract", "contract.token-count", Error, "a measured request does not have exactly N = output_tokens tokens and timestamps")
	IDContractEOS            = def("contract", "contract.eos-in-stream", Error, "an EOS id appears among a measured request's tokens (EOS must be suppressed)")
	IDContractEOSUnknown     = def("contract", "contract.eos-unknown", Hint, "the edition does not record the model's EOS ids; EOS suppression was not checked")
	IDContractTokenRange     = def("contract", "contract.token-range", Error, "a token id is outside [0, vocab)")
	IDContractTimestamps     = def("contract", "contract.timestamps-order", Error, "per-token timestamps are negative or decrease")
	IDContractTTFT           = def("contract", "contract.ttft-timestamp", Error, "ttft_seconds is not token_ns[0] / 1e9")
	IDContractPrefill        = def("contract", "contract.prefill-time", Error, "a request's prefill_seconds is not positive, or ends after its first token (prefill_seconds > ttft_seconds)")
	IDContractRuntime        = def("contract", "contract.runtime-timestamp", Error, "runtime_seconds is not token_ns[N-1] / 1e9")
	IDContractDecode         = def("contract", "contract.decode-timestamp", Error, "decode_seconds is not (token_ns[N-1] - token_ns[0]) / 1e9")
	IDContractWarmupMeasured = def("contract", "contract.warmup-measured", Error, "the warmup is not marked excluded, or was counted as a measured request")
	IDContractWarmup         = def("contract", "contract.warmup", Error, "the warmup does not follow the contract (prompt, token count)")
	IDContractSetup          = def("contract", "contract.setup", Error, "a worker's setup is inconsistent (regime vs capacity, capacity out of range, workers of one configuration disagree)")

	// recompute: check 4.
	IDRecomputePooledDecode  = def("recompute", "recompute.pooled-decode", Error, "pooled decode tok/s differs from sum(N-1)/sum(decode_seconds) over raw")
	IDRecomputeOverallOutput = def("recompute", "recompute.overall-output", Error, "overall output tok/s differs from sum(N)/sum(runtime_seconds) over raw")
	IDRecomputeTTFTMean      = def("recompute", "recompute.ttft-mean", Error, "TTFT mean differs from the mean of raw ttft_seconds")
	IDRecomputePrefill       = def("recompute", "recompute.prefill", Error, "the prefill aggregate (prompt tokens, seconds, tok/s) differs from the raw records' prompt_tokens and prefill_seconds, or is present or absent against them")
	IDRecomputeResponseMean  = def("recompute", "recompute.response-mean", Error, "response mean differs from the mean of raw runtime_seconds")
	IDRecomputeDecodeTokens  = def("recompute", "recompute.decode-tokens", Error, "decode_tokens differs from sum(N-1)")
	IDRecomputeDecodeSeconds = def("recompute", "recompute.decode-seconds", Error, "decode_seconds differs from the ordered float64 sum of raw decode_seconds")
	IDRecomputeOutputTokens  = def("recompute", "recompute.output-tokens", Error, "output_tokens differs from sum(N)")
	IDRecomputeRuntime       = def("recompute", "recompute.runtime-seconds", Error, "runtime_seconds differs from the ordered float64 sum of raw runtime_seconds")
	IDRecomputeVRAM          = def("recompute", "recompute.vram-peak", Error, "a VRAM peak differs from the max over the configuration's workers")
	IDRecomputeVRAMTimeline  = def("recompute", "recompute.vram-timeline", Error, "a worker's VRAM timeline disagrees with its VRAM peaks (not their maxima, time going backwards, or a timeline where VRAM was not observed)")
	IDRecomputeRSS           = def("recompute", "recompute.rss-peak", Error, "the RSS peak differs from the max over the configuration's workers")
	IDRecomputeH2D           = def("recompute", "recompute.h2d-bytes", Error, "h2d_bytes differs from the sum over measured requests")
	IDRecomputeHitsMisses    = def("recompute", "recompute.hits-misses", Error, "hits or misses differ from the sum over measured requests")
	IDRecomputeLayerMisses   = def("recompute", "recompute.layer-misses", Error, "a request's misses differ from the sum of its per-layer misses, or layer_misses has the wrong length")
	IDRecomputeSpread        = def("recompute", "recompute.block-spread", Error, "block spread differs from min/max of per-block pooled decode")
	IDRecomputeRequests      = def("recompute", "recompute.requests", Error, "requests or blocks differ from the raw records")
	IDRecomputeInvariantSum  = def("recompute", "recompute.invariant-sum", Error, "an invariant counter in the configuration differs from the sum over raw requests")
	IDRecomputeSkipped       = def("recompute", "recompute.skipped", Hint, "a configuration's aggregates were not recomputed because some of its raw records do not decode")
	IDRecomputeConfigField   = def("recompute", "recompute.config-field", Error, "a configuration field (model, checkpoint, artifact, capacity, executor, ...) differs from its workers' raw setup")
	IDRecomputeBootstrap     = def("recompute", "recompute.bootstrap", Error, "a configuration's bootstrap-v1 interval (or its declared algorithm, B, level or seed) differs from the one recomputed from raw")
	IDRecomputePrefillLength = def("recompute", "recompute.prefill-lengths", Error, "a configuration's prefill rate per prompt length (mean, median, bootstrap-v1 interval of the mean, requests, prompt tokens) differs from the raw records' prompt_tokens and prefill_seconds, or is present or absent against the contract's declared lengths")
	IDRecomputeDecodeDepth   = def("recompute", "recompute.decode-depths", Error, "a configuration's decode per context depth (pooled, mean and median rate, TPOT, bootstrap-v1 interval of the pooled rate, decode tokens and seconds, requests, depth tokens) differs from the raw records' n and decode_seconds, or is present or absent against the contract's declared depths and the model's context")
	IDRecomputeQuantiles     = def("recompute", "recompute.quantiles", Error, "a configuration's p50/p90/p99 of per-request decode rate or TTFT differs from the one recomputed from raw")

	// claims: check 5.
	IDClaimsMissing     = def("claims", "claims.missing", Error, "claims.json is missing or unreadable")
	IDClaimsDuplicateID = def("claims", "claims.duplicate-id", Error, "two claims share an id, or a claim has none")
	IDClaimsStatus      = def("claims", "claims.invalid-status", Error, "evidence, validation, publication or reproduction is not a valid value")
	IDClaimsDecimals    = def("claims", "claims.decimals", Error, "decimals is outside 0..15")
	IDClaimsUnresolved  = def("claims", "claims.source-unresolved", Error, "a claim's source (or numerator/denominator) file or JSON pointer does not resolve in the edition")
	IDClaimsNotNumber   = def("claims", "claims.source-not-number", Error, "a claim's source is not a number")
	IDClaimsSourceValue = def("claims", "claims.source-value", Error, "the value recorded with a source differs from the value at its pointer")
	IDClaimsValue       = def("claims", "claims.value", Error, "a claim's value is not its source value rounded as declared")
	IDClaimsRatio       = def("claims", "claims.ratio", Error, "numerator / denominator does not equal the source value")
	IDClaimsInterval    = def("claims", "claims.interval", Error, "a claim's interval bounds are reversed (each bound's recorded value is checked against its source like the numerator's)")
	IDClaimsRatioHalf   = def("claims", "claims.ratio-incomplete", Error, "a claim has a numerator without a denominator or the reverse")

	// invariants: check 6.
	IDInvD2H            = def("invariants", "invariants.d2h-expert-bytes", Error, "expert D2H bytes observed non-zero (the contract requires 0)")
	IDInvWritebacks     = def("invariants", "invariants.writebacks", Error, "writebacks observed non-zero (the contract requires 0)")
	IDInvAuthority      = def("invariants", "invariants.authority-writes", Error, "authority writes observed non-zero (the contract requires 0)")
	IDInvHash           = def("invariants", "invariants.request-hash-bytes", Error, "request-time hash work observed non-zero (the contract requires 0)")
	IDInvArtifactReads  = def("invariants", "invariants.request-artifact-reads", Error, "request-time artifact reads observed non-zero (the contract requires 0)")
	IDInvUnknown        = def("invariants", "invariants.unknown", Hint, "retired, never reported: an unobserved required zero is now the error invariants.required-zero-unobserved")
	IDInvOther          = def("invariants", "invariants.required-zero", Error, "another observation the contract requires to be zero is non-zero")
	IDInvZeroForUnknown = def("invariants", "invariants.zero-for-unknown", Error, "a 0 is written (config or claim) where the raw record says UNKNOWN or UNSUPPORTED")

	// consistency: check 7.
	IDConsTokenStream = def("consistency", "consistency.token-stream", Error, "configurations that must share numerics (same checkpoint, expert format, KV cache element type, expert and dense activation dtypes, device, numerics family) produced different greedy tokens for a prompt")
	IDConsPromptLen   = def("consistency", "consistency.prompt-tokens", Error, "the same prompt was tokenised differently (prompt_token_ids) under the same checkpoint")
	IDConsNumerics    = def("consistency", "consistency.executor-numerics", Hint, "configurations with declared-different numerics (executor, device, KV cache element type, expert or dense activation dtype) were compared by token agreement only")
)

func itoa(i int) string { return strconv.Itoa(i) }

func quote(s string) string { return strconv.Quote(s) }
