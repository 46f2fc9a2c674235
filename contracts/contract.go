// Package contracts holds the benchmark contracts Horizon runs and their
// loader.
//
// A contract fixes everything a measurement must share to be comparable:
// the prompts and their order, how many blocks repeat them, the output
// length and selection rule, the excluded warmup, the cache's starting
// state and how it evolves, the timing boundaries, the metric definitions,
// and which observations each device must make (required), may lack
// (UNKNOWN) or cannot make (UNSUPPORTED). PERF-REAL-v1 (perf-real-v1.yaml,
// embedded) is the contract of the residency campaigns.
//
// Identity. A contract is identified by the SHA-256 of its canonical JSON
// form: the parsed contract encoded as JSON with object keys sorted by byte
// order, no insignificant whitespace and no HTML escaping (see
// CanonicalJSON). YAML comments and formatting are not part of it. The
// frozen contract.json of an edition holds the parsed contract under
// "contract", so anyone can recompute the hash from that object alone:
// decode it generically, re-encode it canonically, hash.
//
// Loading is strict: unknown fields are errors, then Validate checks the
// values with one precise message.
package contracts

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// PerfRealV1 is the id of the residency campaign's contract.
const PerfRealV1 = "PERF-REAL-v1"

// PerfPrefillV1 is the isolated-prefill contract: one prompt per declared
// length, made from PERF-REAL-v1's prompt texts (PromptRule), one output
// token. PerfPrefillSmokeV1 is its CI edition on the tiny CPU models, with
// shorter lengths.
const (
	PerfPrefillV1      = "PERF-PREFILL-v1"
	PerfPrefillSmokeV1 = "PERF-PREFILL-SMOKE-v1"
)

// PerfDepthV1 is the context-depth contract: decode of a declared number of
// tokens after one prompt per depth, made from PERF-REAL-v1's prompt texts
// by the same PromptRule; each depth is required or run where the context
// holds it (Prompt.Context). PerfDepthSmokeV1 is its CI edition on the
// tiny CPU models, with shallower depths and fewer output tokens.
const (
	PerfDepthV1      = "PERF-DEPTH-v1"
	PerfDepthSmokeV1 = "PERF-DEPTH-SMOKE-v1"
)

// PerfPolicyV1 is PERF-REAL-v1's protocol with an eviction policy declared
// per configuration (Cache.Policies): online policies compared under one
// contract.
const PerfPolicyV1 = "PERF-POLICY-v1"

//go:embed perf-real-v1.yaml
var perfRealV1YAML []byte

//go:embed perf-policy-v1.yaml
var perfPolicyV1YAML []byte

//go:embed perf-prefill-v1.yaml
var perfPrefillV1YAML []byte

//go:embed perf-prefill-smoke-v1.yaml
var perfPrefillSmokeV1YAML []byte

//go:embed perf-depth-v1.yaml
var perfDepthV1YAML []byte

//go:embed perf-depth-smoke-v1.yaml
var perfDepthSmokeV1YAML []byte

// embedded are the built-in performance contracts' YAML, by id.
var embedded = map[string]struct {
	file string
	yaml []byte
}{
	PerfRealV1:         {"contracts/perf-real-v1.yaml", perfRealV1YAML},
	PerfPolicyV1:       {"contracts/perf-policy-v1.yaml", perfPolicyV1YAML},
	PerfPrefillV1:      {"contracts/perf-prefill-v1.yaml", perfPrefillV1YAML},
	PerfPrefillSmokeV1: {"contracts/perf-prefill-smoke-v1.yaml", perfPrefillSmokeV1YAML},
	PerfDepthV1:        {"contracts/perf-depth-v1.yaml", perfDepthV1YAML},
	PerfDepthSmokeV1:   {"contracts/perf-depth-smoke-v1.yaml", perfDepthSmokeV1YAML},
}

// Observation requirements, per device.
const (
	// Required: the observation must be a number.
	Required = "required"
	// RequiredZero: the observation must be a number and equal zero (the
	// cache contract's invariants: observed zeros, never assumed ones).
	RequiredZero = "required_zero"
	// MayBeUnknown: a number, or UNKNOWN when the run could not observe it.
	MayBeUnknown = "may_be_unknown"
	// Unsupported: the device cannot make this observation; it must be
	// recorded as UNSUPPORTED.
	Unsupported = "unsupported"
	// Unknown: the runner does not observe it at all (stated, not recorded).
	Unknown = "unknown"
)

// Observation scopes.
const (
	ScopeWorker  = "worker"  // Field is a JSON pointer into the raw record
	ScopeRequest = "request" // Field is a JSON pointer into each measured request
	ScopeNone    = "none"    // not recorded; Field is ""
)

// Devices are the devices a contract states requirements for.
var Devices = []string{"cpu", "cuda"}

// Contract is a parsed contract. Field order follows the YAML file.
type Contract struct {
	ID           string `yaml:"id" json:"id"`
	Title        string `yaml:"title" json:"title"`
	Description  string `yaml:"description" json:"description"`
	Blocks       int    `yaml:"blocks" json:"blocks"`               // worker processes per configuration
	OutputTokens int    `yaml:"output_tokens" json:"output_tokens"` // N of every measured request
	Selection    string `yaml:"selection" json:"selection"`         // "greedy"
	EOS          string `yaml:"eos" json:"eos"`                     // "suppressed"
	Concurrency  int    `yaml:"concurrency" json:"concurrency"`     // 1
	Cache        Cache  `yaml:"cache" json:"cache"`
	Warmup       Warmup `yaml:"warmup" json:"warmup"`
	// PromptRule, when present, makes every prompt (the warmup's too) a
	// declared number of token ids from its text (Prompt.Tokens); absent
	// (PERF-REAL-v1), a prompt is its text's tokenization as it is.
	PromptRule   *PromptRule   `yaml:"prompt_rule,omitempty" json:"prompt_rule,omitempty"`
	Prompts      []Prompt      `yaml:"prompts" json:"prompts"` // in contract order
	Timing       Timing        `yaml:"timing" json:"timing"`
	Metrics      []Metric      `yaml:"metrics" json:"metrics"`
	Observations []Observation `yaml:"observations" json:"observations"`
}

// Cache is the cache state the contract prescribes.
type Cache struct {
	InitialPlacement string `yaml:"initial_placement" json:"initial_placement"` // "canonical": experts 0..c-1
	Policy           string `yaml:"policy" json:"policy"`                       // eviction policy, "lru": every configuration's, unless Policies admits others
	// Policies, when the contract declares them, are the eviction policies
	// a configuration may declare instead of Policy (the default, one of
	// them): a policy comparison measures each under the same terms.
	// Absent, every configuration runs Policy.
	Policies             []string `yaml:"policies,omitempty" json:"policies,omitempty"`
	ResetBetweenRequests bool     `yaml:"reset_between_requests" json:"reset_between_requests"`
	Scope                string   `yaml:"scope" json:"scope"`
}

// Admits reports whether a configuration may run eviction policy p under
// the contract: the contract's policy, or one of its declared policies.
func (c Cache) Admits(p string) bool { return p == c.Policy || slices.Contains(c.Policies, p) }

// Eviction names the eviction the contract prescribes, for reports: "lru
// eviction", or the declared per-configuration policies.
func (c Cache) Eviction() string {
	if len(c.Policies) == 0 {
		return c.Policy + " eviction"
	}
	return fmt.Sprintf("each configuration's declared eviction (%s by default; one of %s)", c.Policy, strings.Join(c.Policies, ", "))
}

// Warmup is the excluded request that precedes a block.
type Warmup struct {
	OutputTokens int    `yaml:"output_tokens" json:"output_tokens"`
	Excluded     bool   `yaml:"excluded" json:"excluded"`
	Prompt       Prompt `yaml:"prompt" json:"prompt"`
}

// Prompt is one fixed prompt.
type Prompt struct {
	ID    string `yaml:"id" json:"id"` // [a-z0-9-]
	Topic string `yaml:"topic" json:"topic"`
	Text  string `yaml:"text" json:"text"`
	// Tokens > 0 is the prompt's length in token ids under the contract's
	// PromptRule (PromptIDs); 0 (left out) under a contract without one.
	Tokens int `yaml:"tokens,omitempty" json:"tokens,omitempty"`
	// Context says whether every configuration must run the prompt
	// (ContextRequired, also when left out) or only one whose context
	// holds it (ContextWhereHeld: Tokens + output tokens - 1 positions at
	// most max_position_embeddings; elsewhere the worker does not run it).
	// Only under a PromptRule, whose prompts have declared lengths.
	Context string `yaml:"context,omitempty" json:"context,omitempty"`
}

// The values of Prompt.Context.
const (
	ContextRequired  = "required"
	ContextWhereHeld = "where-held"
)

// PromptRule is how a contract with declared prompt lengths makes each
// prompt's token ids from its text.
type PromptRule struct {
	// ID names the rule this package implements (RepeatTruncateV1).
	ID string `yaml:"id" json:"id"`
	// Separator joins the repetitions of the text.
	Separator  string `yaml:"separator" json:"separator"`
	Definition string `yaml:"definition" json:"definition"`
}

// RepeatTruncateV1: a prompt of L tokens is the first L ids of
// encode(text + sep + text + ... + text), k copies of the text joined by
// the separator, with k the smallest count whose encoding has at least L
// ids; encode is the checkpoint's tokenizer, as for every prompt (no
// special tokens added). It needs nothing of the tokenizer but Encode, so
// it is the same rule for the synthetic byte-level tokenizer (one id per
// byte) and a real BPE one.
const RepeatTruncateV1 = "repeat-truncate-v1"

// maxRepeats bounds k: a text whose encoding does not grow with its
// repetitions (an empty encoding) must fail, not loop.
const maxRepeats = 1 << 16

// PromptIDs returns the token ids of prompt p under rule r with encode (the
// checkpoint's tokenizer): the text's encoding as it is when r is nil,
// else r's construction to exactly p.Tokens ids. The verifier rebuilds
// them with its own code.
func PromptIDs(r *PromptRule, p Prompt, encode func(string) ([]int, error)) ([]int, error) {
	if r == nil {
		return encode(p.Text)
	}
	if r.ID != RepeatTruncateV1 {
		return nil, fmt.Errorf("prompt %s: prompt rule %q is unknown (this build knows %s)", p.ID, r.ID, RepeatTruncateV1)
	}
	if p.Tokens < 1 {
		return nil, fmt.Errorf("prompt %s: the prompt rule needs a length (tokens), got %d", p.ID, p.Tokens)
	}
	text := p.Text
	for k := 1; k <= maxRepeats; k++ {
		ids, err := encode(text)
		if err != nil {
			return nil, fmt.Errorf("prompt %s (%d repetitions): %w", p.ID, k, err)
		}
		if len(ids) >= p.Tokens {
			return ids[:p.Tokens:p.Tokens], nil
		}
		text += r.Separator + p.Text
	}
	return nil, fmt.Errorf("prompt %s: %d repetitions of its text encode to fewer than %d tokens", p.ID, maxRepeats, p.Tokens)
}

// MaxPositions is the most KV positions one of the contract's required
// requests needs: its longest declared required prompt (the warmup's
// included) plus its output tokens, less one (the last token is never fed
// back); 0 under a contract without a prompt rule, whose prompts' lengths
// depend on the tokenizer. A where-held prompt (ContextWhereHeld) is not
// counted: a configuration whose context cannot hold it does not run it.
func (c *Contract) MaxPositions() int {
	if c.PromptRule == nil {
		return 0
	}
	n := c.Warmup.Prompt.Tokens + c.Warmup.OutputTokens - 1
	for _, p := range c.Prompts {
		if p.Context != ContextWhereHeld {
			n = max(n, c.Positions(p))
		}
	}
	return n
}

// Positions is the KV positions one request of prompt p needs: its
// declared length plus the output tokens, less one.
func (c *Contract) Positions(p Prompt) int { return p.Tokens + c.OutputTokens - 1 }

// PromptsFor is the contract's prompts a configuration whose model has
// maxPositions positions (max_position_embeddings) runs, in contract
// order: every required prompt, and each where-held one whose request fits
// (Positions <= maxPositions). maxPositions 0 (not known) runs them all.
func (c *Contract) PromptsFor(maxPositions int) []Prompt {
	var out []Prompt
	for _, p := range c.Prompts {
		if p.Context != ContextWhereHeld || maxPositions <= 0 || c.Positions(p) <= maxPositions {
			out = append(out, p)
		}
	}
	return out
}

// DecodeByPrompt reports whether the contract's aggregates include decode
// per prompt (editions.DecodeDepth: PERF-DEPTH-v1): under a prompt rule,
// where each prompt has a declared length (its context depth), and with a
// decode interval (at least 2 output tokens).
func (c *Contract) DecodeByPrompt() bool { return c.PromptRule != nil && c.OutputTokens >= 2 }

// RequiresPrefill reports whether the contract requires each request's
// prefill_seconds as a number on device.
func (c *Contract) RequiresPrefill(device string) bool {
	for _, o := range c.Observations {
		if o.Scope == ScopeRequest && o.Field == "/prefill_seconds" && o.Requirement(device) == Required {
			return true
		}
	}
	return false
}

// MaxPromptTokens is the longest declared prompt length (the warmup's
// included), 0 under a contract without a prompt rule.
func (c *Contract) MaxPromptTokens() int {
	n := c.Warmup.Prompt.Tokens
	for _, p := range c.Prompts {
		n = max(n, p.Tokens)
	}
	return n
}

// Timing states the timing boundaries in words; they match engine.Result.
type Timing struct {
	Clock      string `yaml:"clock" json:"clock"`
	Admission  string `yaml:"admission" json:"admission"`
	FirstToken string `yaml:"first_token" json:"first_token"`
	TTFT       string `yaml:"ttft" json:"ttft"`
	Decode     string `yaml:"decode" json:"decode"`
	Runtime    string `yaml:"runtime" json:"runtime"`
}

// Metric is one metric definition.
type Metric struct {
	ID         string `yaml:"id" json:"id"`
	Unit       string `yaml:"unit" json:"unit"`
	Definition string `yaml:"definition" json:"definition"`
}

// Observation states what each device must observe.
type Observation struct {
	Name       string `yaml:"name" json:"name"`
	Scope      string `yaml:"scope" json:"scope"` // ScopeWorker, ScopeRequest or ScopeNone
	Field      string `yaml:"field" json:"field"` // JSON pointer (see Scope)
	CPU        string `yaml:"cpu" json:"cpu"`     // a requirement
	CUDA       string `yaml:"cuda" json:"cuda"`
	Definition string `yaml:"definition" json:"definition"`
}

// Requirement returns the observation's requirement on device.
func (o Observation) Requirement(device string) string {
	if device == "cuda" {
		return o.CUDA
	}
	return o.CPU
}

// ErrInvalid marks a contract that fails Validate.
var ErrInvalid = errors.New("invalid contract")

// Embedded returns the contract built into this binary with the given id.
func Embedded(id string) (*Contract, error) {
	if e, ok := embedded[id]; ok {
		return Parse(e.yaml, e.file)
	}
	return nil, fmt.Errorf("no built-in contract %q (built in: %s); pass a contract file instead", id, strings.Join(EmbeddedIDs(), ", "))
}

// EmbeddedIDs lists the built-in performance contracts, sorted.
func EmbeddedIDs() []string {
	ids := make([]string, 0, len(embedded))
	for id := range embedded {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// EmbeddedYAML returns the YAML text of a built-in contract.
func EmbeddedYAML(id string) ([]byte, bool) {
	if e, ok := embedded[id]; ok {
		return append([]byte(nil), e.yaml...), true
	}
	return nil, false
}

// LoadFile reads and parses a contract file.
func LoadFile(path string) (*Contract, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("contract: %w", err)
	}
	return Parse(b, path)
}

// Parse decodes a contract strictly (unknown fields are errors) and
// validates it. name labels errors.
func Parse(b []byte, name string) (*Contract, error) {
	var c Contract
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

var unknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type \S+`)

// yamlError rewrites yaml.v3's decode errors into one line each, with
// unknown fields named as such.
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

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Validate checks the values the runner relies on; the first problem is
// returned, wrapping ErrInvalid.
func (c *Contract) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ID == "":
		return bad("id is empty")
	case c.Blocks < 1:
		return bad("blocks %d: want at least 1", c.Blocks)
	case c.OutputTokens < 1:
		return bad("output_tokens %d: want at least 1 (with 1 there is no decode interval: decode metrics are UNKNOWN)", c.OutputTokens)
	case c.Selection != "greedy":
		return bad("selection %q: the runner implements only greedy", c.Selection)
	case c.EOS != "suppressed":
		return bad("eos %q: the runner implements only suppressed", c.EOS)
	case c.Concurrency != 1:
		return bad("concurrency %d: the runner serves one request at a time (1)", c.Concurrency)
	case c.Cache.InitialPlacement == "":
		return bad("cache.initial_placement is empty")
	case c.Cache.Policy == "":
		return bad("cache.policy is empty")
	case len(c.Cache.Policies) > 0 && !slices.Contains(c.Cache.Policies, c.Cache.Policy):
		return bad("cache.policies %v do not include cache.policy %q, the default", c.Cache.Policies, c.Cache.Policy)
	case c.Cache.ResetBetweenRequests:
		return bad("cache.reset_between_requests: the runner keeps one evolving cache per worker (false)")
	case c.Warmup.OutputTokens < 1:
		return bad("warmup.output_tokens %d: want at least 1", c.Warmup.OutputTokens)
	case !c.Warmup.Excluded:
		return bad("warmup.excluded must be true: a warmup is never measured")
	case len(c.Prompts) == 0:
		return bad("no prompts")
	}
	if r := c.PromptRule; r != nil {
		switch {
		case r.ID != RepeatTruncateV1:
			return bad("prompt_rule.id %q: the runner implements %s", r.ID, RepeatTruncateV1)
		case r.Definition == "":
			return bad("prompt_rule.definition is empty: the contract must state how its prompts are made")
		}
	}
	seen := map[string]bool{}
	for i, p := range append([]Prompt{c.Warmup.Prompt}, c.Prompts...) {
		where := "warmup.prompt"
		if i > 0 {
			where = fmt.Sprintf("prompts[%d]", i-1)
		}
		switch {
		case !idPattern.MatchString(p.ID):
			return bad("%s: id %q: use lowercase letters, digits and '-'", where, p.ID)
		case seen[p.ID]:
			return bad("%s: duplicate prompt id %q", where, p.ID)
		case p.Text == "":
			return bad("%s (%s): empty text", where, p.ID)
		case c.PromptRule != nil && p.Tokens < 1:
			return bad("%s (%s): tokens %d: under prompt_rule %s every prompt declares its length (at least 1)", where, p.ID, p.Tokens, c.PromptRule.ID)
		case c.PromptRule == nil && p.Tokens != 0:
			return bad("%s (%s): tokens %d without a prompt_rule: a declared length needs the rule that makes it", where, p.ID, p.Tokens)
		case p.Context != "" && p.Context != ContextRequired && p.Context != ContextWhereHeld:
			return bad("%s (%s): context %q: want %s or %s", where, p.ID, p.Context, ContextRequired, ContextWhereHeld)
		case p.Context != "" && c.PromptRule == nil:
			return bad("%s (%s): context %q without a prompt_rule: whether the context holds a prompt needs its declared length", where, p.ID, p.Context)
		case i == 0 && p.Context == ContextWhereHeld:
			return bad("%s (%s): context %s: the warmup runs on every configuration", where, p.ID, p.Context)
		}
		seen[p.ID] = true
	}
	metrics := map[string]bool{}
	for i, m := range c.Metrics {
		if m.ID == "" || m.Definition == "" || metrics[m.ID] {
			return bad("metrics[%d]: each metric needs a unique id and a definition", i)
		}
		metrics[m.ID] = true
	}
	obs := map[string]bool{}
	for i, o := range c.Observations {
		where := fmt.Sprintf("observations[%d] (%s)", i, o.Name)
		if o.Name == "" || obs[o.Name] {
			return bad("%s: each observation needs a unique name", where)
		}
		obs[o.Name] = true
		switch o.Scope {
		case ScopeWorker, ScopeRequest:
			if !strings.HasPrefix(o.Field, "/") {
				return bad("%s: field %q: want a JSON pointer", where, o.Field)
			}
		case ScopeNone:
			if o.Field != "" {
				return bad("%s: scope none records nothing, field must be empty", where)
			}
		default:
			return bad("%s: scope %q: want worker, request or none", where, o.Scope)
		}
		for _, d := range Devices {
			switch r := o.Requirement(d); r {
			case Required, RequiredZero, MayBeUnknown, Unsupported, Unknown:
				if o.Scope == ScopeNone && r != Unknown && r != Unsupported {
					return bad("%s: %s %q: an unrecorded observation can only be unknown or unsupported", where, d, r)
				}
			default:
				return bad("%s: %s requirement %q: want required, required_zero, may_be_unknown, unsupported or unknown", where, d, r)
			}
		}
	}
	return nil
}

// Prompt returns the prompt with the given id (the warmup included).
func (c *Contract) Prompt(id string) (Prompt, bool) {
	if c.Warmup.Prompt.ID == id {
		return c.Warmup.Prompt, true
	}
	for _, p := range c.Prompts {
		if p.ID == id {
			return p, true
		}
	}
	return Prompt{}, false
}

// Metric returns the definition of a metric.
func (c *Contract) Metric(id string) (Metric, bool) {
	for _, m := range c.Metrics {
		if m.ID == id {
			return m, true
		}
	}
	return Metric{}, false
}

// JSON returns the contract as canonical JSON.
func (c *Contract) JSON() ([]byte, error) { return canonicalDoc(c) }

// SHA256 returns the contract's identity: the lowercase hex SHA-256 of its
// canonical JSON.
func (c *Contract) SHA256() (string, error) { return identity(c.ID, c) }

// canonicalDoc is a contract of either kind as canonical JSON.
func canonicalDoc(c any) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return CanonicalJSON(b)
}

// identity is the hex SHA-256 of a contract's canonical JSON.
func identity(id string, c any) (string, error) {
	b, err := canonicalDoc(c)
	if err != nil {
		return "", fmt.Errorf("contract %s: %w", id, err)
	}
	return HashCanonical(b), nil
}

// HashCanonical is the hex SHA-256 of canonical JSON bytes.
func HashCanonical(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// CanonicalJSON re-encodes one JSON value canonically: object keys sorted
// by byte order, no insignificant whitespace, no HTML escaping, numbers
// kept as written. Decoding generically and encoding with encoding/json
// gives exactly this, which is why any JSON tool can reproduce it.
func CanonicalJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("canonical JSON: more than one value")
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// FromJSON decodes a contract from its JSON form (the "contract" object of
// an edition's contract.json) strictly and validates it.
func FromJSON(b []byte) (*Contract, error) {
	var c Contract
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("contract JSON: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
