package verifier

import (
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// Options configure a verification.
type Options struct {
	// Schemas validates documents (check 2). Nil skips validation with a
	// schema.unavailable hint.
	Schemas SchemaSet
	// SharedNumerics lists executors designed to produce bit-identical
	// greedy tokens from the same checkpoint, expert format and device; nil
	// means DefaultSharedNumerics. Configurations whose executors are both
	// in the list must agree token for token (an error otherwise); an
	// executor outside it declares its own numerics, and its agreement with
	// others is reported as a hint.
	SharedNumerics []string

	// ContractFile, when set, is a contract YAML file the edition may cite
	// instead of a contract this project releases (check binding): the
	// edition's contract must be that file's canonical form.
	ContractFile string
	// CampaignFile, when set, is the campaign YAML the edition claims to
	// have run (campaigns/<name>.yaml): the frozen campaign must be it.
	CampaignFile string
	// TrustedKey, when set, is an ed25519 public key file
	// (horizon-bench keygen): the edition's attestation.dsse.json must be a
	// valid signature by it over manifest.json (check signature).
	TrustedKey string
	// Reproduction, when set, is a directory written by horizon-bench
	// reproduce for this edition (check reproduction): its record must
	// belong to the edition, its comparisons recompute from the two sets of
	// raw records it keeps, and each claim is reported reproduced or not.
	Reproduction string
}

// DefaultSharedNumerics are our executors: they share numerics by design
// (runtime/executor tests them bit-identical). fused-topk-v1 is history:
// retired in issue 13 (it ran grouped-v1's steps), it stays here so that
// committed editions naming it keep verifying.
var DefaultSharedNumerics = []string{"scalar-v1", "grouped-v1", "fused-topk-v1"}

// Verify checks the edition in dir. It returns a report whose findings say
// what is wrong; the error is non-nil (wrapping ErrUnreadable) only when the
// edition cannot be read at all, and then the report holds one
// edition.unreadable finding. Verify never panics on a corrupt edition: a
// check that crashes is recovered and reported as internal.panic.
func Verify(dir string, opts Options) (rep *Report, err error) {
	rep = &Report{Dir: dir}
	defer func() {
		if r := recover(); r != nil {
			rep.Findings = append(rep.Findings, panicFinding("edition", r))
			err = nil
		}
	}()
	e, err := readEdition(dir)
	if err != nil {
		rep.Findings = append(rep.Findings, Finding{
			Check: "edition", ID: IDEditionUnreadable, Severity: Error,
			File: editions.ManifestFile, Message: err.Error(),
		})
		return rep, err
	}
	if opts.SharedNumerics == nil {
		opts.SharedNumerics = DefaultSharedNumerics
	}
	v := newView(e, opts)
	rep.Edition = e.Manifest.Edition
	for _, en := range e.entries {
		if en.regular {
			rep.Files++
		}
	}
	rep.Configurations = len(v.configs)
	rep.RawRecords = len(e.raws)
	for _, r := range e.raws {
		rep.Requests += len(r.Requests)
	}
	if e.claims != nil {
		rep.Claims = len(e.claims.Claims)
	}

	runs := checkRuns
	if isIFEvalEdition(e) {
		runs = ifevalRuns
		rep.Configurations, rep.RawRecords, rep.Requests, rep.Claims = ifevalCounts(e)
	}
	if isFidelityEdition(e) {
		runs = fidelityRuns
		rep.Configurations, rep.RawRecords, rep.Requests, rep.Claims = fidelityCounts(e)
	}
	if isIFEvalEdition(e) || isFidelityEdition(e) {
		rep.Ran = []string{"edition"}
		for _, c := range runs {
			rep.Ran = append(rep.Ran, c.name)
		}
	}
	for _, c := range runs {
		rep.Findings = append(rep.Findings, runCheck(c.name, c.run, v)...)
	}
	// A check may report a finding that belongs to another (claims reports
	// invariants.zero-for-unknown): keep the report grouped by check.
	order := map[string]int{}
	for i, c := range Checks {
		order[c] = i
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		return order[rep.Findings[i].Check] < order[rep.Findings[j].Check]
	})
	return rep, nil
}

// checkRuns are the checks Verify runs, in order: Checks without
// "edition", which names findings about reading the edition at all.
var checkRuns = []struct {
	name string
	run  func(*view, *findings)
}{
	{"manifest", checkManifest},
	{"schema", checkSchemas},
	{"contract", checkContract},
	{"recompute", checkRecompute},
	{"claims", checkClaims},
	{"invariants", checkInvariants},
	{"consistency", checkConsistency},
	{"binding", checkBinding},
	{"physics", checkPhysics},
	{"replay", checkReplay},
	{"derived", checkDerived},
	{"signature", checkSignature},
	{"reproduction", checkReproduction},
}

// RunOrder lists the names of the checks Verify runs, in the order it runs
// them: a residency edition's, with an IFEval edition's own (ifeval) and a
// fidelity edition's own (fidelity) in their place (horizon-verify --help describes each and counts them from
// this list).
func RunOrder() []string {
	order := map[string]int{}
	for i, c := range Checks {
		order[c] = i
	}
	var names []string
	for _, runs := range [][]struct {
		name string
		run  func(*view, *findings)
	}{checkRuns, ifevalRuns, fidelityRuns} {
		for _, c := range runs {
			if !slices.Contains(names, c.name) {
				names = append(names, c.name)
			}
		}
	}
	slices.SortStableFunc(names, func(a, b string) int { return order[a] - order[b] })
	return names
}

// runCheck runs one check; a panic inside it becomes an internal.panic
// finding and the other checks still run.
func runCheck(name string, run func(*view, *findings), v *view) (out []Finding) {
	fs := &findings{check: name}
	defer func() {
		if r := recover(); r != nil {
			out = append(fs.list, panicFinding(name, r))
		}
	}()
	run(v, fs)
	return fs.list
}

func panicFinding(check string, r any) Finding {
	stack := strings.Split(string(debug.Stack()), "\n")
	where := ""
	// The first frame below the runtime's panic machinery names the culprit.
	for i, l := range stack {
		if strings.Contains(l, "panic(") && i+3 < len(stack) {
			where = strings.TrimSpace(stack[i+3])
			break
		}
	}
	return Finding{
		Check: check, ID: IDInternalPanic, Severity: Error,
		Message: fmt.Sprintf("check %s crashed (please report this verifier bug): %v at %s", check, r, where),
	}
}

// view is the edition organised by configuration, shared by the checks.
type view struct {
	e       *Edition
	opts    Options
	terms   *contractTerms // nil when contract.json is absent or unparsable
	configs []*configView  // sorted by id; every id with a configs/ file or a raw/ directory
	byID    map[string]*configView
}

// configView is one configuration: its aggregate document and its raw
// records in block order.
type configView struct {
	id      string
	path    string              // configs/<id>.json
	doc     *editions.ConfigDoc // nil when missing or undecodable
	workers []*worker           // decoded raw records, sorted by block
	// rawPaths are every raw/<id>/block-<k>.json present, decoded or not.
	rawPaths []string
}

// worker is one decoded raw record.
type worker struct {
	path  string
	block int
	rec   *editions.RawRecord
	doc   *doc
}

func newView(e *Edition, opts Options) *view {
	v := &view{e: e, opts: opts, byID: map[string]*configView{}}
	if d := e.docs[editions.ContractFile]; d != nil && d.tree != nil {
		v.terms = readContractTerms(d)
	}
	get := func(id string) *configView {
		c := v.byID[id]
		if c == nil {
			c = &configView{id: id, path: editions.ConfigPath(id)}
			v.byID[id] = c
			v.configs = append(v.configs, c)
		}
		return c
	}
	for _, p := range e.paths {
		if id, ok := parseConfigPath(p); ok {
			c := get(id)
			c.doc = e.configs[p]
		}
		if id, k, ok := parseRawPath(p); ok {
			c := get(id)
			c.rawPaths = append(c.rawPaths, p)
			if r := e.raws[p]; r != nil {
				c.workers = append(c.workers, &worker{path: p, block: k, rec: r, doc: e.docs[p]})
			}
		}
	}
	sort.Slice(v.configs, func(i, j int) bool { return v.configs[i].id < v.configs[j].id })
	for _, c := range v.configs {
		sort.Slice(c.workers, func(i, j int) bool { return c.workers[i].block < c.workers[j].block })
		sort.Slice(c.rawPaths, func(i, j int) bool {
			_, a, _ := parseRawPath(c.rawPaths[i])
			_, b, _ := parseRawPath(c.rawPaths[j])
			return a < b
		})
	}
	return v
}

// eosFor returns the EOS ids of one worker's model; false when the record
// lists none (a model without EOS ids is not one we run, so an empty list
// means the writer did not record them).
func (v *view) eosFor(w *worker) ([]int, bool) {
	ids := w.rec.Setup.Model.EOSTokenIDs
	return ids, len(ids) > 0
}
