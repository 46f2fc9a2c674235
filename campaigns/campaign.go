// Package campaigns defines benchmark campaigns and runs them: the runner.
//
// A campaign (YAML, see smoke.yaml) names an edition, the contract it runs
// (id and canonical SHA-256), a device and a list of configurations: a
// checkpoint (synthetic arch + seed, or a Hugging Face directory), an expert
// format, a per-layer capacity and an executor, with the placement and
// policy the contract prescribes, and optionally the cache's spares,
// staging and transport (staged or registered), speculative prefetch (off
// or next-layer), miss/hit overlap (off or hit-compute), the KV cache's
// element type (fp32 or fp16), and the routed experts' and the dense
// projections' activation dtypes in a batched prefill (fp32 or fp16).
// Loading is
// prometheus-config style: defaults, then a strict decode (unknown fields
// are errors), then Validate with one precise message.
//
// Running a campaign (Run) is a pipeline:
//
//	campaign + contract -> validate -> prepare artifacts (once per checkpoint
//	and expert format, in the run directory) -> one worker process per
//	(configuration, block), sequentially -> raw records (journaled by
//	SHA-256) -> aggregate (configs, claims, reports, plots) -> manifest ->
//	atomic publication of the edition
//
// Workers are separate processes so that RSS and VRAM peaks are whole-worker
// observations; the runner launches them through a WorkerLauncher (the CLI
// re-executes itself). Everything a run produces stays in its run directory
// until the edition is complete, so a killed run resumes where it stopped
// and an editions directory never holds half an edition.
//
// The package is in three parts, and this one never imports runtime/:
//
//	campaigns         the definition (Campaign, strict decode, Validate),
//	                  the runner (processes, journal, locks, publication,
//	                  reproduce) and record conformance (CheckRecord)
//	campaigns/worker  the runtime side: one worker process (worker.Run),
//	                  artifact preparation, and worker.Runtime, which
//	                  answers what the runner must know of the runtime
//	                  (the Runtime interface: names, shapes, artifacts,
//	                  ceilings)
//	campaigns/report  aggregates, claims, plots and reports, from edition
//	                  documents only (no runner, no runtime)
package campaigns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// Campaign is a parsed campaign file. Zero values are replaced by the
// defaults noted on each field before validation.
type Campaign struct {
	// Edition names the edition directory (editions/<edition>): [a-z0-9-].
	Edition     string `yaml:"edition" json:"edition"`
	Description string `yaml:"description" json:"description"`
	// Contract is the contract the campaign runs, by id and canonical hash.
	Contract ContractRef `yaml:"contract" json:"contract"`
	// Device is "cpu" or "cuda".
	Device string `yaml:"device" json:"device"`
	// Threads is the CPU backend's goroutines per op; 0 means all cores.
	// CPU device only.
	Threads int `yaml:"threads" json:"threads"`
	// Evidence and Publication are the status of every claim of the
	// edition; defaults E1 and internal.
	Evidence    string `yaml:"evidence" json:"evidence"`
	Publication string `yaml:"publication" json:"publication"`
	// Hosts declares where the workers may run, which the verifier holds
	// the edition to (physics.hosts): uniform (the default) means every
	// worker on one GPU model and driver (on the cpu device: one CPU
	// model), on whatever hosts; mixed means each configuration's workers
	// on one host (hostname, GPU and driver), configurations on different
	// ones. A run on one machine satisfies both. Left out of the frozen
	// campaign when not declared, so older editions read as uniform.
	Hosts string `yaml:"hosts" json:"hosts,omitempty"`

	Configurations []Configuration `yaml:"configurations" json:"configurations"`

	// dir is the campaign file's directory: HF checkpoint directories are
	// relative to it.
	dir string
}

// ContractRef names a contract.
type ContractRef struct {
	ID     string `yaml:"id" json:"id"`
	SHA256 string `yaml:"sha256" json:"sha256"`
}

// Configuration is one residency configuration.
type Configuration struct {
	// ID names the configuration's files (configs/<id>.json, raw/<id>/):
	// [a-z0-9-].
	ID         string     `yaml:"id" json:"id"`
	Checkpoint Checkpoint `yaml:"checkpoint" json:"checkpoint"`
	// ExpertFormat is how routed experts are stored: int4
	// (qpack-int4-b256-v1, the default) or fp16.
	ExpertFormat string `yaml:"expert_format" json:"expert_format"`
	// Capacity is the published expert rows per routed layer, top-k up to
	// the expert count.
	Capacity int `yaml:"capacity" json:"capacity"`
	// Executor is ours, one of executor.Names(): scalar-v1 or grouped-v1.
	Executor string `yaml:"executor" json:"executor"`
	// SeedExecutor is the executor name the seed's campaign used for this
	// configuration; it must map to Executor (see SeedExecutors).
	SeedExecutor string `yaml:"seed_executor" json:"seed_executor"`
	// Placement and Policy default to the contract's.
	Placement string `yaml:"placement" json:"placement"`
	Policy    string `yaml:"policy" json:"policy"`
	// Spares and Staging are the unpublished rows the layers share (one
	// pool) and the staging ring; 0 means top-k (staging: none with the
	// registered transport).
	Spares  int `yaml:"spares" json:"spares"`
	Staging int `yaml:"staging" json:"staging"`
	// Transport is how a miss copies a record to the device (cache
	// Options.Transport): staged (the default: authority -> pinned staging
	// -> row) or registered (the authority page-locked once, copied to the
	// row directly; no staging ring, so staging must stay 0). Frozen
	// campaigns from before the field omit it, which means staged.
	Transport string `yaml:"transport" json:"transport,omitempty"`
	// Prefetch is speculative expert prefetch (engine.LoadOptions.Prefetch):
	// off (the default) or next-layer (layer l+1's router run on layer l's
	// input, the predicted misses loaded while layer l computes; tokens
	// never change, transfers and hits do). next-layer runs op by op on
	// CUDA (no captured steps). Frozen campaigns from before the field omit
	// it, which means off.
	Prefetch string `yaml:"prefetch" json:"prefetch,omitempty"`
	// Overlap is miss/hit overlap (engine.LoadOptions.Overlap): off (the
	// default) or hit-compute (a layer's resident experts compute their
	// gate/up while its missed experts copy; tokens never change, timing
	// does). hit-compute runs only in CUDA's graph-segmented steps: it
	// needs device cuda and partial residency (capacity below the expert
	// count), and excludes prefetch next-layer (op by op). Frozen
	// campaigns from before the field omit it, which means off.
	Overlap string `yaml:"overlap" json:"overlap,omitempty"`
	// StepMode is how the worker issues each step (engine.LoadOptions
	// .StepMode): auto (the default: on CUDA graph-full at full
	// residency, graph-segmented below, op by op with prefetch; op by op on
	// the CPU), ops, graph-full or persistent (full residency only),
	// graph-segmented or graph-wait (CUDA only). Declaring it holds the code path fixed across
	// capacities, so that a capacity step changes residency only. Frozen
	// campaigns from before the field omit it, which means auto.
	StepMode string `yaml:"step_mode" json:"step_mode,omitempty"`
	// Prefill is how the worker runs a prompt (engine.LoadOptions.Prefill):
	// auto (the default: batched where the backend runs batched ops op by
	// op, the CPU without prefetch; token at a time on CUDA), batched (the
	// prompt as batches of positions, each weight row read once for all;
	// CPU only, prefetch off) or token (one position at a time). Tokens and
	// logits never change; the cache is asked per wave instead of per
	// position. Left out of the frozen campaign when not declared.
	Prefill string `yaml:"prefill" json:"prefill,omitempty"`
	// KV is the KV cache's element type (engine.LoadOptions.KV): fp32 (the
	// default) or fp16 (K and V stored as binary16, read back as FP32:
	// half the bytes a decode step reads at depth; tokens may change).
	// Raw records state it in artifact.kv_dtype (FP32, FP16), which the
	// verifier holds to this (physics.kv-dtype). The persistent step mode
	// reads an FP32 cache only. Left out of the frozen campaign when not
	// declared or fp32 (Parse clears it), so campaigns from before the
	// field keep their hash.
	KV string `yaml:"kv" json:"kv,omitempty"`
	// ExpertActivations is the dtype the routed experts' batched-prefill
	// matmuls take their activations in (engine.LoadOptions
	// .ExpertActivations): fp32 (the default) or fp16 (each token row
	// rounded to FP16 at one power-of-two shift, W4A16; products and sums
	// stay FP32; logits and tokens may change). Decode steps, the dense
	// projections, attention and the router stay FP32. fp16 needs INT4
	// experts (expert_format int4) and a batched prefill (not prefill
	// token, not prefetch next-layer, which prefills token at a time).
	// Raw records state it in artifact.expert_activation_dtype (FP16;
	// absent means FP32), which the verifier holds to this
	// (physics.expert-activation-dtype). Left out of the frozen campaign
	// when not declared or fp32 (Parse clears it), so campaigns from
	// before the field keep their hash.
	ExpertActivations string `yaml:"expert_activations" json:"expert_activations,omitempty"`
	// DenseActivations is the dtype a batched prefill's dense FP16
	// projections take their activations in (engine.LoadOptions
	// .DenseActivations): fp32 (the default) or fp16 (attention's q, k, v
	// and o and the shared expert's gate, up and down take activations
	// rounded to FP16 at one power-of-two shift a 32-value chunk; products
	// and sums stay FP32; logits and tokens may change). Decode steps, the
	// router, the shared expert's sigmoid gate and the head stay FP32.
	// fp16 needs a batched prefill (not prefill token, not prefetch
	// next-layer, which prefills token at a time); unlike
	// expert_activations it applies to either expert format. Raw records
	// state it in artifact.dense_activation_dtype (FP16; absent means
	// FP32), which campaigns.CheckRecord holds to this. Left out of the
	// frozen campaign when not declared or fp32 (Parse clears it), so
	// campaigns from before the field keep their hash.
	DenseActivations string `yaml:"dense_activations" json:"dense_activations,omitempty"`
}

// KVOf is the KV cache element type a configuration runs: its declared
// kv, fp32 when it declares none.
func (cfg *Configuration) KVOf() string {
	if cfg.KV == "" {
		return KVFP32
	}
	return cfg.KV
}

// ExpertActivationsOf is the routed experts' activation dtype a
// configuration runs: its declared expert_activations, fp32 when it
// declares none.
func (cfg *Configuration) ExpertActivationsOf() string {
	if cfg.ExpertActivations == "" {
		return ExpertActFP32
	}
	return cfg.ExpertActivations
}

// DenseActivationsOf is the dense projections' activation dtype a
// configuration runs: its declared dense_activations, fp32 when it
// declares none.
func (cfg *Configuration) DenseActivationsOf() string {
	if cfg.DenseActivations == "" {
		return DenseActFP32
	}
	return cfg.DenseActivations
}

// Checkpoint is exactly one of a synthetic checkpoint and a Hugging Face
// directory.
type Checkpoint struct {
	Synthetic *Synthetic `yaml:"synthetic" json:"synthetic,omitempty"`
	HF        *HF        `yaml:"hf" json:"hf,omitempty"`
}

// Synthetic is a deterministic synthetic checkpoint with the exact tensor
// shapes of a preset architecture (runtime/model presets).
type Synthetic struct {
	Arch string `yaml:"arch" json:"arch"`
	Seed uint64 `yaml:"seed" json:"seed"`
}

// HF is a Hugging Face checkpoint directory (config.json, safetensors,
// tokenizer.json). Dir is relative to the campaign file.
type HF struct {
	Dir      string `yaml:"dir" json:"dir"`
	Revision string `yaml:"revision" json:"revision"`
}

// SeedExecutors maps the seed campaign's executor names to ours.
var SeedExecutors = map[string]string{
	"PRODUCT-core scalar": "scalar-v1",
	"Grouped T3":          "grouped-v1",
	"top4-fused-v1":       "grouped-v1", // editions before issue 13 name it fused-topk-v1 (executor.Retired)
}

// Hosts declarations of a campaign (Campaign.Hosts).
const (
	HostsUniform = "uniform"
	HostsMixed   = "mixed"
)

// HostsDeclarations are the values Campaign.Hosts takes ("" is uniform).
var HostsDeclarations = []string{HostsUniform, HostsMixed}

// Expert formats of a configuration.
var expertFormats = []string{"int4", "fp16"}

// ErrInvalid marks a campaign that fails validation.
var ErrInvalid = errors.New("invalid campaign")

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// LoadFile reads and strictly decodes a campaign file and applies the
// defaults; it does not validate (see Validate).
func LoadFile(path string) (*Campaign, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	c, err := Parse(b, path)
	if err != nil {
		return nil, err
	}
	c.dir = filepath.Dir(path)
	return c, nil
}

// Parse strictly decodes a campaign (unknown fields are errors) and applies
// the defaults that do not depend on the contract.
func Parse(b []byte, name string) (*Campaign, error) {
	var c Campaign
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("campaign %s: %w: %s", name, ErrInvalid, yamlError(err))
	}
	if c.Evidence == "" {
		c.Evidence = "E1"
	}
	if c.Publication == "" {
		c.Publication = "internal"
	}
	for i := range c.Configurations {
		if c.Configurations[i].ExpertFormat == "" {
			c.Configurations[i].ExpertFormat = "int4"
		}
		if c.Configurations[i].Transport == "" {
			c.Configurations[i].Transport = TransportStaged
		}
		if c.Configurations[i].Prefetch == "" {
			c.Configurations[i].Prefetch = PrefetchOff
		}
		if c.Configurations[i].Overlap == "" {
			c.Configurations[i].Overlap = OverlapOff
		}
		if c.Configurations[i].StepMode == "" {
			c.Configurations[i].StepMode = StepAuto
		}
		// kv fp32 is the default spelled out: it is left out of the
		// frozen campaign like an absent kv, so both hash alike and
		// campaigns from before the field keep their hash.
		if c.Configurations[i].KV == KVFP32 {
			c.Configurations[i].KV = ""
		}
		// So is expert_activations fp32.
		if c.Configurations[i].ExpertActivations == ExpertActFP32 {
			c.Configurations[i].ExpertActivations = ""
		}
		// And dense_activations fp32.
		if c.Configurations[i].DenseActivations == DenseActFP32 {
			c.Configurations[i].DenseActivations = ""
		}
	}
	return &c, nil
}

var unknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type \S+`)

// yamlError rewrites yaml.v3's decode errors into one line, naming unknown
// fields as such.
func yamlError(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			if s := unknownField.FindStringSubmatch(m); s != nil {
				m = fmt.Sprintf("line %s: unknown field %q", s[1], s[2])
			}
			msgs[i] = m
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// Validate checks the campaign against its contract and the checkpoints it
// names, after filling the contract's defaults (placement, policy). It
// returns the first problem with one precise message, wrapping ErrInvalid.
// contractSHA is the contract's canonical hash; cat answers the runtime's
// names and the checkpoints' shapes (worker.Runtime).
// ContractTerms is what campaign validation reads of a contract of either
// kind (contracts.Contract, contracts.IFEval): its id and the cache state
// it prescribes.
type ContractTerms interface {
	ContractID() string
	CacheTerms() contracts.Cache
}

// LengthTerms is what validation reads of a performance contract's
// lengths and observations (contracts.Contract): each request's positions
// must fit every configuration's context, and every device the campaign
// runs on must make the observations the contract requires of it.
type LengthTerms interface {
	// MaxPositions is the most KV positions one required request of the
	// contract needs (its longest declared required prompt + output tokens
	// - 1), 0 when the prompts have no declared lengths. Where-held prompts
	// do not count: a configuration whose context cannot hold one does not
	// run it.
	MaxPositions() int
	// RequiresPrefill reports whether the contract requires
	// prefill_seconds as a number on device.
	RequiresPrefill(device string) bool
}

func (c *Campaign) Validate(kt ContractTerms, contractSHA string, cat Catalog) error {
	k := struct {
		ID    string
		Cache contracts.Cache
	}{kt.ContractID(), kt.CacheTerms()}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case !idPattern.MatchString(c.Edition):
		return bad("edition %q: an edition name is a directory name; use lowercase letters, digits and '-'", c.Edition)
	case c.Contract.ID == "":
		return bad("contract.id is missing")
	case c.Contract.ID != k.ID:
		return bad("contract.id %q, but the contract given is %q", c.Contract.ID, k.ID)
	case c.Contract.SHA256 != contractSHA:
		return bad("contract %s: the campaign declares sha256 %q but the contract's canonical hash is %s; the contract changed since the campaign was written (review the change, then update contract.sha256)",
			k.ID, c.Contract.SHA256, contractSHA)
	case c.Device != "cpu" && c.Device != "cuda":
		return bad("device %q: want cpu or cuda", c.Device)
	case c.Threads < 0:
		return bad("threads %d: want 0 (all cores) or more", c.Threads)
	case c.Threads != 0 && c.Device != "cpu":
		return bad("threads applies to the cpu device only")
	case !slices.Contains(editions.EvidenceLevels, c.Evidence):
		return bad("evidence %q: want one of %v", c.Evidence, editions.EvidenceLevels)
	case !slices.Contains(editions.PublicationStates, c.Publication):
		return bad("publication %q: want one of %v", c.Publication, editions.PublicationStates)
	case c.Hosts != "" && !slices.Contains(HostsDeclarations, c.Hosts):
		return bad("hosts %q: want %s (every worker on one GPU model and driver, the default) or %s (each configuration's workers on one host)",
			c.Hosts, HostsUniform, HostsMixed)
	case len(c.Configurations) == 0:
		return bad("no configurations")
	}
	seen := map[string]bool{}
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		if cfg.Placement == "" {
			cfg.Placement = k.Cache.InitialPlacement
		}
		if cfg.Policy == "" {
			cfg.Policy = k.Cache.Policy
		}
		if cfg.Transport == "" {
			cfg.Transport = TransportStaged
		}
		if cfg.Prefetch == "" {
			cfg.Prefetch = PrefetchOff
		}
		if cfg.Overlap == "" {
			cfg.Overlap = OverlapOff
		}
		if cfg.StepMode == "" {
			cfg.StepMode = StepAuto
		}
		if !idPattern.MatchString(cfg.ID) {
			return bad("configurations[%d]: id %q: ids become file names; use lowercase letters, digits and '-'", i, cfg.ID)
		}
		if seen[cfg.ID] {
			return bad("configurations[%d]: duplicate id %q", i, cfg.ID)
		}
		seen[cfg.ID] = true
		if err := c.validateConfig(cfg, k.ID, k.Cache, cat); err != nil {
			return bad("configuration %q: %v", cfg.ID, err)
		}
		if lt, ok := kt.(LengthTerms); ok {
			if err := c.validateLengths(cfg, k.ID, lt, cat); err != nil {
				return bad("configuration %q: %v", cfg.ID, err)
			}
		}
	}
	return nil
}

// prefillTimed reports whether timed (Names.PrefillTimed) covers steps of
// mode on device: the device by name (every mode) or device/mode. A batched
// prefill is timed where timed names device/prefill-batched, in every mode.
func prefillTimed(timed []string, device, mode string) bool {
	return slices.Contains(timed, device) || slices.Contains(timed, device+"/"+mode)
}

// stepModeOf is the step mode a configuration runs: its declared one, or
// what auto resolves to (runtime/engine's rule, stated again here and in
// the verifier's physics checks): op by op on the CPU and with next-layer
// prefetch; on CUDA graph-full at full residency, else graph-segmented.
func (c *Campaign) stepModeOf(cfg *Configuration, m Shape) string {
	switch {
	case cfg.StepMode != StepAuto:
		return cfg.StepMode
	case c.Device != "cuda", cfg.Prefetch != PrefetchOff:
		return StepOps
	case cfg.Capacity == m.Experts:
		return StepGraphFull
	}
	return StepGraphSegmented
}

// prefillOf is the prefill cfg runs in this build: a declared one, or auto
// resolved by runtime/engine's rule (batched with next-layer prefetch off,
// on the CPU and, since raw version 3, on CUDA; token at a time with it).
func prefillOf(cfg *Configuration) string {
	if cfg.Prefill == PrefillBatched || cfg.Prefill == PrefillToken {
		return cfg.Prefill
	}
	if cfg.Prefetch != "" && cfg.Prefetch != PrefetchOff {
		return PrefillToken
	}
	return PrefillBatched
}

// validateLengths refuses a configuration the contract's requests cannot
// run on: a prompt length beyond the model's context, or a required
// prefill time the device's backend cannot take.
func (c *Campaign) validateLengths(cfg *Configuration, kid string, lt LengthTerms, cat Catalog) error {
	m, err := cat.Shape(c, cfg)
	if err != nil {
		return err
	}
	if timed := cat.Names().PrefillTimed; lt.RequiresPrefill(c.Device) && !prefillTimed(timed, c.Device, c.stepModeOf(cfg, m)) &&
		!(prefillOf(cfg) == PrefillBatched && slices.Contains(timed, c.Device+"/prefill-batched")) {
		return fmt.Errorf("contract %s requires prefill_seconds on %s, but this build times the end of prefill only on %s, not in %s's %s steps",
			kid, c.Device, strings.Join(timed, ", "), c.Device, c.stepModeOf(cfg, m))
	}
	if need := lt.MaxPositions(); m.MaxPositions > 0 && need > m.MaxPositions {
		return fmt.Errorf("contract %s needs %d positions per request (its longest required prompt plus its output tokens, less one), above the %d-position context (max_position_embeddings) of %s: run a contract with shorter prompts on this checkpoint",
			kid, need, m.MaxPositions, cfg.Checkpoint)
	}
	return nil
}

func (c *Campaign) validateConfig(cfg *Configuration, kid string, kc contracts.Cache, cat Catalog) error {
	m, err := cat.Shape(c, cfg)
	if err != nil {
		return err
	}
	n := cat.Names()
	switch {
	case !slices.Contains(expertFormats, cfg.ExpertFormat):
		return fmt.Errorf("expert_format %q: want int4 or fp16", cfg.ExpertFormat)
	case cfg.Capacity > m.Experts:
		return fmt.Errorf("capacity %d is above the %d experts per layer of %s", cfg.Capacity, m.Experts, cfg.Checkpoint)
	case cfg.Capacity < m.TopK:
		return fmt.Errorf("capacity %d is below top-k %d of %s: a layer must hold at least one routed group", cfg.Capacity, m.TopK, cfg.Checkpoint)
	case !slices.Contains(n.Executors, cfg.Executor):
		return fmt.Errorf("executor %q is unknown (known: %s)", cfg.Executor, strings.Join(n.Executors, ", "))
	case cfg.Placement != kc.InitialPlacement:
		return fmt.Errorf("placement %q: contract %s prescribes the %s initial placement", cfg.Placement, kid, kc.InitialPlacement)
	case !slices.Contains(n.Placements, cfg.Placement):
		return fmt.Errorf("placement %q is unknown (known: %v)", cfg.Placement, n.Placements)
	case !kc.Admits(cfg.Policy) && len(kc.Policies) == 0:
		return fmt.Errorf("policy %q: contract %s prescribes %s eviction", cfg.Policy, kid, kc.Policy)
	case !kc.Admits(cfg.Policy):
		return fmt.Errorf("policy %q: contract %s admits %s", cfg.Policy, kid, strings.Join(kc.Policies, ", "))
	case !slices.Contains(n.Policies, cfg.Policy):
		return fmt.Errorf("policy %q is unknown (known: %v)", cfg.Policy, n.Policies)
	case cfg.Spares < 0 || cfg.Staging < 0:
		return fmt.Errorf("spares %d, staging %d: want 0 (top-k) or more", cfg.Spares, cfg.Staging)
	case !slices.Contains(n.Transports, cfg.Transport):
		return fmt.Errorf("transport %q: want %s (the default) or %s", cfg.Transport, TransportStaged, TransportRegistered)
	case cfg.Transport == TransportRegistered && cfg.Staging != 0:
		return fmt.Errorf("staging %d with transport %s: the registered transport copies from the page-locked authority and has no staging ring; leave staging unset", cfg.Staging, cfg.Transport)
	case !slices.Contains(n.Prefetch, cfg.Prefetch):
		return fmt.Errorf("prefetch %q: want %s (the default) or %s", cfg.Prefetch, PrefetchOff, PrefetchNextLayer)
	case !slices.Contains(n.Overlap, cfg.Overlap):
		return fmt.Errorf("overlap %q: want %s (the default) or %s", cfg.Overlap, OverlapOff, OverlapHitCompute)
	case cfg.Overlap == OverlapHitCompute && cfg.Prefetch != PrefetchOff:
		return fmt.Errorf("overlap %s with prefetch %s: overlap runs in captured graph-segmented steps and prefetch op by op; choose one", cfg.Overlap, cfg.Prefetch)
	case cfg.Overlap == OverlapHitCompute && c.Device != "cuda":
		return fmt.Errorf("overlap %s on device %s: overlap needs CUDA's graph-segmented steps, and the %s backend issues op by op; use device cuda or overlap off", cfg.Overlap, c.Device, c.Device)
	case cfg.Overlap == OverlapHitCompute && cfg.Capacity == m.Experts:
		return fmt.Errorf("overlap %s at full residency (capacity %d of %d): nothing misses, and full residency runs graph-full steps; overlap needs partial residency (graph-segmented)", cfg.Overlap, cfg.Capacity, m.Experts)
	case !slices.Contains(n.StepModes, cfg.StepMode):
		return fmt.Errorf("step_mode %q: want one of %s", cfg.StepMode, strings.Join(n.StepModes, ", "))
	case c.Device != "cuda" && cfg.StepMode != StepAuto && cfg.StepMode != StepOps:
		return fmt.Errorf("step_mode %s on device %s: captured steps are CUDA's; the %s backend issues op by op (use %s or %s)", cfg.StepMode, c.Device, c.Device, StepAuto, StepOps)
	case (cfg.StepMode == StepGraphFull || cfg.StepMode == StepPersistent) && cfg.Capacity != m.Experts:
		return fmt.Errorf("step_mode %s at capacity %d of %d: %s routes on the device through a table of every expert's row, so it needs full residency; use %s to hold one mode across capacities", cfg.StepMode, cfg.Capacity, m.Experts, cfg.StepMode, StepGraphSegmented)
	case cfg.Prefetch != PrefetchOff && cfg.StepMode != StepAuto && cfg.StepMode != StepOps:
		return fmt.Errorf("step_mode %s with prefetch %s: prefetch predicts between layers on the host, so it runs op by op (step_mode %s or %s)", cfg.StepMode, cfg.Prefetch, StepAuto, StepOps)
	case cfg.Prefill != "" && !slices.Contains(n.Prefill, cfg.Prefill):
		return fmt.Errorf("prefill %q: want one of %s", cfg.Prefill, strings.Join(n.Prefill, ", "))
	case cfg.Prefill == PrefillBatched && cfg.Prefetch != PrefetchOff:
		return fmt.Errorf("prefill %s with prefetch %s: next-layer prefetch predicts each position's next group between two layers, so the prompt runs token at a time (prefill %s or %s)", cfg.Prefill, cfg.Prefetch, PrefillAuto, PrefillToken)
	case cfg.KV != "" && !slices.Contains(n.KV, cfg.KV):
		return fmt.Errorf("kv %q: want %s (the default) or %s", cfg.KV, KVFP32, KVFP16)
	case cfg.KV == KVFP16 && c.stepModeOf(cfg, m) == StepPersistent:
		return fmt.Errorf("kv %s with step_mode %s: the persistent kernel reads an FP32 KV cache only; use kv %s or another step mode (graph-full)", cfg.KV, StepPersistent, KVFP32)
	case cfg.ExpertActivations != "" && !slices.Contains(n.ExpertActivations, cfg.ExpertActivations):
		return fmt.Errorf("expert_activations %q: want %s (the default) or %s", cfg.ExpertActivations, ExpertActFP32, ExpertActFP16)
	case cfg.ExpertActivations == ExpertActFP16 && cfg.ExpertFormat != "int4":
		return fmt.Errorf("expert_activations %s with expert_format %s: FP16 activations apply to INT4 experts only (W4A16); use expert_format int4 or expert_activations %s", cfg.ExpertActivations, cfg.ExpertFormat, ExpertActFP32)
	case cfg.ExpertActivations == ExpertActFP16 && cfg.Prefill == PrefillToken:
		return fmt.Errorf("expert_activations %s with prefill %s: FP16 activations apply to a batched prefill's expert matmuls; use prefill %s or %s", cfg.ExpertActivations, PrefillToken, PrefillAuto, PrefillBatched)
	case cfg.ExpertActivations == ExpertActFP16 && prefillOf(cfg) != PrefillBatched:
		return fmt.Errorf("expert_activations %s with prefetch %s: next-layer prefetch prefills token at a time, and FP16 activations apply to a batched prefill's expert matmuls; use prefetch %s or expert_activations %s", cfg.ExpertActivations, cfg.Prefetch, PrefetchOff, ExpertActFP32)
	case cfg.DenseActivations != "" && !slices.Contains(n.DenseActivations, cfg.DenseActivations):
		return fmt.Errorf("dense_activations %q: want %s (the default) or %s", cfg.DenseActivations, DenseActFP32, DenseActFP16)
	case cfg.DenseActivations == DenseActFP16 && cfg.Prefill == PrefillToken:
		return fmt.Errorf("dense_activations %s with prefill %s: FP16 activations apply to a batched prefill's dense projections; use prefill %s or %s", cfg.DenseActivations, PrefillToken, PrefillAuto, PrefillBatched)
	case cfg.DenseActivations == DenseActFP16 && prefillOf(cfg) != PrefillBatched:
		return fmt.Errorf("dense_activations %s with prefetch %s: next-layer prefetch prefills token at a time, and FP16 activations apply to a batched prefill's dense projections; use prefetch %s or dense_activations %s", cfg.DenseActivations, cfg.Prefetch, PrefetchOff, DenseActFP32)
	case cfg.Overlap == OverlapHitCompute && cfg.StepMode != StepAuto && cfg.StepMode != StepGraphSegmented:
		return fmt.Errorf("step_mode %s with overlap %s: overlap runs in graph-segmented steps (step_mode %s or %s)", cfg.StepMode, cfg.Overlap, StepAuto, StepGraphSegmented)
	}
	if cfg.SeedExecutor != "" {
		ours, ok := SeedExecutors[cfg.SeedExecutor]
		if !ok {
			return fmt.Errorf("seed_executor %q is not one of the seed's executors (%s)", cfg.SeedExecutor, seedExecutorNames())
		}
		if ours != cfg.Executor {
			return fmt.Errorf("seed_executor %q maps to %s, but executor is %s", cfg.SeedExecutor, ours, cfg.Executor)
		}
	}
	return nil
}

func seedExecutorNames() string {
	var names []string
	for n := range SeedExecutors {
		names = append(names, fmt.Sprintf("%q", n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// String describes the checkpoint: "synthetic olmoe-tiny seed 1" or
// "hf DIR@REVISION".
func (k Checkpoint) String() string {
	switch {
	case k.Synthetic != nil:
		return fmt.Sprintf("synthetic %s seed %d", k.Synthetic.Arch, k.Synthetic.Seed)
	case k.HF != nil:
		if k.HF.Revision != "" {
			return fmt.Sprintf("hf %s@%s", k.HF.Dir, k.HF.Revision)
		}
		return "hf " + k.HF.Dir
	}
	return "no checkpoint"
}

// HFDir is the HF checkpoint directory resolved against the campaign file.
func (c *Campaign) HFDir(cfg *Configuration) string {
	d := cfg.Checkpoint.HF.Dir
	if filepath.IsAbs(d) {
		return d
	}
	return filepath.Join(c.dir, d)
}

// Config returns the configuration with the given id.
func (c *Campaign) Config(id string) (*Configuration, bool) {
	for i := range c.Configurations {
		if c.Configurations[i].ID == id {
			return &c.Configurations[i], true
		}
	}
	return nil, false
}

// JSON returns the campaign (defaults applied) as canonical JSON.
func (c *Campaign) JSON() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return contracts.CanonicalJSON(b)
}

// SHA256 is the canonical hash of the campaign.
func (c *Campaign) SHA256() (string, error) {
	b, err := c.JSON()
	if err != nil {
		return "", err
	}
	return contracts.HashCanonical(b), nil
}

// Doc returns the frozen campaign document (campaign.json).
func (c *Campaign) Doc() (editions.CampaignDoc, error) {
	b, err := c.JSON()
	if err != nil {
		return editions.CampaignDoc{}, err
	}
	return editions.CampaignDoc{
		Schema: editions.SchemaCampaign, Version: editions.Version, Edition: c.Edition,
		SHA256: contracts.HashCanonical(b), Campaign: b,
	}, nil
}

// FromDoc reads a frozen campaign document back; dir resolves HF
// checkpoint directories (the original campaign file's directory).
func FromDoc(doc editions.CampaignDoc, dir string) (*Campaign, error) {
	var c Campaign
	dec := json.NewDecoder(bytes.NewReader(doc.Campaign))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("frozen campaign: %w", err)
	}
	c.dir = dir
	sum, err := c.SHA256()
	if err != nil {
		return nil, err
	}
	if sum != doc.SHA256 {
		return nil, fmt.Errorf("frozen campaign: sha256 %s does not match its content (%s)", doc.SHA256, sum)
	}
	return &c, nil
}

// ContractDoc returns the frozen contract document (contract.json).
func ContractDoc(k *contracts.Contract) (editions.ContractDoc, error) {
	b, err := k.JSON()
	if err != nil {
		return editions.ContractDoc{}, err
	}
	return editions.ContractDoc{
		Schema: editions.SchemaContract, Version: editions.Version, ID: k.ID,
		SHA256: contracts.HashCanonical(b), Contract: b,
	}, nil
}

// ContractFromDoc reads a frozen contract document back and checks its
// hash.
func ContractFromDoc(doc editions.ContractDoc) (*contracts.Contract, error) {
	k, err := contracts.FromJSON(doc.Contract)
	if err != nil {
		return nil, err
	}
	canon, err := contracts.CanonicalJSON(doc.Contract)
	if err != nil {
		return nil, err
	}
	if sum := contracts.HashCanonical(canon); sum != doc.SHA256 {
		return nil, fmt.Errorf("frozen contract %s: sha256 %s does not match its content (%s)", doc.ID, doc.SHA256, sum)
	}
	return k, nil
}
