package verifier

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/fidelity"
)

// fidelitySmoke is the committed fidelity smoke edition
// (campaigns/fidelity-smoke.yaml); HORIZON_FIDELITY_EDITION names another
// one to forge (make fidelity-smoke-check: a fresh rerun, out/fidelity-smoke).
var fidelitySmoke = func() string {
	if d := os.Getenv("HORIZON_FIDELITY_EDITION"); d != "" {
		return d
	}
	return "../editions/fidelity-smoke-cpu"
}()

// fidelityEd is a fidelity edition decoded for forging.
type fidelityEd struct {
	cd     editions.CampaignDoc
	kd     editions.ContractDoc
	c      *report.Campaign
	k      *contracts.Fidelity
	ids    []string // pair ids
	shards map[string][]*editions.FidelityShard
	pairs  map[string]*editions.FidelityPair
}

func readFidelityEd(t *testing.T, dir string) *fidelityEd {
	t.Helper()
	e := &fidelityEd{shards: map[string][]*editions.FidelityShard{}, pairs: map[string]*editions.FidelityPair{}}
	read := func(p string, v any) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if err := strictJSON(b, v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	read(editions.CampaignFile, &e.cd)
	read(editions.ContractFile, &e.kd)
	var err error
	if e.c, err = report.CampaignFromDoc(e.cd); err != nil {
		t.Fatal(err)
	}
	if e.k, err = contracts.FidelityFromJSON(e.kd.Contract); err != nil {
		t.Fatal(err)
	}
	e.ids = report.FidelityPairIDs(e.c, e.k)
	for _, id := range e.ids {
		for s := 1; s <= e.k.Shards(); s++ {
			var sh editions.FidelityShard
			read(editions.FidelityShardPath(id, s), &sh)
			e.shards[id] = append(e.shards[id], &sh)
		}
		var d editions.FidelityPair
		read(editions.FidelityPairPath(id), &d)
		e.pairs[id] = &d
	}
	return e
}

// write writes every document as a careful forger would: shards and
// paired documents as given (rederive: recomputed from the forged shards
// with the writer's own functions), then claims, reports and the manifest
// derived from them, so that only the checks that go back to the retained
// values can notice.
func (e *fidelityEd) write(t *testing.T, dir string, rederive bool) {
	t.Helper()
	ins, err := fidelity.Inputs(e.k)
	if err != nil {
		t.Fatal(err)
	}
	var docs []editions.FidelityPair
	for _, id := range e.ids {
		for s, sh := range e.shards[id] {
			if err := editions.WriteDoc(filepath.Join(dir, filepath.FromSlash(editions.FidelityShardPath(id, s+1))), sh); err != nil {
				t.Fatal(err)
			}
		}
		d := e.pairs[id]
		if rederive {
			// A forger re-derives what the writer's functions still accept;
			// where they refuse the forged shards the old document stays.
			if nd, err := fidelity.Aggregate(e.k, ins, id, e.shards[id]); err == nil {
				d = &nd
			}
		}
		if err := editions.WriteDoc(filepath.Join(dir, filepath.FromSlash(editions.FidelityPairPath(id))), d); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, *d)
	}
	claims := fidelity.ClaimsOf(e.c.Edition, e.c.Evidence, e.c.Publication, docs)
	if err := editions.WriteDoc(filepath.Join(dir, editions.ClaimsFile), &claims); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*os.File) error{
		editions.ReportMD:   func(w *os.File) error { return report.FidelityMarkdown(w, e.c, e.k, e.kd.SHA256, docs) },
		editions.ReportHTML: func(w *os.File) error { return report.FidelityHTML(w, e.c, e.k, e.kd.SHA256, docs) },
	} {
		w, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f(w); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	remanifest(t, dir, e.c.Edition)
}

// TestFidelitySmokeVerifies: the committed smoke edition passes with no
// error and the one fidelity hint (what is consistency-checked only).
func TestFidelitySmokeVerifies(t *testing.T) {
	rep, err := Verify(fidelitySmoke, Options{Schemas: fixtureSchemas(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Severity == Error || (f.Check == "fidelity" && f.ID != IDFidelityPartial) {
			t.Errorf("%s %s: %s", f.Severity, f.ID, f.Message)
		}
	}
	if rep.Configurations != 4 || rep.RawRecords != 4 || rep.Requests != 16 || rep.Claims != 16 {
		t.Errorf("counts: %d configurations, %d shards, %d responses, %d claims; want 4, 4, 16, 16", rep.Configurations, rep.RawRecords, rep.Requests, rep.Claims)
	}
}

// TestFidelityForgeries: careful forgeries of the smoke edition
// (everything downstream re-derived, the manifest re-hashed) fail with the
// named finding.
func TestFidelityForgeries(t *testing.T) {
	cases := []struct {
		name     string
		rederive bool
		forge    func(t *testing.T, e *fidelityEd)
		want     string
	}{
		{"a flipped verdict", false, func(t *testing.T, e *fidelityEd) {
			d := e.pairs[e.ids[0]]
			row := &d.Prompts[0]
			// The treatment's first instruction flipped, the prompt's
			// outcome and the counts made to agree with it.
			row.TrtStrict[0] = !row.TrtStrict[0]
			old := fidelity.Outcome(row.Strict)
			row.Strict = string(fidelity.Classify(allTrue(row.RefStrict), allTrue(row.TrtStrict)))
			uncount(&d.Strict.Prompts, old)
			fidelity.Count(&d.Strict.Prompts, fidelity.Outcome(row.Strict))
			if p, ok := fidelity.McNemar(d.Strict.Prompts.Regression, d.Strict.Prompts.Improvement); ok {
				d.Strict.McNemarP = &p
			} else {
				d.Strict.McNemarP = nil
			}
		}, IDFidelityVerdict},
		{"a KL zeroed, summaries re-derived", true, func(t *testing.T, e *fidelityEd) {
			// The most divergent position claims no divergence, and every
			// summary is recomputed from it: the stored top-k still show
			// the two distributions apart.
			maxKL(e, e.ids[0]).KL = 0
		}, IDFidelityShard},
		{"a changed KL in the paired document", false, func(t *testing.T, e *fidelityEd) {
			d := e.pairs[e.ids[1]]
			d.KL.Median.Value *= 0.5
		}, IDFidelityPaired},
		{"a shortened wall time in the paired document", false, func(t *testing.T, e *fidelityEd) {
			e.pairs[e.ids[0]].WallSeconds /= 2
		}, IDFidelityPaired},
		{"a shard finished before it started, wall time re-derived", true, func(t *testing.T, e *fidelityEd) {
			sh := e.shards[e.ids[1]][0]
			sh.FinishedAt = "2000-01-01T00:00:00Z"
		}, IDFidelityTime},
		{"swapped arms", true, func(t *testing.T, e *fidelityEd) {
			for _, sh := range e.shards[e.ids[0]] {
				sh.Reference, sh.Treatment = sh.Treatment, sh.Reference
			}
		}, IDFidelityShard},
		{"swapped arms, labels kept", true, func(t *testing.T, e *fidelityEd) {
			// The arms' responses and weights exchanged under the original
			// labels: the forced positions were fed the other arm's tokens.
			for _, sh := range e.shards[e.ids[1]] {
				r, tr := sh.Reference, sh.Treatment
				sh.Reference.Responses, sh.Treatment.Responses = tr.Responses, r.Responses
				sh.Reference.Artifact, sh.Treatment.Artifact = tr.Artifact, r.Artifact
			}
		}, IDFidelityShard},
		{"FP16 dense activations in one arm of an fp32 pair, summaries re-derived", true, func(t *testing.T, e *fidelityEd) {
			for _, sh := range e.shards[e.ids[0]] {
				sh.Treatment.Artifact.DenseActivationDType = editions.ExpertActFP16
			}
		}, IDFidelitySetup},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyTree(t, fidelitySmoke)
			e := readFidelityEd(t, dir)
			tc.forge(t, e)
			e.write(t, dir, tc.rederive)
			rep, err := Verify(dir, Options{Schemas: fixtureSchemas(t)})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Findings {
				if f.ID == tc.want {
					found = true
				}
				if f.Check == "manifest" && f.Severity == Error {
					t.Errorf("the forgery broke the manifest, not the content: %s %s", f.ID, f.Message)
				}
			}
			if !found {
				for _, f := range rep.Findings {
					t.Logf("%s %s: %s", f.Severity, f.ID, f.Message)
				}
				t.Fatalf("no %s finding", tc.want)
			}
		})
	}
}

// maxKL is the pair's position with the largest KL.
func maxKL(e *fidelityEd, id string) *editions.FidelityPosition {
	var best *editions.FidelityPosition
	for _, sh := range e.shards[id] {
		for i := range sh.Forced {
			for j := range sh.Forced[i].Positions {
				if p := &sh.Forced[i].Positions[j]; best == nil || p.KL > best.KL {
					best = p
				}
			}
		}
	}
	return best
}

// TestFidelityKLWithinBoundUndetectable pins what fidelity.partial admits:
// a per-position KL changed within what the stored top-k allow (here
// halved, which stays above their lower bound on the smoke edition), with
// every summary, claim and report re-derived, passes every check; only
// the hint says the per-position values were not recomputed.
func TestFidelityKLWithinBoundUndetectable(t *testing.T) {
	dir := copyTree(t, fidelitySmoke)
	e := readFidelityEd(t, dir)
	p := e.shards[e.ids[0]][0].Forced[0].Positions[3]
	if err := fidelity.CheckPosition(p, e.k.TopK); err != nil {
		t.Fatal(err)
	}
	e.shards[e.ids[0]][0].Forced[0].Positions[3].KL /= 2
	if err := fidelity.CheckPosition(e.shards[e.ids[0]][0].Forced[0].Positions[3], e.k.TopK); err != nil {
		t.Skipf("the halved KL falls below its top-k bound on this edition, so the forgery is caught: %v", err)
	}
	e.write(t, dir, true)
	rep, err := Verify(dir, Options{Schemas: fixtureSchemas(t)})
	if err != nil {
		t.Fatal(err)
	}
	hinted := false
	for _, f := range rep.Findings {
		if f.Severity == Error {
			t.Errorf("the forgery was caught after all (update fidelity.partial and this test): %s %s", f.ID, f.Message)
		}
		hinted = hinted || f.ID == IDFidelityPartial
	}
	if !hinted {
		t.Error("no fidelity.partial hint")
	}
}

func allTrue(v []bool) bool {
	for _, x := range v {
		if !x {
			return false
		}
	}
	return true
}

// uncount removes one outcome from c.
func uncount(c *editions.FidelityCounts, o fidelity.Outcome) {
	switch o {
	case fidelity.BothPass:
		c.BothPass--
	case fidelity.BothFail:
		c.BothFail--
	case fidelity.Regression:
		c.Regression--
	case fidelity.Improvement:
		c.Improvement--
	}
	c.Total--
}
