// Package compare sets two or more editions side by side, the way
// llama.cpp's compare-llama-bench.py sets runs side by side.
//
// The model: the first edition is the baseline A; every other edition B is
// compared with it. Configurations are matched by id. For each matched
// configuration and each pair (A, B) one Row holds
//
//   - pooled decode tok/s, TTFT mean and the whole-worker VRAM peak, as the
//     configuration documents (configs/<id>.json) carry them, for A and B;
//   - the ratio B/A of each;
//   - each edition's block spread of each: min..max over the blocks (the
//     config document's block_spread_decode_tok_s for decode; the per-block
//     TTFT mean and the workers' VRAM peaks from the raw records);
//   - whether the generated tokens are identical, request by request (same
//     block, same prompt), from the raw records' token_ids;
//   - a verdict on pooled decode by Rule.
//
// Beside the rows, a Result lists the build, environment and setup
// differences between A and each B, one Difference per field that differs,
// and the configurations not present in every edition.
//
// Editions measured under different contracts (the raw records' contract
// id and SHA-256) are refused (ErrContract) unless Options.AnyContract:
// their numbers answer different questions.
//
// Compare trusts the documents it reads; horizon-verify is what checks that
// an edition's aggregates follow from its raw records.
package compare

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// Rule is the declared verdict rule on pooled decode, stated in every
// output format.
const Rule = "pooled decode is faster (slower) only when B's block range [min, max] lies wholly above (below) A's; " +
	"ranges that overlap or touch are within noise. With one block a range is a single point, so any difference decides."

// Verdicts.
const (
	Faster      = "faster"
	Slower      = "slower"
	WithinNoise = "within noise"
)

// Token comparison outcomes.
const (
	TokensIdentical    = "identical"
	TokensDiffer       = "differ"
	TokensNoneCompared = "none compared"
)

// ErrContract is returned for editions of different contracts without
// Options.AnyContract.
var ErrContract = errors.New("editions of different contracts")

// Options tune Compare.
type Options struct {
	// AnyContract compares editions measured under different contracts;
	// the contract then appears among the differences.
	AnyContract bool
}

// Range is a block spread, or the reason there is none (Status UNKNOWN or
// UNSUPPORTED, as for editions.Obs).
type Range struct {
	Min, Max float64
	Status   string
}

// Ok reports whether the range holds numbers.
func (r Range) Ok() bool { return r.Status == "" }

// Metric is one metric of one configuration in one edition.
type Metric struct {
	Value  editions.Obs[float64]
	Blocks Range
}

// Row is one matched configuration of one pair (A, B).
type Row struct {
	Config   string
	A, B     string // edition names
	Decode   [2]Metric
	TTFT     [2]Metric // in milliseconds
	VRAM     [2]Metric // in GiB
	Verdict  string
	Tokens   string // TokensIdentical, TokensDiffer or TokensNoneCompared
	Compared int    // requests compared (same block and prompt in both)
	Differ   int    // of them, requests whose token ids differ
}

// Ratio is B/A of a metric: UNKNOWN when either side is not a number (or A
// is 0), UNSUPPORTED when neither side can be observed.
func Ratio(m [2]Metric) editions.Obs[float64] {
	a, b := m[0].Value, m[1].Value
	switch {
	case a.Status == editions.Unsupported && b.Status == editions.Unsupported:
		return editions.UnsupportedObs[float64]()
	case !a.Ok() || !b.Ok() || a.Value == 0:
		return editions.UnknownObs[float64]()
	}
	return editions.Observed(b.Value / a.Value)
}

// Verdict applies Rule to A's and B's block ranges of pooled decode.
func Verdict(a, b Range) string {
	switch {
	case !a.Ok() || !b.Ok():
		return WithinNoise
	case b.Min > a.Max:
		return Faster
	case b.Max < a.Min:
		return Slower
	}
	return WithinNoise
}

// Difference is one field in which B differs from A: a build or
// environment field of the whole edition (Config ""), or a setup field of
// one matched configuration.
type Difference struct {
	Config string `json:"config,omitempty"`
	Field  string `json:"field"`
	A      string `json:"edition_a"`
	B      string `json:"edition_b"`
	ValueA string `json:"a"`
	ValueB string `json:"b"`
}

// Line is the difference as one line of text.
func (d Difference) Line() string {
	s := fmt.Sprintf("%s: %s (%s) vs %s (%s)", d.Field, d.ValueA, d.A, d.ValueB, d.B)
	if d.Config != "" {
		s = d.Config + " " + s
	}
	return s
}

// Unmatched is a configuration that some editions lack.
type Unmatched struct {
	Config string   `json:"config"`
	In     []string `json:"in"` // the editions holding it, in argument order
}

// EditionInfo describes one compared edition.
type EditionInfo struct {
	Name           string `json:"name"`
	Dir            string `json:"dir"`
	ContractID     string `json:"contract_id"`
	ContractSHA256 string `json:"contract_sha256"`
	Configurations int    `json:"configurations"`
}

// Result is a whole comparison.
type Result struct {
	Rule        string
	Editions    []EditionInfo // baseline first
	Differences []Difference
	Unmatched   []Unmatched
	Rows        []Row
}

// Compare compares every edition after the first with the first.
func Compare(eds []*Edition, opt Options) (*Result, error) {
	if len(eds) < 2 {
		return nil, fmt.Errorf("compare: %d editions: want two or more", len(eds))
	}
	base := eds[0]
	res := &Result{Rule: Rule, Differences: []Difference{}, Unmatched: []Unmatched{}, Rows: []Row{}}
	for _, e := range eds {
		res.Editions = append(res.Editions, EditionInfo{Name: e.Name, Dir: e.Dir, ContractID: e.Contract.ID,
			ContractSHA256: e.Contract.SHA256, Configurations: len(e.Configs)})
	}
	for _, e := range eds[1:] {
		if e.Contract != base.Contract && !opt.AnyContract {
			return nil, fmt.Errorf("%w: %s is %s (sha256 %s), %s is %s (sha256 %s); their numbers answer different questions (--any-contract compares them anyway)",
				ErrContract, base.Dir, base.Contract.ID, base.Contract.SHA256, e.Dir, e.Contract.ID, e.Contract.SHA256)
		}
		res.Differences = append(res.Differences, differences("", base.Name, e.Name, editionFields(base), editionFields(e))...)
	}
	for _, c := range base.Configs {
		for _, e := range eds[1:] {
			o := e.config(c.ID)
			if o == nil {
				continue
			}
			res.Differences = append(res.Differences, differences(c.ID, base.Name, e.Name, c.setup, o.setup)...)
			res.Rows = append(res.Rows, compareConfig(base.Name, e.Name, c, o))
		}
	}
	res.Unmatched = unmatched(eds)
	return res, nil
}

func compareConfig(a, b string, ca, cb *Config) Row {
	r := Row{Config: ca.ID, A: a, B: b}
	for i, c := range []*Config{ca, cb} {
		r.Decode[i], r.TTFT[i], r.VRAM[i] = c.Decode, c.TTFT, c.VRAM
	}
	r.Verdict = Verdict(r.Decode[0].Blocks, r.Decode[1].Blocks)
	for k, ta := range ca.Tokens {
		tb, ok := cb.Tokens[k]
		if !ok {
			continue
		}
		r.Compared++
		if !slices.Equal(ta, tb) {
			r.Differ++
		}
	}
	switch {
	case r.Compared == 0:
		r.Tokens = TokensNoneCompared
	case r.Differ > 0:
		r.Tokens = TokensDiffer
	default:
		r.Tokens = TokensIdentical
	}
	return r
}

// namedValue is a field of an edition or a configuration, as text: the
// distinct values of its records joined by ", ".
type namedValue struct{ name, value string }

// editionFields are the build and environment fields compared across
// editions, and the contract.
func editionFields(e *Edition) []namedValue {
	return []namedValue{
		{"contract", e.Contract.ID + " sha256 " + e.Contract.SHA256},
		{"device", e.Env.Device},
		{"gpu", e.Env.GPU},
		{"driver", e.Env.Driver},
		{"go_version", e.Env.GoVersion},
		{"vcs_revision", e.Env.VCSRevision},
		{"vcs_modified", e.Env.VCSModified},
	}
}

func differences(config, a, b string, fa, fb []namedValue) []Difference {
	var out []Difference
	for i := range fa {
		if fa[i].value != fb[i].value {
			out = append(out, Difference{Config: config, Field: fa[i].name, A: a, B: b, ValueA: fa[i].value, ValueB: fb[i].value})
		}
	}
	return out
}

// unmatched lists the configurations some editions lack, sorted by id.
func unmatched(eds []*Edition) []Unmatched {
	in := map[string][]string{}
	for _, e := range eds {
		for _, c := range e.Configs {
			in[c.ID] = append(in[c.ID], e.Name)
		}
	}
	ids := make([]string, 0, len(in))
	for id := range in {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := []Unmatched{}
	for _, id := range ids {
		if len(in[id]) < len(eds) {
			out = append(out, Unmatched{Config: id, In: in[id]})
		}
	}
	return out
}

// joinDistinct joins the distinct values, sorted, with ", ".
func joinDistinct(vs []string) string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
