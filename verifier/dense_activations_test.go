package verifier

import (
	"fmt"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// declareDenseAct makes the fixture's campaign declare dense_activations
// act for the configurations at the given indices, refrozen and rehashed.
func declareDenseAct(t *testing.T, dir, act string, cfgs ...int) {
	t.Helper()
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		for _, i := range cfgs {
			obj(t, d, "campaign", "configurations", i)["dense_activations"] = act
		}
	})
	refreeze(t, dir, editions.CampaignFile, "campaign")
	rehash(t, dir)
}

// runDenseFP16 makes a raw record one of FP16 dense activations as a
// worker writes it: the dtype stated, and the batched prefill they apply
// to.
func runDenseFP16(r *editions.RawRecord) {
	r.Artifact.DenseActivationDType = editions.ExpertActFP16
	r.Setup.Prefill = "batched"
}

// TestDenseActivationsPhysics: physics.dense-activation-dtype holds every
// worker to its configuration's declared dense_activations (absent or fp32
// read as FP32, which records leave out), and FP16 to what it applies to:
// a batched prefill, whatever the expert format.
func TestDenseActivationsPhysics(t *testing.T) {
	only := func(id string, fs []Finding) []Finding {
		var out []Finding
		for _, f := range fs {
			if f.ID == id {
				out = append(out, f)
			}
		}
		return out
	}
	hits := func(fs []Finding) []Finding { return only(IDPhysDenseActDType, fs) }
	// Undeclared, unrecorded: FP32 against fp32.
	plain := newFixture(t)
	if got := hits(physicsOf(t, plain, nil)); len(got) != 0 {
		t.Fatalf("the fixture (no dense_activations, no dense_activation_dtype):\n%s", findingsText(got))
	}
	// "fp32" spelled out in a frozen campaign is FP32 too.
	fp32 := newFixture(t)
	declareDenseAct(t, fp32, "fp32", 0, 1)
	if got := hits(physicsOf(t, fp32, nil)); len(got) != 0 {
		t.Fatalf("dense_activations fp32 declared, records without the field:\n%s", findingsText(got))
	}

	dir := newFixture(t)
	declareDenseAct(t, dir, "fp16", 1) // tiny-c8
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, v *view)
		want   int    // findings of IDPhysDenseActDType
		about  string // in every finding's message
	}{
		{"declared and run", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runDenseFP16(w.rec)
			}
		}, 0, ""},
		{"declared, not run", nil, 2, "the campaign declares dense_activations fp16 for tiny-c8"},
		{"declared, one worker not run", func(t *testing.T, v *view) {
			runDenseFP16(rec(v, 1, 0))
		}, 1, "the worker ran FP32"},
		{"run where not declared", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runDenseFP16(w.rec)
			}
			runDenseFP16(rec(v, 0, 1))
		}, 1, "declares dense_activations fp32 (absent) for tiny-c4"},
		{"declared dense, run as expert activations", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runFP16(w.rec)
			}
		}, 2, "the worker ran FP32"},
		{"FP16 with a token-at-a-time prefill", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runDenseFP16(w.rec)
				w.rec.Setup.Prefill = "token"
			}
		}, 2, "with prefill token"},
		{"FP16 on a record without a prefill (token at a time)", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runDenseFP16(w.rec)
				w.rec.Setup.Prefill = ""
			}
		}, 2, "with prefill token (absent)"},
		// Unlike expert_activations, FP16 dense activations do not need
		// INT4 experts: the dense projections are FP16 matrices either way.
		{"FP16 with FP16 experts", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runDenseFP16(w.rec)
				w.rec.Artifact.ExpertFormat = "fp16"
			}
		}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := physicsOf(t, dir, tc.mutate)
			got := hits(all)
			if len(got) != tc.want {
				t.Fatalf("%d %s findings, want %d:\n%s", len(got), IDPhysDenseActDType, tc.want, findingsText(got))
			}
			for _, f := range got {
				if f.Severity != Error || !strings.Contains(f.Message, tc.about) || f.Pointer != "/artifact/dense_activation_dtype" {
					t.Errorf("%s %s %s: %q, want an error at /artifact/dense_activation_dtype about %q", f.Severity, f.ID, f.Pointer, f.Message, tc.about)
				}
			}
			// The dense dtype is its own: declaring and running it leaves
			// the expert activations' check quiet.
			if tc.want == 0 {
				if ex := only(IDPhysExpertActDType, all); len(ex) != 0 {
					t.Errorf("FP16 dense activations trip %s:\n%s", IDPhysExpertActDType, findingsText(ex))
				}
			}
		})
	}

	// A configuration the campaign does not list is held to its majority.
	t.Run("unlisted configuration", func(t *testing.T) {
		got := hits(physicsOf(t, plain, func(t *testing.T, v *view) {
			v.e.docs[editions.CampaignFile] = nil
			runDenseFP16(rec(v, 0, 1))
		}))
		if len(got) != 1 || got[0].File != v0Raw(t, plain, 1) || !strings.Contains(got[0].Message, "in the majority") {
			t.Fatalf("want one majority finding on %s:\n%s", v0Raw(t, plain, 1), findingsText(got))
		}
	})
}

// TestDenseActivationsNumerics: FP16 dense activations round a batched
// prefill's projection inputs, so a configuration that ran them need not
// match an FP32 one's tokens (check 7 compares them by agreement, a
// hint), while configurations of one dense activation dtype, and one
// configuration's workers, must still agree.
func TestDenseActivationsNumerics(t *testing.T) {
	dir := newFixture(t)
	declareDenseAct(t, dir, "fp16", 1)
	consistencyOf := func(mutate func(v *view)) []Finding {
		t.Helper()
		e, err := readEdition(dir)
		if err != nil {
			t.Fatal(err)
		}
		v := newView(e, Options{SharedNumerics: DefaultSharedNumerics})
		mutate(v)
		fs := &findings{check: "consistency"}
		checkConsistency(v, fs)
		return fs.list
	}
	// Another token in every worker of tiny-c8 (not an EOS id).
	bump := func(v *view) {
		for _, w := range v.configs[1].workers {
			ids := w.rec.Requests[0].TokenIDs
			ids[len(ids)-1] = (ids[len(ids)-1] + 1) % 500
		}
	}
	denseIn := func(v *view, cfgs ...int) {
		for _, c := range cfgs {
			for _, w := range v.configs[c].workers {
				runDenseFP16(w.rec)
			}
		}
	}
	has := func(fs []Finding, id string) bool {
		for _, f := range fs {
			if f.ID == id {
				return true
			}
		}
		return false
	}

	// Same dtype (FP32 both): compared token for token.
	if got := consistencyOf(bump); !has(got, IDConsTokenStream) {
		t.Fatalf("FP32 throughout, other tokens: want %s:\n%s", IDConsTokenStream, findingsText(got))
	}
	// Differing only in the dense dtype: a hint, no token-stream error.
	got := consistencyOf(func(v *view) {
		denseIn(v, 1)
		bump(v)
	})
	if has(got, IDConsTokenStream) || !has(got, IDConsNumerics) {
		t.Fatalf("FP16 dense activations beside FP32, other tokens: want a %s hint and no %s:\n%s", IDConsNumerics, IDConsTokenStream, findingsText(got))
	}
	for _, f := range got {
		if sides := fmt.Sprint(f.Expected, " vs ", f.Found); f.ID == IDConsNumerics && !strings.Contains(sides, "FP16 dense activations") {
			t.Errorf("the hint's sides (%s) do not name the FP16 dense activations", sides)
		}
	}
	// Same dtype (FP16 both): compared token for token again.
	got = consistencyOf(func(v *view) {
		denseIn(v, 0, 1)
		bump(v)
	})
	if !has(got, IDConsTokenStream) || has(got, IDConsNumerics) {
		t.Fatalf("FP16 dense activations throughout, other tokens: want %s and no hint:\n%s", IDConsTokenStream, findingsText(got))
	}
	// Same dense dtype, other expert activation dtype: not compared.
	got = consistencyOf(func(v *view) {
		denseIn(v, 0, 1)
		for _, w := range v.configs[1].workers {
			runFP16(w.rec)
		}
		bump(v)
	})
	if has(got, IDConsTokenStream) {
		t.Fatalf("FP16 dense throughout, FP16 expert activations in tiny-c8 only, other tokens: want no %s:\n%s", IDConsTokenStream, findingsText(got))
	}
	// Within one FP16 configuration, one worker's other tokens are caught.
	got = consistencyOf(func(v *view) {
		denseIn(v, 1)
		ids := rec(v, 1, 1).Requests[0].TokenIDs
		ids[len(ids)-1] = (ids[len(ids)-1] + 1) % 500
	})
	if !has(got, IDConsTokenStream) {
		t.Fatalf("FP16 dense activations, one worker's tokens changed: want %s:\n%s", IDConsTokenStream, findingsText(got))
	}
}

// TestDenseActivationsColumn: the reports' "dense activations" column
// (shown where some configuration records artifact.dense_activation_dtype)
// is a column the verifier knows: its cells are compared with the
// configuration documents, absent read as FP32.
func TestDenseActivationsColumn(t *testing.T) {
	schemas := fixtureSchemas(t)
	dir := newFixture(t)
	forgeDenseConfiguration(t, dir) // tiny-c4 FP16 in records, document and reports
	ids := func() map[string]int {
		t.Helper()
		rep, err := Verify(dir, fixtureOptions(t, dir, schemas))
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, f := range rep.Findings {
			if f.Check == "derived" {
				n[f.ID]++
			}
		}
		return n
	}
	md := readFile(t, dir, editions.ReportMD)
	if !strings.Contains(md, "| dense activations |") || !strings.Contains(md, "| scalar-v1 | FP16 |") || !strings.Contains(md, "| scalar-v1 | FP32 |") {
		t.Fatalf("report.md lacks the dense activations column with FP16 and FP32 cells:\n%s", md)
	}
	if n := ids(); len(n) != 0 {
		t.Fatalf("derived findings on reports that show the documents' dense activations: %v", n)
	}
	writeFile(t, dir, editions.ReportMD, strings.Replace(md, "| scalar-v1 | FP16 |", "| scalar-v1 | FP32 |", 1))
	rehash(t, dir)
	if n := ids(); n[IDDerivedCell] != 1 || n[IDDerivedColumn] != 0 {
		t.Fatalf("report.md's FP16 dense activations cell shown as FP32: want one %s and no %s, got %v", IDDerivedCell, IDDerivedColumn, n)
	}
}
