package editions

import (
	"encoding/json"
	"strconv"
)

// Schema names (the "schema" field) and the version every document carries.
const (
	SchemaManifest = "horizon.manifest"
	SchemaRaw      = "horizon.raw"
	SchemaConfig   = "horizon.config"
	SchemaClaims   = "horizon.claims"
	SchemaCampaign = "horizon.campaign"
	SchemaContract = "horizon.contract"
	Version        = 1
	// RawVersion is the version of the raw records a worker writes now:
	// 2 adds the routing traces (Warmup.RoutingTrace,
	// Request.RoutingTrace), required from RawVersionTraces on; 3 changes
	// what a CUDA worker's prefill auto ran (RawVersionBatchedAuto). Raw
	// records of versions 1 (before traces) and 2 stay valid. Every other
	// document is Version.
	RawVersion       = 3
	RawVersionTraces = 2
	// RawVersionBatchedAuto is the first raw version whose CUDA workers
	// ran prefill auto batched (next-layer prefetch off), as the CPU's
	// always did; before it auto ran token at a time on CUDA
	// (runtime/cuda BatchedDefault, session 20).
	RawVersionBatchedAuto = 3
)

// RawVersionKnown reports whether v is a raw-record version this build
// reads (1..RawVersion).
func RawVersionKnown(v int) bool { return v >= 1 && v <= RawVersion }

// File names inside an edition.
const (
	ManifestFile = "manifest.json"
	CampaignFile = "campaign.json"
	ContractFile = "contract.json"
	ClaimsFile   = "claims.json"
	ReportMD     = "report.md"
	ReportHTML   = "report.html"
	// AttestationFile is the optional DSSE-signed in-toto statement over
	// manifest.json (horizon-bench attest); the manifest does not list it.
	AttestationFile = "attestation.dsse.json"
)

// RawPath is the raw record of one worker: raw/<config>/block-<k>.json
// (k counts from 1).
func RawPath(configID string, block int) string {
	return "raw/" + configID + "/block-" + strconv.Itoa(block) + ".json"
}

// ConfigPath is configs/<config>.json.
func ConfigPath(configID string) string { return "configs/" + configID + ".json" }

// ---------------------------------------------------------------------------
// manifest.json

// Manifest lists every other file of the edition. It is written last.
type Manifest struct {
	Schema    string      `json:"schema"`  // SchemaManifest
	Version   int         `json:"version"` // Version
	Edition   string      `json:"edition"`
	CreatedAt string      `json:"created_at"` // RFC 3339, UTC
	Tool      BuildInfo   `json:"tool"`
	Files     []FileEntry `json:"files"` // sorted by path; never lists manifest.json itself
	// Republished lists, oldest first, each time a later build rewrote the
	// edition's derived documents (configurations, claims, reports, plots,
	// this manifest) from its unchanged raw records and frozen campaign and
	// contract (horizon-bench republish). CreatedAt and Tool stay those of
	// the build that ran the workers. Absent when never republished.
	Republished []Republication `json:"republished,omitempty"`
}

// Republication is one rewrite of an edition's derived documents.
type Republication struct {
	At     string    `json:"at"` // RFC 3339, UTC
	Tool   BuildInfo `json:"tool"`
	Reason string    `json:"reason"`
	// PreviousManifestSHA256 is the SHA-256 of the manifest.json this
	// republication replaced: a reproduction made before it (bound to that
	// manifest) still belongs to the edition, whose raw records it kept.
	PreviousManifestSHA256 string `json:"previous_manifest_sha256"`
}

// ManifestLineage is the SHA-256 of every manifest.json the edition has
// had before its current one, oldest first (its republications').
func (m Manifest) ManifestLineage() []string {
	var out []string
	for _, r := range m.Republished {
		out = append(out, r.PreviousManifestSHA256)
	}
	return out
}

// FileEntry is one file's identity.
type FileEntry struct {
	Path   string `json:"path"` // slash-separated, relative to the edition root
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"` // lowercase hex
}

// BuildInfo identifies the tool that wrote a document (from
// runtime/debug.ReadBuildInfo).
type BuildInfo struct {
	Module      string   `json:"module"`
	Version     string   `json:"version"`
	GoVersion   string   `json:"go_version"`
	VCSRevision string   `json:"vcs_revision"` // "UNKNOWN" when not stamped
	VCSModified string   `json:"vcs_modified"` // "true", "false" or "UNKNOWN"
	VCSTime     string   `json:"vcs_time"`     // "UNKNOWN" when not stamped
	Deps        []string `json:"deps"`         // "path@version", sorted
}

// ---------------------------------------------------------------------------
// raw/<config>/block-<k>.json

// RawRecord is everything one worker process observed: one configuration,
// one block of the contract's prompts. The verifier recomputes every
// aggregate from these.
type RawRecord struct {
	Schema     string      `json:"schema"`  // SchemaRaw
	Version    int         `json:"version"` // RawVersion (1 before routing traces)
	Edition    string      `json:"edition"`
	ConfigID   string      `json:"config_id"`
	Block      int         `json:"block"` // 1..contract blocks
	Contract   ContractRef `json:"contract"`
	StartedAt  string      `json:"started_at"`  // RFC 3339, UTC
	FinishedAt string      `json:"finished_at"` // RFC 3339, UTC

	Environment Environment `json:"environment"`
	Checkpoint  Checkpoint  `json:"checkpoint"`
	Artifact    ArtifactRef `json:"artifact"`
	Setup       Setup       `json:"setup"`

	// Preparation covers process start to admission: artifact load, host
	// authority, cache rows and initial placement.
	Preparation Preparation `json:"preparation"`
	// Warmup ran after admission and before the first measured request; it
	// is excluded from every metric.
	Warmup Warmup `json:"warmup"`
	// Requests are the block's measured requests in contract order.
	Requests []Request `json:"requests"`

	Observations WorkerObservations `json:"observations"`
}

// ContractRef names the contract a record was measured under.
type ContractRef struct {
	ID     string `json:"id"`     // e.g. "PERF-REAL-v1"
	SHA256 string `json:"sha256"` // canonical hash of the contract
}

// Environment describes where the worker ran.
type Environment struct {
	Device   string `json:"device"` // "cpu" or "cuda"
	Hostname string `json:"hostname"`
	OS       string `json:"os"`   // GOOS/GOARCH and kernel release
	CPU      string `json:"cpu"`  // model name from /proc/cpuinfo or "UNKNOWN"
	CPUs     int    `json:"cpus"` // runtime.NumCPU
	// Threads is the CPU backend's goroutines per op (0 when the device is
	// not the CPU).
	Threads int    `json:"threads"`
	GPU     string `json:"gpu"`    // name, or "UNSUPPORTED" on the CPU device
	Driver  string `json:"driver"` // GPU driver, or "UNSUPPORTED"
	// GPUs are the GPUs of the host a cluster scheduler gave the worker
	// (Slurm's SLURM_JOB_GPUS, their indices on the host, e.g. "3"); absent
	// when no scheduler did (a local run, a cpu task). Workers on one host
	// and GPUs never overlap in time; on other GPUs or hosts they may
	// (verifier: physics.worker-overlap).
	GPUs  string    `json:"gpus,omitempty"`
	Build BuildInfo `json:"build"`
}

// Checkpoint identifies the model weights.
type Checkpoint struct {
	Kind     string `json:"kind"`     // "synthetic" or "hf"
	Arch     string `json:"arch"`     // synthetic preset (e.g. "olmoe-1b-7b") or HF model_type
	Seed     *int64 `json:"seed"`     // synthetic only, else null
	Dir      string `json:"dir"`      // HF only (as given in the campaign), else ""
	Revision string `json:"revision"` // HF only, else ""
	SHA256   string `json:"sha256"`   // checkpoint_sha256 of the files
}

// ArtifactRef identifies the prepared artifact and its dtype fields.
type ArtifactRef struct {
	SHA256       string `json:"sha256"`
	ExpertFormat string `json:"expert_format"` // "qpack-int4-b256-v1" or "fp16"
	RecordBytes  int64  `json:"record_bytes"`
	// The dtype fields of DESIGN section 4, kept separate.
	OriginalDType     string `json:"original_dtype"`     // checkpoint dtype, e.g. "BF16"
	ScaleDType        string `json:"scale_dtype"`        // "FP16", or "none" for fp16 experts
	NonRoutedDType    string `json:"nonrouted_dtype"`    // "FP16"
	ActivationDType   string `json:"activation_dtype"`   // what the backend computes activations in
	AccumulationDType string `json:"accumulation_dtype"` // "FP32"
	// KVDType is the KV cache's element type: "FP32" or "FP16" (the
	// campaign configuration's kv, engine.LoadOptions.KV). Records made
	// before the field omit it, which means FP32 (KVDTypeOf).
	KVDType string `json:"kv_dtype,omitempty"`
	// ExpertActivationDType is the dtype the routed experts' batched-
	// prefill matmuls take their activations in: "FP16" (INT4 experts
	// with activations rounded to FP16 at one power-of-two shift a token
	// row, W4A16; the campaign configuration's expert_activations,
	// engine.LoadOptions.ExpertActivations) or "FP32". Decode steps, the
	// dense projections, attention and the router take FP32 activations
	// either way. Workers write it only where it is FP16, so records of an
	// FP32 run, and records made before the field, omit it: absent means
	// FP32 (ExpertActivationDTypeOf).
	ExpertActivationDType string `json:"expert_activation_dtype,omitempty"`
	// DenseActivationDType is the dtype a batched prefill's dense FP16
	// projections (attention's q, k, v and o; the shared expert's gate, up
	// and down) take their activations in: "FP16" (each row rounded to FP16
	// at one power-of-two shift a 32-value chunk; the campaign
	// configuration's dense_activations, engine.LoadOptions.DenseActivations)
	// or "FP32". Decode steps, the router, the shared expert's sigmoid gate
	// and the head take FP32 activations either way. Workers write it only
	// where it is FP16: absent means FP32 (DenseActivationDTypeOf).
	DenseActivationDType string `json:"dense_activation_dtype,omitempty"`
}

// KV cache element types as artifact.kv_dtype spells them.
const (
	KVFP32 = "FP32"
	KVFP16 = "FP16"
)

// KVDTypeOf is the artifact's KV cache element type, FP32 where the record
// predates the field.
func (a ArtifactRef) KVDTypeOf() string {
	if a.KVDType == "" {
		return KVFP32
	}
	return a.KVDType
}

// Expert activation dtypes as artifact.expert_activation_dtype spells them.
const (
	ExpertActFP32 = "FP32"
	ExpertActFP16 = "FP16"
)

// ExpertActivationDTypeOf is the dtype the artifact's routed experts took
// their batched-prefill activations in, FP32 where the record omits it (an
// FP32 run, or a record made before the field).
func (a ArtifactRef) ExpertActivationDTypeOf() string {
	if a.ExpertActivationDType == "" {
		return ExpertActFP32
	}
	return a.ExpertActivationDType
}

// DenseActivationDTypeOf is the dtype the artifact's dense projections took
// their batched-prefill activations in, FP32 where the record omits it (an
// FP32 run, or a record made before the field). The spellings are the
// expert activations'.
func (a ArtifactRef) DenseActivationDTypeOf() string {
	if a.DenseActivationDType == "" {
		return ExpertActFP32
	}
	return a.DenseActivationDType
}

// Model describes the architecture.
type Model struct {
	ModelType       string `json:"model_type"` // "olmoe" or "qwen2_moe"
	Layers          int    `json:"layers"`
	Hidden          int    `json:"hidden"`
	ExpertsPerLayer int    `json:"experts_per_layer"`
	TopK            int    `json:"top_k"`
	ExpertFFN       int    `json:"expert_ffn"`
	SharedFFN       int    `json:"shared_ffn"` // 0 when the model has no shared expert
	Vocab           int    `json:"vocab"`
	// EOSTokenIDs are the ids EOS suppression masks; a measured request
	// contains none of them.
	EOSTokenIDs []int `json:"eos_token_ids"`
	// MaxPositions is the model's context (max_position_embeddings): a
	// where-held prompt (contracts.ContextWhereHeld) runs only where its
	// request fits it. 0 (left out) in records made before it.
	MaxPositions int `json:"max_positions,omitempty"`
}

// Setup is the residency configuration the worker ran.
type Setup struct {
	Model     Model  `json:"model"`
	Capacity  int    `json:"capacity"` // published expert rows per routed layer
	Spares    int    `json:"spares"`   // unpublished spare rows (session 29 on: one pool the layers share; before: per layer)
	Staging   int    `json:"staging"`
	Executor  string `json:"executor"`  // ours: scalar-v1, grouped-v1, fused-topk-v1
	Placement string `json:"placement"` // canonical, strided
	Policy    string `json:"policy"`    // lru, fifo
	Regime    string `json:"regime"`    // "full" when capacity == experts, else "partial"
	// Transport is the cache's miss copy path, "staged" or "registered";
	// records from before the field omit it, which means staged.
	Transport string `json:"transport,omitempty"`
	// StepMode is how the engine issued each step: "ops" (every op from the
	// host), "graph-full" (one captured graph per step, routing on the
	// device) or "graph-segmented" (captured segments between the per-layer
	// routing reads); records from before the field omit it ("ops").
	StepMode string `json:"step_mode,omitempty"`
	// Prefetch is the speculative prefetch mode: "off" or "next-layer"
	// (layer l+1's router run on layer l's input, its predicted misses
	// loaded ahead; tokens never change). Records from before the field
	// omit it, which means off.
	Prefetch string `json:"prefetch,omitempty"`
	// Overlap is the miss/hit overlap mode in force: "off" or
	// "hit-compute" (the graph-segmented step computed a layer's resident
	// experts' gate/up while its misses copied; tokens never change).
	// Records from before the field omit it, which means off.
	Overlap string `json:"overlap,omitempty"`
	// Prefill is how the prompt ran: "token" (one position at a time, the
	// plan with T = 1) or "batched" (the plan with T = the batch's
	// positions; the cache asked once per wave of distinct experts, the
	// routing trace's batch events). Records from before the field omit
	// it, which means token.
	Prefill string `json:"prefill,omitempty"`
	// TokenizerSHA256 is the SHA-256 of the tokenizer.json the worker
	// loaded from the artifact and encoded the prompts with (for a
	// synthetic checkpoint, Horizon's byte-level description). Records
	// from before the field omit it (the verifier reports the tokenizer
	// check as unverified there).
	TokenizerSHA256 string `json:"tokenizer_sha256,omitempty"`
}

// Preparation is the worker's work before admission.
type Preparation struct {
	Seconds        float64 `json:"seconds"`
	AuthorityBytes int64   `json:"authority_bytes"`
	H2DBytes       int64   `json:"h2d_bytes"` // initial placement
	H2DCopies      int64   `json:"h2d_copies"`
	// HostRegisterSeconds is the time spent page-locking the host
	// authority (registered transport only; absent otherwise).
	HostRegisterSeconds *float64 `json:"host_register_seconds,omitempty"`
}

// Warmup is the excluded warm-up request.
type Warmup struct {
	Excluded bool    `json:"excluded"` // always true; a record claiming otherwise is invalid
	PromptID string  `json:"prompt_id"`
	N        int     `json:"n"`
	TokenIDs []int   `json:"token_ids"`
	Seconds  float64 `json:"seconds"`
	// RoutingTrace is what the cache was asked during the warmup (from
	// RawVersionTraces on; absent before).
	RoutingTrace *RoutingTrace `json:"routing_trace,omitempty"`
}

// RoutingTrace is the cache's routing trace of one request (runtime/cache
// Options.Trace): every routed group leased and served, and every
// predicted group prefetched, in call order, packed by package eviction's
// codec. Replaying the worker's traces in order (warmup, then its
// requests) from the setup's initial placement with its policy and
// capacity (eviction.Model) reproduces every request's cache counters.
type RoutingTrace struct {
	Format string `json:"format"` // eviction.TraceFormat ("eviction-trace-v2"), or "eviction-trace-v1" (no batch events)
	Events int    `json:"events"` // number of events in Data
	// Data is base64 (standard, padded) of the packed events: per event
	// the bytes kind (1 lease, 2 prefetch), layer, n, then n expert ids.
	Data string `json:"data"`
}

// Request is one measured request. Timestamps are ns from admission of the
// request (the monotonic clock read when the request is handed to the
// engine).
type Request struct {
	Index          int     `json:"index"`     // position within the block, from 0
	PromptID       string  `json:"prompt_id"` // contract prompt id, in contract order
	PromptTokens   int     `json:"prompt_tokens"`
	PromptTokenIDs []int   `json:"prompt_token_ids"` // the tokenised prompt text, len PromptTokens
	N              int     `json:"n"`                // tokens produced; the contract requires output_tokens
	TokenIDs       []int   `json:"token_ids"`
	TokenNs        []int64 `json:"token_ns"`        // len N, non-decreasing
	TTFTSeconds    float64 `json:"ttft_seconds"`    // token_ns[0] / 1e9
	DecodeSeconds  float64 `json:"decode_seconds"`  // (token_ns[N-1] - token_ns[0]) / 1e9
	RuntimeSeconds float64 `json:"runtime_seconds"` // token_ns[N-1] / 1e9
	// PrefillSeconds is admission to the prompt's last logits on the
	// device, before the first selection (isolated prefill; the first
	// token's selection and read-back are in TTFT, not here). UNKNOWN where
	// the build cannot time that boundary (today: the CUDA backend, whose
	// ops run asynchronously); absent in records made before the field.
	PrefillSeconds *Obs[float64] `json:"prefill_seconds,omitempty"`
	Cache          RequestCache  `json:"cache"`
	// RoutingTrace is what the cache was asked during the request (from
	// RawVersionTraces on; absent before).
	RoutingTrace *RoutingTrace `json:"routing_trace,omitempty"`
}

// RequestCache holds the cache counters of one request. The first five are
// always observed by the cache; the contract invariants are Obs because a
// build without the counter must say UNKNOWN, never 0. H2D bytes and copies
// count every record copied to the device, prefetched ones included.
type RequestCache struct {
	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	Evictions int64 `json:"evictions"`
	H2DBytes  int64 `json:"h2d_bytes"`
	H2DCopies int64 `json:"h2d_copies"`

	D2HExpertBytes       Obs[int64] `json:"d2h_expert_bytes"`
	Writebacks           Obs[int64] `json:"writebacks"`
	AuthorityWrites      Obs[int64] `json:"authority_writes"`
	RequestHashBytes     Obs[int64] `json:"request_hash_bytes"`
	RequestArtifactReads Obs[int64] `json:"request_artifact_reads"`

	LayerMisses []int64 `json:"layer_misses"` // per routed layer

	// Prefetch is present when the setup's prefetch is on (absent in
	// records from before the field and with prefetch off).
	Prefetch *RequestPrefetch `json:"prefetch,omitempty"`
}

// RequestPrefetch holds one request's speculative-prefetch counters (see
// runtime/cache Counters). Prediction precision is Overlap / Predicted and
// recall Overlap / Routed. Used counts hits on prefetched experts during
// the request, which may have been loaded in an earlier one, so it can
// exceed Loaded in one request (never over a worker).
type RequestPrefetch struct {
	Issued    int64 `json:"issued"`    // predicted experts not resident when their prefetch ran
	Loaded    int64 `json:"loaded"`    // of them, loaded and published (the rest lacked a victim or spare row)
	Used      int64 `json:"used"`      // prefetched experts the routing then hit before their eviction
	H2DBytes  int64 `json:"h2d_bytes"` // the prefetch copies' bytes (also in the request's h2d_bytes)
	Groups    int64 `json:"groups"`    // routed groups scored against a prediction
	Predicted int64 `json:"predicted"` // Σ predicted group sizes
	Routed    int64 `json:"routed"`    // Σ routed group sizes of those groups
	Overlap   int64 `json:"overlap"`   // Σ |predicted ∩ routed|
}

// WorkerObservations are whole-worker observations.
type WorkerObservations struct {
	// VRAMPeakBytes is the device-wide driver-observed used memory peak over
	// the whole worker (NVML); UNSUPPORTED on the CPU device.
	VRAMPeakBytes Obs[int64] `json:"vram_peak_bytes"`
	// VRAMProcessPeakBytes is this process's device memory peak (NVML).
	VRAMProcessPeakBytes Obs[int64] `json:"vram_process_peak_bytes"`
	// RSSPeakBytes is the worker's VmHWM from /proc/self/status.
	RSSPeakBytes Obs[int64] `json:"rss_peak_bytes"`
	// H2DBandwidthBytesPerS is the pinned host-to-device bandwidth measured
	// by this worker; UNSUPPORTED on the CPU device.
	H2DBandwidthBytesPerS Obs[float64] `json:"h2d_bandwidth_bytes_per_s"`
	// VRAMTimeline is the sampler's timeline behind the two VRAM peaks
	// (NVML every 20 ms from worker start to the last request, failed
	// readings left out); absent where VRAM is not observed, and in records
	// from before the field. The peaks are its maxima.
	VRAMTimeline []VRAMSample `json:"vram_timeline,omitempty"`
}

// VRAMSample is one reading of the VRAM sampler.
type VRAMSample struct {
	AtNs            int64 `json:"at_ns"`             // since the sampler started
	DeviceUsedBytes int64 `json:"device_used_bytes"` // device-wide used memory
	// ProcessUsedBytes is this process's entry; UNKNOWN in a reading where
	// the driver did not list it.
	ProcessUsedBytes Obs[int64] `json:"process_used_bytes"`
}

// ---------------------------------------------------------------------------
// contract.json and campaign.json

// ContractDoc is the frozen contract. Contract is the parsed contract as a
// JSON object; SHA256 is the SHA-256 of its canonical JSON (keys sorted by
// byte order, no insignificant whitespace, no HTML escaping; see package
// contracts), so it can be recomputed from this document alone.
type ContractDoc struct {
	Schema   string          `json:"schema"`  // SchemaContract
	Version  int             `json:"version"` // Version
	ID       string          `json:"id"`      // e.g. "PERF-REAL-v1"
	SHA256   string          `json:"sha256"`
	Contract json.RawMessage `json:"contract"`
}

// CampaignDoc is the frozen campaign, after defaults were applied. SHA256
// is the canonical hash of Campaign, computed like the contract's.
type CampaignDoc struct {
	Schema   string          `json:"schema"`  // SchemaCampaign
	Version  int             `json:"version"` // Version
	Edition  string          `json:"edition"`
	SHA256   string          `json:"sha256"`
	Campaign json.RawMessage `json:"campaign"`
}

// ---------------------------------------------------------------------------
// configs/<config>.json

// ConfigDoc is the aggregate of one configuration over all its workers.
// Every metric follows DESIGN section 8 and can be recomputed from the raw
// records listed in Workers.
type ConfigDoc struct {
	Schema          string      `json:"schema"`  // SchemaConfig
	Version         int         `json:"version"` // Version
	ID              string      `json:"id"`
	Device          string      `json:"device"`
	Model           Model       `json:"model"`
	Checkpoint      Checkpoint  `json:"checkpoint"`
	Artifact        ArtifactRef `json:"artifact"`
	ExpertFormat    string      `json:"expert_format"`
	Capacity        int         `json:"capacity"`
	ExpertsPerLayer int         `json:"experts_per_layer"`
	Executor        string      `json:"executor"`
	// SeedExecutor is the executor name the seed's campaign used for this
	// configuration, when the configuration reproduces one ("" otherwise).
	SeedExecutor string     `json:"seed_executor"`
	Placement    string     `json:"placement"`
	Policy       string     `json:"policy"`
	Regime       string     `json:"regime"`
	Metrics      Metrics    `json:"metrics"`
	Invariants   Invariants `json:"invariants"`
	Requests     int        `json:"requests"` // measured requests in total
	Blocks       int        `json:"blocks"`
	Workers      []string   `json:"workers"` // raw record paths in block order
	// Uncertainty is the seeded bootstrap and per-request quantiles
	// (BootstrapV1). Optional: editions made before it lack it, and a
	// configuration where some measured request has no decode time has none.
	Uncertainty *Uncertainty `json:"uncertainty,omitempty"`
}

// The uncertainty algorithms a ConfigDoc may declare.
const (
	// BootstrapV1: over the configuration's measured requests in request
	// order (block, then record order), i = 0..n-1, with tokens_i = N_i - 1,
	// decode_seconds_i and ttft_seconds_i: a PCG (math/rand/v2 NewPCG) seeded
	// with (Uncertainty.Seed, FNV-1a-64 of the configuration id) draws
	// BootstrapResamples resamples of n indices each, with replacement; index
	// k = high 64 bits of Uint64() * n (bits.Mul64, no rejection). For each
	// resample, in draw order, pooled decode = float64(Σ tokens_k) /
	// Σ decode_seconds_k and TTFT mean = Σ ttft_seconds_k / n (float64 sums
	// in draw order). Each statistic's resample values are sorted ascending
	// and the interval is gonum stat.Quantile(0.025) and (0.975) with
	// stat.Empirical.
	BootstrapV1        = "bootstrap-v1"
	BootstrapResamples = 2000
	BootstrapLevel     = 0.95
	// BootstrapSeed is bootstrap-v1's seed. It is fixed, so that nobody
	// can search for a seed whose interval flatters a result; the
	// verifier refuses any other.
	BootstrapSeed uint64 = 20
	// QuantilesEmpiricalV1: per-request decode rate tokens_i /
	// decode_seconds_i and ttft_seconds_i, each sorted ascending, then gonum
	// stat.Quantile(p, stat.Empirical, sorted, nil) for p = 0.5, 0.9, 0.99.
	QuantilesEmpiricalV1 = "gonum-empirical-v1"
)

// Uncertainty is a configuration's seeded bootstrap intervals and
// per-request quantiles, recomputable exactly from its raw records.
type Uncertainty struct {
	Algorithm        string      `json:"algorithm"` // BootstrapV1
	Resamples        int         `json:"resamples"` // BootstrapResamples
	Seed             uint64      `json:"seed"`
	Level            float64     `json:"level"`                // BootstrapLevel
	PooledDecodeTokS Interval    `json:"pooled_decode_tok_s"`  // bootstrap interval of Metrics.PooledDecodeTokS
	TTFTMeanS        Interval    `json:"ttft_mean_s"`          // bootstrap interval of Metrics.TTFTMeanS
	Quantiles        string      `json:"quantiles"`            // QuantilesEmpiricalV1
	RequestDecodeTok Percentiles `json:"request_decode_tok_s"` // of (N_i - 1) / decode_seconds_i
	RequestTTFTS     Percentiles `json:"request_ttft_s"`       // of ttft_seconds_i
}

// Interval is a bootstrap percentile interval.
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Percentiles are the 50th, 90th and 99th percentiles of per-request values.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// Metrics are DESIGN section 8's definitions, with the sums they come from.
// Sums run in request order (block, then prompt order) in float64.
type Metrics struct {
	// PooledDecodeTokS is DecodeTokens / DecodeSeconds; UNKNOWN when no
	// request has a decode interval (every N is 1: DecodeTokens is 0).
	PooledDecodeTokS     Obs[float64] `json:"pooled_decode_tok_s"`
	OverallOutputTokS    float64      `json:"overall_output_tok_s"` // OutputTokens / RuntimeSeconds
	TTFTMeanS            float64      `json:"ttft_mean_s"`
	ResponseMeanS        float64      `json:"response_mean_s"` // mean runtime_seconds
	DecodeTokens         int64        `json:"decode_tokens"`   // Σ (N_i - 1)
	DecodeSeconds        float64      `json:"decode_seconds"`  // Σ decode_seconds_i
	OutputTokens         int64        `json:"output_tokens"`   // Σ N_i
	RuntimeSeconds       float64      `json:"runtime_seconds"` // Σ runtime_seconds_i
	VRAMPeakBytes        Obs[int64]   `json:"vram_peak_bytes"` // max over workers; UNKNOWN if any worker's is UNKNOWN
	VRAMProcessPeakBytes Obs[int64]   `json:"vram_process_peak_bytes"`
	RSSPeakBytes         Obs[int64]   `json:"rss_peak_bytes"` // max over workers
	H2DBytes             int64        `json:"h2d_bytes"`      // Σ over measured requests
	Misses               int64        `json:"misses"`         // Σ over measured requests
	Hits                 int64        `json:"hits"`
	BlockSpread          Spread       `json:"block_spread_decode_tok_s"` // min/max of per-block pooled decode
	// Prefill is present when the raw records time the prefill
	// (Request.PrefillSeconds); absent in editions made before that.
	Prefill *Prefill `json:"prefill,omitempty"`
	// PrefillLengths is the isolated prefill rate per prompt length, one
	// entry per contract prompt in contract order, under a contract with
	// declared prompt lengths (contracts.PromptRule: PERF-PREFILL-v1);
	// absent otherwise.
	PrefillLengths []PrefillLength `json:"prefill_lengths,omitempty"`
	// DecodeDepths is the decode rate per context depth, one entry per
	// contract prompt the configuration ran (contracts.PromptsFor its
	// model's context), in contract order, under a contract with declared
	// prompt lengths and a decode interval (contracts.DecodeByPrompt:
	// PERF-DEPTH-v1); absent otherwise. A where-held depth the model's
	// context cannot hold has no entry here or in PrefillLengths.
	DecodeDepths []DecodeDepth `json:"decode_depths,omitempty"`
}

// DecodeDepth is one context depth's decode over the configuration's
// measured requests of that prompt (one per block), in request order, with
// tokens_i = N_i - 1 and decode_seconds_i (first token to last: the depth's
// prefill and the first-token wait excluded).
type DecodeDepth struct {
	PromptID    string `json:"prompt_id"`
	DepthTokens int    `json:"depth_tokens"` // the declared prompt length, every request's prompt_tokens
	Requests    int    `json:"requests"`
	// DecodeTokens is Σ tokens_i, DecodeSeconds Σ decode_seconds_i.
	DecodeTokens  int64   `json:"decode_tokens"`
	DecodeSeconds float64 `json:"decode_seconds"`
	// PooledTokS is DecodeTokens / DecodeSeconds; MeanTokS the float64
	// mean of tokens_i / decode_seconds_i in request order; MedianTokS gonum
	// stat.Quantile(0.5, stat.Empirical) of those rates sorted; TPOTS
	// DecodeSeconds / DecodeTokens (seconds per output token after the
	// first). UNKNOWN when no request of the depth has a decode interval.
	PooledTokS Obs[float64] `json:"pooled_tok_s"`
	MeanTokS   Obs[float64] `json:"mean_tok_s"`
	MedianTokS Obs[float64] `json:"median_tok_s"`
	TPOTS      Obs[float64] `json:"tpot_s"`
	// Interval is BootstrapV1 of PooledTokS: the resampling of a
	// configuration's Uncertainty over this depth's requests, each
	// resample's statistic float64(Σ tokens_k) / Σ decode_seconds_k in draw
	// order, the PCG stream FNV-1a-64 of DepthStream.
	Interval *PrefillInterval `json:"interval,omitempty"`
}

// DepthStream is the bootstrap PCG stream key of one depth's decode
// interval: "<configuration id>/<prompt id>/decode" (the depth's prefill
// interval uses PrefillStream, a stream of its own).
func DepthStream(configID, promptID string) string { return configID + "/" + promptID + "/decode" }

// PrefillLength is one prompt length's isolated prefill rate over the
// configuration's measured requests of that prompt (one per block), in
// request order: rate_i = prompt_tokens / prefill_seconds_i. The rates
// are UNKNOWN, and Interval absent, when some request's prefill was not
// timed.
type PrefillLength struct {
	PromptID     string `json:"prompt_id"`
	PromptTokens int    `json:"prompt_tokens"` // the declared length, every request's prompt_tokens
	Requests     int    `json:"requests"`
	// MeanTokS is Σ rate_i / Requests (float64, request order);
	// MedianTokS is gonum stat.Quantile(0.5, stat.Empirical) of the sorted
	// rates.
	MeanTokS   Obs[float64] `json:"mean_tok_s"`
	MedianTokS Obs[float64] `json:"median_tok_s"`
	// Interval is BootstrapV1 of MeanTokS: the same resampling as a
	// configuration's Uncertainty over this length's requests, each
	// resample's statistic the mean of its rates in draw order, the PCG
	// stream FNV-1a-64 of "<configuration id>/<prompt id>".
	Interval *PrefillInterval `json:"interval,omitempty"`
}

// PrefillInterval is a bootstrap interval with its terms.
type PrefillInterval struct {
	Algorithm string  `json:"algorithm"` // BootstrapV1
	Resamples int     `json:"resamples"` // BootstrapResamples
	Seed      uint64  `json:"seed"`      // BootstrapSeed
	Level     float64 `json:"level"`     // BootstrapLevel
	Lo        float64 `json:"lo"`
	Hi        float64 `json:"hi"`
}

// PrefillStream is the bootstrap PCG stream key of one prompt length of a
// configuration (FNV-1a-64 of it is the stream).
func PrefillStream(configID, promptID string) string { return configID + "/" + promptID }

// Prefill is the isolated prefill rate over the measured requests:
// TokS = PromptTokens / Seconds, sums in request order in float64. Seconds
// and TokS are UNKNOWN when some request's prefill was not timed.
type Prefill struct {
	PromptTokens int64        `json:"prompt_tokens"` // Σ prompt_tokens_i
	Seconds      Obs[float64] `json:"seconds"`       // Σ prefill_seconds_i
	TokS         Obs[float64] `json:"tok_s"`
}

// Spread is a descriptive range, not a confidence interval; both ends are
// UNKNOWN when the blocks have no decode interval (N = 1).
type Spread struct {
	Min Obs[float64] `json:"min"`
	Max Obs[float64] `json:"max"`
}

// Invariants are the contract's required zeros, summed over measured
// requests; UNKNOWN when any request lacked the counter.
type Invariants struct {
	D2HExpertBytes       Obs[int64] `json:"d2h_expert_bytes"`
	Writebacks           Obs[int64] `json:"writebacks"`
	AuthorityWrites      Obs[int64] `json:"authority_writes"`
	RequestHashBytes     Obs[int64] `json:"request_hash_bytes"`
	RequestArtifactReads Obs[int64] `json:"request_artifact_reads"`
}

// ---------------------------------------------------------------------------
// claims.json

// ClaimsDoc lists the edition's claims.
type ClaimsDoc struct {
	Schema  string  `json:"schema"`  // SchemaClaims
	Version int     `json:"version"` // Version
	Edition string  `json:"edition"`
	Claims  []Claim `json:"claims"`
}

// Claim is one published number with where it comes from. Value must equal
// the source value rounded to Decimals places (round half away from zero).
type Claim struct {
	ID           string     `json:"id"`
	Statement    string     `json:"statement"`
	Value        float64    `json:"value"`
	Unit         string     `json:"unit"`
	Decimals     int        `json:"decimals"`
	Source       SourceRef  `json:"source"`
	Numerator    *SourceRef `json:"numerator"`    // null when the value is not a ratio
	Denominator  *SourceRef `json:"denominator"`  // null when the value is not a ratio
	Evidence     string     `json:"evidence"`     // E1..E4 (see Evidence levels)
	Validation   string     `json:"validation"`   // valid | invalid | pending
	Publication  string     `json:"publication"`  // internal | public
	Reproduction string     `json:"reproduction"` // not_attempted | reproduced | failed
	// Interval is the claim's uncertainty where its configuration carries
	// one (pooled decode and TTFT mean, bootstrap-v1); absent otherwise and
	// in editions made before it.
	Interval *ClaimInterval `json:"interval,omitempty"`
}

// ClaimInterval is a claim's interval: its bounds as source references into
// the configuration document's uncertainty block (values in the source's
// unit, unrounded), with the algorithm and level that made them.
type ClaimInterval struct {
	Algorithm string    `json:"algorithm"` // BootstrapV1
	Level     float64   `json:"level"`     // BootstrapLevel
	Lo        SourceRef `json:"lo"`
	Hi        SourceRef `json:"hi"`
}

// SourceRef points into a JSON document of the edition; Value is the value
// found there when the claim was written.
type SourceRef struct {
	File    string  `json:"file"`
	Pointer string  `json:"pointer"` // RFC 6901
	Value   float64 `json:"value"`
}

// Valid claim status values.
var (
	EvidenceLevels     = []string{"E1", "E2", "E3", "E4"}
	ValidationStates   = []string{"valid", "invalid", "pending"}
	PublicationStates  = []string{"internal", "public"}
	ReproductionStates = []string{"not_attempted", "reproduced", "failed"}
)
