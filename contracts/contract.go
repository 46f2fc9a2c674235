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
	"strings"

	"gopkg.in/yaml.v3"
)

// PerfRealV1 is the id of the residency campaign's contract.
const PerfRealV1 = "PERF-REAL-v1"

//go:embed perf-real-v1.yaml
var perfRealV1YAML []byte

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
	ID           string        `yaml:"id" json:"id"`
	Title        string        `yaml:"title" json:"title"`
	Description  string        `yaml:"description" json:"description"`
	Blocks       int           `yaml:"blocks" json:"blocks"`               // worker processes per configuration
	OutputTokens int           `yaml:"output_tokens" json:"output_tokens"` // N of every measured request
	Selection    string        `yaml:"selection" json:"selection"`         // "greedy"
	EOS          string        `yaml:"eos" json:"eos"`                     // "suppressed"
	Concurrency  int           `yaml:"concurrency" json:"concurrency"`     // 1
	Cache        Cache         `yaml:"cache" json:"cache"`
	Warmup       Warmup        `yaml:"warmup" json:"warmup"`
	Prompts      []Prompt      `yaml:"prompts" json:"prompts"` // in contract order
	Timing       Timing        `yaml:"timing" json:"timing"`
	Metrics      []Metric      `yaml:"metrics" json:"metrics"`
	Observations []Observation `yaml:"observations" json:"observations"`
}

// Cache is the cache state the contract prescribes.
type Cache struct {
	InitialPlacement     string `yaml:"initial_placement" json:"initial_placement"` // "canonical": experts 0..c-1
	Policy               string `yaml:"policy" json:"policy"`                       // eviction policy, "lru"
	ResetBetweenRequests bool   `yaml:"reset_between_requests" json:"reset_between_requests"`
	Scope                string `yaml:"scope" json:"scope"`
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
	switch id {
	case PerfRealV1:
		return Parse(perfRealV1YAML, "contracts/perf-real-v1.yaml")
	}
	return nil, fmt.Errorf("no built-in contract %q (built in: %s); pass a contract file instead", id, PerfRealV1)
}

// EmbeddedYAML returns the YAML text of a built-in contract.
func EmbeddedYAML(id string) ([]byte, bool) {
	if id == PerfRealV1 {
		return append([]byte(nil), perfRealV1YAML...), true
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
	case c.OutputTokens < 2:
		return bad("output_tokens %d: want at least 2 (decode runs from the first to the last token)", c.OutputTokens)
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
	case c.Cache.ResetBetweenRequests:
		return bad("cache.reset_between_requests: the runner keeps one evolving cache per worker (false)")
	case c.Warmup.OutputTokens < 1:
		return bad("warmup.output_tokens %d: want at least 1", c.Warmup.OutputTokens)
	case !c.Warmup.Excluded:
		return bad("warmup.excluded must be true: a warmup is never measured")
	case len(c.Prompts) == 0:
		return bad("no prompts")
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
