package contracts

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// IFEval contracts: an instruction-following edition of one runtime's
// responses to the IFEval prompts (google-research instruction_following_eval,
// input_data.jsonl), scored by package ifeval under a named rule set.
const (
	// IFEvalV1 runs all 541 prompts (834 instructions) up to 1,280 new
	// tokens each (lm-evaluation-harness's limit).
	IFEvalV1 = "IFEVAL-v1"
	// IFEvalSmokeV1 runs a declared subset with a short limit: the CI
	// edition of the same pipeline.
	IFEvalSmokeV1 = "IFEVAL-SMOKE-v1"
)

//go:embed ifeval-v1.yaml
var ifevalV1YAML []byte

//go:embed ifeval-smoke-v1.yaml
var ifevalSmokeV1YAML []byte

// Prompt formats of an IFEval contract.
const (
	// FormatChatTemplate renders each prompt as one user message through
	// the checkpoint's chat template (tokenizer_config.json chat_template)
	// with the generation prompt; a checkpoint without a template gets
	// the raw prompt, and the record says which it was.
	FormatChatTemplate = "chat_template"
	// FormatRaw tokenizes the prompt text as it is.
	FormatRaw = "raw"
)

// Endings of an IFEval generation.
const (
	EndingEOS    = "eos"    // the model produced an EOS id (the last token)
	EndingLength = "length" // MaxNewTokens were produced without an EOS
)

// IFEval is a parsed IFEval contract. Field order follows the YAML files.
type IFEval struct {
	ID          string `yaml:"id" json:"id"`
	Title       string `yaml:"title" json:"title"`
	Description string `yaml:"description" json:"description"`
	// Input pins the prompt file and the population scored.
	Input IFEvalInput `yaml:"input" json:"input"`
	// MaxNewTokens bounds each response; generation ends earlier at the
	// first EOS id (eos: ends).
	MaxNewTokens int    `yaml:"max_new_tokens" json:"max_new_tokens"`
	Selection    string `yaml:"selection" json:"selection"` // "greedy"
	EOS          string `yaml:"eos" json:"eos"`             // "ends"
	Concurrency  int    `yaml:"concurrency" json:"concurrency"`
	// PromptFormat is FormatChatTemplate or FormatRaw.
	PromptFormat string `yaml:"prompt_format" json:"prompt_format"`
	// ShardPrompts is how many prompts one worker process generates: a
	// campaign resumes shard by shard.
	ShardPrompts int   `yaml:"shard_prompts" json:"shard_prompts"`
	Cache        Cache `yaml:"cache" json:"cache"`
	// Scorer names the rule set (package ifeval's Rules.Version) every
	// verdict of the edition follows.
	Scorer string `yaml:"scorer" json:"scorer"`
	// Metrics define the four accuracies and the breakdowns.
	Metrics []Metric `yaml:"metrics" json:"metrics"`
}

// IFEvalInput is the prompt file and the subset of it a contract scores.
type IFEvalInput struct {
	File   string `yaml:"file" json:"file"`
	Source string `yaml:"source" json:"source"`
	SHA256 string `yaml:"sha256" json:"sha256"`
	// First > 0 scores the first First prompts of the file (in file
	// order); 0 scores all of them.
	First int `yaml:"first" json:"first"`
	// Prompts and Instructions are the population the subset must have.
	Prompts      int `yaml:"prompts" json:"prompts"`
	Instructions int `yaml:"instructions" json:"instructions"`
}

// IsIFEval reports whether id names an IFEval contract this build knows.
func IsIFEval(id string) bool { return id == IFEvalV1 || id == IFEvalSmokeV1 }

// EmbeddedIFEval returns a built-in IFEval contract.
func EmbeddedIFEval(id string) (*IFEval, error) {
	switch id {
	case IFEvalV1:
		return ParseIFEval(ifevalV1YAML, "contracts/ifeval-v1.yaml")
	case IFEvalSmokeV1:
		return ParseIFEval(ifevalSmokeV1YAML, "contracts/ifeval-smoke-v1.yaml")
	}
	return nil, fmt.Errorf("no built-in IFEval contract %q (built in: %s, %s)", id, IFEvalV1, IFEvalSmokeV1)
}

// ParseIFEval decodes an IFEval contract strictly and validates it.
func ParseIFEval(b []byte, name string) (*IFEval, error) {
	var c IFEval
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

// IFEvalFromJSON decodes the contract object of a frozen contract.json
// strictly and validates it.
func IFEvalFromJSON(b []byte) (*IFEval, error) {
	var c IFEval
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

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks the values with one precise message.
func (c *IFEval) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case !IsIFEval(c.ID):
		return bad("id %q: want %s or %s", c.ID, IFEvalV1, IFEvalSmokeV1)
	case strings.TrimSpace(c.Title) == "" || strings.TrimSpace(c.Description) == "":
		return bad("title and description are required")
	case c.Input.File == "" || c.Input.Source == "":
		return bad("input.file and input.source are required")
	case !sha256Hex.MatchString(c.Input.SHA256):
		return bad("input.sha256 %q: want 64 lowercase hex digits", c.Input.SHA256)
	case c.Input.First < 0:
		return bad("input.first %d: want 0 (all prompts) or more", c.Input.First)
	case c.Input.Prompts < 1 || c.Input.Instructions < c.Input.Prompts:
		return bad("input.prompts %d, input.instructions %d: want at least one prompt and one instruction each", c.Input.Prompts, c.Input.Instructions)
	case c.Input.First != 0 && c.Input.First != c.Input.Prompts:
		return bad("input.first %d but input.prompts %d: a subset of the first N prompts has N prompts", c.Input.First, c.Input.Prompts)
	case c.MaxNewTokens < 1:
		return bad("max_new_tokens %d: want at least 1", c.MaxNewTokens)
	case c.Selection != "greedy":
		return bad("selection %q: only greedy is supported", c.Selection)
	case c.EOS != "ends":
		return bad("eos %q: an IFEval generation ends at EOS (want \"ends\")", c.EOS)
	case c.Concurrency != 1:
		return bad("concurrency %d: only 1 is supported", c.Concurrency)
	case c.PromptFormat != FormatChatTemplate && c.PromptFormat != FormatRaw:
		return bad("prompt_format %q: want %s or %s", c.PromptFormat, FormatChatTemplate, FormatRaw)
	case c.ShardPrompts < 1:
		return bad("shard_prompts %d: want at least 1", c.ShardPrompts)
	case c.Cache.InitialPlacement == "" || c.Cache.Policy == "":
		return bad("cache.initial_placement and cache.policy are required")
	case len(c.Cache.Policies) > 0:
		return bad("cache.policies: an IFEval contract prescribes one eviction policy (cache.policy)")
	case c.Scorer == "":
		return bad("scorer is required (the ifeval rule set, e.g. ifeval-go-v1)")
	}
	var ids []string
	for i, m := range c.Metrics {
		if m.ID == "" || m.Unit == "" || m.Definition == "" {
			return bad("metrics[%d]: id, unit and definition are required", i)
		}
		if slices.Contains(ids, m.ID) {
			return bad("metrics[%d]: duplicate id %q", i, m.ID)
		}
		ids = append(ids, m.ID)
	}
	return nil
}

// Shards is how many worker shards a configuration takes.
func (c *IFEval) Shards() int { return (c.Input.Prompts + c.ShardPrompts - 1) / c.ShardPrompts }

// ShardRange is the half-open range of prompt indices (in input order,
// within the subset) of shard s, from 1.
func (c *IFEval) ShardRange(s int) (lo, hi int) {
	lo = (s - 1) * c.ShardPrompts
	return lo, min(c.Input.Prompts, lo+c.ShardPrompts)
}

// JSON returns the contract as canonical JSON.
func (c *IFEval) JSON() ([]byte, error) { return canonicalDoc(c) }

// SHA256 returns the contract's identity: the hex SHA-256 of its
// canonical JSON.
func (c *IFEval) SHA256() (string, error) { return identity(c.ID, c) }

// ContractID and CacheTerms let campaign validation read either contract
// kind.
func (c *IFEval) ContractID() string { return c.ID }

// CacheTerms returns the cache state the contract prescribes.
func (c *IFEval) CacheTerms() Cache { return c.Cache }

// ContractID is the contract's id.
func (c *Contract) ContractID() string { return c.ID }

// CacheTerms returns the cache state the contract prescribes.
func (c *Contract) CacheTerms() Cache { return c.Cache }
