package verifier

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/ifeval"
)

// ifevalSmoke is the committed IFEval smoke edition (campaigns/ifeval-smoke.yaml).
const ifevalSmoke = "../editions/ifeval-smoke-cpu"

// ifevalForge is the edition TestIFEvalForgeries forges: the smoke edition,
// or the one HORIZON_IFEVAL_EDITION names (an H200 edition, e.g.
// editions/ifeval541-olmoe-synthetic).
var ifevalForge = func() string {
	if d := os.Getenv("HORIZON_IFEVAL_EDITION"); d != "" {
		return d
	}
	return ifevalSmoke
}()

// ifevalEd is an IFEval edition decoded for forging.
type ifevalEd struct {
	cd      editions.CampaignDoc
	kd      editions.ContractDoc
	c       *report.Campaign
	k       *contracts.IFEval
	ids     []string
	shards  map[string][]*editions.IFEvalShard
	configs map[string]*editions.IFEvalConfig
}

// last is the edition's last configuration (the second of the smoke
// edition's two; the only one of a one-configuration edition).
func (e *ifevalEd) last() string { return e.ids[len(e.ids)-1] }

// shard is configuration id's shard i (0-based), or its last one when it
// has fewer.
func (e *ifevalEd) shard(id string, i int) *editions.IFEvalShard {
	s := e.shards[id]
	return s[min(i, len(s)-1)]
}

func readIFEvalEd(t *testing.T, dir string) *ifevalEd {
	t.Helper()
	e := &ifevalEd{shards: map[string][]*editions.IFEvalShard{}, configs: map[string]*editions.IFEvalConfig{}}
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
	if e.k, err = contracts.IFEvalFromJSON(e.kd.Contract); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range e.c.Configurations {
		e.ids = append(e.ids, cfg.ID)
		for s := 1; s <= e.k.Shards(); s++ {
			var sh editions.IFEvalShard
			read(editions.IFEvalShardPath(cfg.ID, s), &sh)
			e.shards[cfg.ID] = append(e.shards[cfg.ID], &sh)
		}
		var d editions.IFEvalConfig
		read(editions.ConfigPath(cfg.ID), &d)
		e.configs[cfg.ID] = &d
	}
	return e
}

// write writes every document as a careful forger would: shards and
// configuration documents as given, then claims, reports and the manifest
// derived from them, so that only the checks that go back to the
// responses (or to the released contract) can notice.
func (e *ifevalEd) write(t *testing.T, dir string) {
	t.Helper()
	docs := []editions.IFEvalConfig{}
	for _, id := range e.ids {
		for s, sh := range e.shards[id] {
			if err := editions.WriteDoc(filepath.Join(dir, filepath.FromSlash(editions.IFEvalShardPath(id, s+1))), sh); err != nil {
				t.Fatal(err)
			}
		}
		if err := editions.WriteDoc(filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(id))), e.configs[id]); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, *e.configs[id])
	}
	for name, doc := range map[string]any{editions.CampaignFile: e.cd, editions.ContractFile: e.kd} {
		if err := editions.WriteDoc(filepath.Join(dir, name), doc); err != nil {
			t.Fatal(err)
		}
	}
	claims := report.IFEvalClaimsOf(e.c, docs)
	if err := editions.WriteDoc(filepath.Join(dir, editions.ClaimsFile), &claims); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*os.File) error{
		editions.ReportMD:   func(w *os.File) error { return report.IFEvalMarkdown(w, e.c, e.k, e.kd.SHA256, docs) },
		editions.ReportHTML: func(w *os.File) error { return report.IFEvalHTML(w, e.c, e.k, e.kd.SHA256, docs) },
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

func remanifest(t *testing.T, dir, edition string) {
	t.Helper()
	m, err := editions.BuildManifest(dir, edition, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), editions.ReadBuildInfo())
	if err != nil {
		t.Fatal(err)
	}
	if err := editions.WriteDoc(filepath.Join(dir, editions.ManifestFile), &m); err != nil {
		t.Fatal(err)
	}
}

// rescoreFromVerdicts recomputes a configuration's accuracies from its
// (possibly forged) verdicts, as a forger who edits verdicts would.
func rescoreFromVerdicts(d *editions.IFEvalConfig) {
	acc := func(pick func(editions.IFEvalVerdict) []bool) editions.IFEvalAccuracy {
		a := editions.IFEvalAccuracy{ByCategory: map[string]editions.IFEvalRatio{}, ByInstruction: map[string]editions.IFEvalRatio{}}
		add := func(m map[string]editions.IFEvalRatio, k string, ok bool) {
			r := m[k]
			r.Total++
			if ok {
				r.Followed++
			}
			m[k] = r
		}
		for _, v := range d.Verdicts {
			all := true
			for i, ok := range pick(v) {
				a.InstructionLevel.Total++
				if ok {
					a.InstructionLevel.Followed++
				}
				all = all && ok
				add(a.ByCategory, ifeval.Category(v.InstructionIDList[i]), ok)
				add(a.ByInstruction, v.InstructionIDList[i], ok)
			}
			a.PromptLevel.Total++
			if all {
				a.PromptLevel.Followed++
			}
		}
		return a
	}
	d.Strict = acc(func(v editions.IFEvalVerdict) []bool { return v.Strict })
	d.Loose = acc(func(v editions.IFEvalVerdict) []bool { return v.Loose })
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestIFEvalSmokeVerifies: the committed smoke edition passes with no
// hint from the ifeval check (its tokenizer is the synthetic byte-level
// one, so texts are checked against their token ids too).
func TestIFEvalSmokeVerifies(t *testing.T) {
	rep, err := Verify(ifevalSmoke, Options{Schemas: fixtureSchemas(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Check == "ifeval" || f.Severity == Error {
			t.Errorf("%s %s: %s", f.Severity, f.ID, f.Message)
		}
	}
	if rep.Configurations != 2 || rep.Requests != 24 || rep.Claims != 10 {
		t.Errorf("counts: %d configurations, %d responses, %d claims; want 2, 24, 10", rep.Configurations, rep.Requests, rep.Claims)
	}
}

// TestIFEvalForgeries: careful forgeries of the smoke edition, or of the
// edition HORIZON_IFEVAL_EDITION names (everything downstream re-derived,
// the manifest re-hashed), fail with the named finding.
func TestIFEvalForgeries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		forge func(e *ifevalEd, dir string)
		want  string
	}{
		{"flipped verdict, scores from the forged verdicts", func(e *ifevalEd, _ string) {
			d := e.configs[e.ids[0]]
			d.Verdicts[3].Strict[0] = !d.Verdicts[3].Strict[0]
			rescoreFromVerdicts(d)
		}, IDIFEvalVerdict},
		{"changed response text, re-scored", func(e *ifevalEd, _ string) {
			sh := e.shard(e.ids[0], 0)
			sh.Responses[1].Text = "Sure. Here is a poem in all lowercase letters, with no commas at all."
			e.configs[e.ids[0]] = rescored(t, e, e.ids[0])
		}, IDIFEvalDecode},
		{"shards of the two configurations swapped", func(e *ifevalEd, _ string) {
			a, b := e.ids[0], e.last()
			e.shards[a], e.shards[b] = e.shards[b], e.shards[a]
		}, IDIFEvalShard},
		{"a response dropped", func(e *ifevalEd, _ string) {
			sh := e.shard(e.last(), 1)
			sh.Responses = sh.Responses[:len(sh.Responses)-1]
		}, IDIFEvalShard},
		{"ending length relabelled eos", func(e *ifevalEd, _ string) {
			e.shard(e.ids[0], 1).Responses[0].Ending = contracts.EndingEOS
		}, IDIFEvalShard},
		{"contract's max_new_tokens raised and re-hashed", func(e *ifevalEd, _ string) {
			e.k.MaxNewTokens = 64
			b, _ := e.k.JSON()
			e.kd.Contract = json.RawMessage(b)
			e.kd.SHA256, _ = e.k.SHA256()
		}, IDIFEvalContract},
		{"a score raised", func(e *ifevalEd, _ string) {
			e.configs[e.last()].Strict.PromptLevel.Followed++
		}, IDIFEvalScore},
		{"a different build for one shard", func(e *ifevalEd, _ string) {
			e.shard(e.last(), 0).Environment.Build.VCSRevision = "0000000000000000000000000000000000000000"
		}, IDIFEvalSetup},
		{"FP16 dense activations in one shard of an fp32 configuration", func(e *ifevalEd, _ string) {
			e.shard(e.last(), 0).Artifact.DenseActivationDType = editions.ExpertActFP16
		}, IDIFEvalSetup},
		{"response seconds stretched past the shard's wall clock", func(e *ifevalEd, _ string) {
			sh := e.shard(e.ids[0], 0)
			start, _ := time.Parse(time.RFC3339Nano, sh.StartedAt)
			end, _ := time.Parse(time.RFC3339Nano, sh.FinishedAt)
			sh.Responses[0].Seconds += end.Sub(start).Seconds()
			e.configs[e.ids[0]] = rescored(t, e, e.ids[0])
		}, IDIFEvalTime},
		{"a shard finishing before it started", func(e *ifevalEd, _ string) {
			sh := e.shard(e.last(), 0)
			sh.StartedAt, sh.FinishedAt = sh.FinishedAt, sh.StartedAt
		}, IDIFEvalTime},
		{"claims edited after the fact", func(e *ifevalEd, dir string) {}, IDIFEvalClaim},
		{"report.md edited after the fact", func(e *ifevalEd, dir string) {}, IDIFEvalReport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyTree(t, ifevalForge)
			e := readIFEvalEd(t, dir)
			if tc.want == IDIFEvalShard && strings.Contains(tc.name, "two configurations") && len(e.ids) < 2 {
				t.Skipf("%s has one configuration: there is nothing to swap", ifevalForge)
			}
			tc.forge(e, dir)
			e.write(t, dir)
			if tc.want == IDIFEvalClaim {
				// edit a claim value and re-hash: the claims no longer follow
				p := filepath.Join(dir, editions.ClaimsFile)
				var c editions.IFEvalClaims
				b, _ := os.ReadFile(p)
				if err := json.Unmarshal(b, &c); err != nil {
					t.Fatal(err)
				}
				c.Claims[0].Value, c.Claims[0].Numerator = 1, c.Claims[0].Denominator
				if err := editions.WriteDoc(p, &c); err != nil {
					t.Fatal(err)
				}
				remanifest(t, dir, e.c.Edition)
			}
			if tc.want == IDIFEvalReport {
				p := filepath.Join(dir, editions.ReportMD)
				b, _ := os.ReadFile(p)
				// raise the first configuration's strict prompt-level score in its row
				var lines []string
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "| "+e.ids[0]+" |") {
						d := e.configs[e.ids[0]].Strict.PromptLevel
						l = strings.Replace(l, fmt.Sprintf("| %d/%d (", d.Followed, d.Total), fmt.Sprintf("| %d/%d (", d.Total, d.Total), 1)
					}
					lines = append(lines, l)
				}
				if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
					t.Fatal(err)
				}
				remanifest(t, dir, e.c.Edition)
			}
			rep, err := Verify(dir, Options{Schemas: fixtureSchemas(t)})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Has(tc.want) {
				t.Fatalf("no %s; findings:\n%s", tc.want, findingsText(rep.Findings))
			}
			if rep.Passed() {
				t.Fatal("the forgery passed")
			}
		})
	}
	// The untouched copy, rewritten the same way, still passes: the
	// forger's re-derivation is the writer's.
	dir := copyTree(t, ifevalForge)
	readIFEvalEd(t, dir).write(t, dir)
	if rep, err := Verify(dir, Options{Schemas: fixtureSchemas(t)}); err != nil || !rep.Passed() {
		t.Fatalf("rewritten unchanged edition: %v\n%s", err, findingsText(rep.Findings))
	}
}

// rescored is a configuration document recomputed from the (forged)
// shards, as a forger who re-scores would write it.
func rescored(t *testing.T, e *ifevalEd, id string) *editions.IFEvalConfig {
	t.Helper()
	ins, err := report.IFEvalInputs(e.k)
	if err != nil {
		t.Fatal(err)
	}
	d, err := report.IFEvalAggregate(e.k, ins, id, e.shards[id])
	if err != nil {
		t.Fatal(err)
	}
	return &d
}
