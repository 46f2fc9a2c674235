package contracts

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Fidelity contracts: a paired edition of two arms of one checkpoint on
// the same IFEval prompts. The reference arm keeps the routed experts in
// FP16, the treatment arm quantises them (W4A16, INT4 b256); everything
// else (executor, capacity, step mode, prompts, limits) is equal. Each
// prompt's two responses are scored by the frozen IFEval checkers and
// paired, and the reference's tokens are fed to the treatment arm
// (teacher forcing) to measure the per-token divergence of the two
// next-token distributions (package fidelity).
const (
	// FidelityV1 runs the first 120 IFEval prompts by key (the seed's
	// 120) up to 1,280 new tokens, on the OLMoE and Qwen full shapes.
	FidelityV1 = "FIDELITY-v1"
	// FidelitySmokeV1 runs a handful of prompts with a short limit on the
	// tiny CPU models: the CI edition of the same pipeline.
	FidelitySmokeV1 = "FIDELITY-SMOKE-v1"
)

//go:embed fidelity-v1.yaml
var fidelityV1YAML []byte

//go:embed fidelity-smoke-v1.yaml
var fidelitySmokeV1YAML []byte

// Arms name the expert formats (a campaign configuration's expert_format)
// of the two arms.
type Arms struct {
	Reference string `yaml:"reference" json:"reference"` // "fp16"
	Treatment string `yaml:"treatment" json:"treatment"` // "int4"
}

// FidelityBootstrap is the percentile bootstrap of every interval.
type FidelityBootstrap struct {
	Resamples int     `yaml:"resamples" json:"resamples"`
	Seed      uint64  `yaml:"seed" json:"seed"`
	Level     float64 `yaml:"level" json:"level"`
}

// Fidelity is a parsed fidelity contract. Field order follows the YAML
// files; the generation terms are an IFEval contract's.
type Fidelity struct {
	ID           string      `yaml:"id" json:"id"`
	Title        string      `yaml:"title" json:"title"`
	Description  string      `yaml:"description" json:"description"`
	Input        IFEvalInput `yaml:"input" json:"input"`
	MaxNewTokens int         `yaml:"max_new_tokens" json:"max_new_tokens"`
	Selection    string      `yaml:"selection" json:"selection"`
	EOS          string      `yaml:"eos" json:"eos"`
	Concurrency  int         `yaml:"concurrency" json:"concurrency"`
	PromptFormat string      `yaml:"prompt_format" json:"prompt_format"`
	ShardPrompts int         `yaml:"shard_prompts" json:"shard_prompts"`
	Cache        Cache       `yaml:"cache" json:"cache"`
	Scorer       string      `yaml:"scorer" json:"scorer"`
	// Arms are the two expert formats compared.
	Arms Arms `yaml:"arms" json:"arms"`
	// TopK is how many of the reference's top ids each position keeps
	// with both arms' logits and log-probabilities.
	TopK      int               `yaml:"top_k" json:"top_k"`
	Bootstrap FidelityBootstrap `yaml:"bootstrap" json:"bootstrap"`
	Metrics   []Metric          `yaml:"metrics" json:"metrics"`
}

// IsFidelity reports whether id names a fidelity contract this build
// knows.
func IsFidelity(id string) bool { return id == FidelityV1 || id == FidelitySmokeV1 }

// EmbeddedFidelity returns a built-in fidelity contract.
func EmbeddedFidelity(id string) (*Fidelity, error) {
	switch id {
	case FidelityV1:
		return ParseFidelity(fidelityV1YAML, "contracts/fidelity-v1.yaml")
	case FidelitySmokeV1:
		return ParseFidelity(fidelitySmokeV1YAML, "contracts/fidelity-smoke-v1.yaml")
	}
	return nil, fmt.Errorf("no built-in fidelity contract %q (built in: %s, %s)", id, FidelityV1, FidelitySmokeV1)
}

// ParseFidelity decodes a fidelity contract strictly and validates it.
func ParseFidelity(b []byte, name string) (*Fidelity, error) {
	var c Fidelity
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("contract %s: %s", name, yamlError(err))
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("contract %s: %w", name, err)
	}
	return &c, nil
}

// FidelityFromJSON decodes the contract object of a frozen contract.json
// strictly and validates it.
func FidelityFromJSON(b []byte) (*Fidelity, error) {
	var c Fidelity
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("contract: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the values with one precise message: the generation
// terms as an IFEval contract's, then the arms, top-k and bootstrap.
func (c *Fidelity) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if !IsFidelity(c.ID) {
		return bad("id %q: want %s or %s", c.ID, FidelityV1, FidelitySmokeV1)
	}
	g := c.Generation()
	g.ID = IFEvalV1 // the generation terms, validated as an IFEval contract's
	if err := g.Validate(); err != nil {
		return err
	}
	switch {
	case c.Arms.Reference != "fp16" || c.Arms.Treatment != "int4":
		return bad("arms: reference %q, treatment %q: want fp16 against int4 (the unquantised path against W4A16)", c.Arms.Reference, c.Arms.Treatment)
	case c.TopK < 1:
		return bad("top_k %d: want at least 1", c.TopK)
	case c.Bootstrap.Resamples < 100 || !(c.Bootstrap.Level > 0 && c.Bootstrap.Level < 1):
		return bad("bootstrap: %d resamples at level %v: want at least 100 and a level in (0, 1)", c.Bootstrap.Resamples, c.Bootstrap.Level)
	}
	var ids []string
	for _, m := range c.Metrics {
		if slices.Contains(ids, m.ID) {
			return bad("metrics: duplicate id %q", m.ID)
		}
		ids = append(ids, m.ID)
	}
	for _, want := range FidelityMetrics {
		if !slices.Contains(ids, want) {
			return bad("metrics: %s is missing (want %s)", want, strings.Join(FidelityMetrics, ", "))
		}
	}
	return nil
}

// FidelityMetrics are the metric ids every fidelity contract defines (the
// claims' metric ids).
var FidelityMetrics = []string{
	"paired_regressions", "paired_improvements", "mcnemar_p",
	"kl_median", "kl_p90", "kl_max", "top1_agreement", "max_abs_logit_diff_max",
}

// Generation is the contract's generation terms as an IFEval contract
// (its ID is the fidelity contract's): what each arm runs, and what the
// IFEval shard helpers check an arm's responses against.
func (c *Fidelity) Generation() *IFEval {
	return &IFEval{
		ID: c.ID, Title: c.Title, Description: c.Description, Input: c.Input, MaxNewTokens: c.MaxNewTokens,
		Selection: c.Selection, EOS: c.EOS, Concurrency: c.Concurrency, PromptFormat: c.PromptFormat,
		ShardPrompts: c.ShardPrompts, Cache: c.Cache, Scorer: c.Scorer, Metrics: c.Metrics,
	}
}

// Shards is how many worker shards an arm pair takes.
func (c *Fidelity) Shards() int { return c.Generation().Shards() }

// JSON returns the contract as canonical JSON.
func (c *Fidelity) JSON() ([]byte, error) { return canonicalDoc(c) }

// SHA256 returns the contract's identity.
func (c *Fidelity) SHA256() (string, error) { return identity(c.ID, c) }

// ContractID is the contract's id.
func (c *Fidelity) ContractID() string { return c.ID }

// CacheTerms returns the cache state the contract prescribes.
func (c *Fidelity) CacheTerms() Cache { return c.Cache }
