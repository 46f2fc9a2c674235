package verifier

import (
	"fmt"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// declareExpertAct makes the fixture's campaign declare expert_activations
// act for the configurations at the given indices, refrozen and rehashed.
func declareExpertAct(t *testing.T, dir, act string, cfgs ...int) {
	t.Helper()
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		for _, i := range cfgs {
			obj(t, d, "campaign", "configurations", i)["expert_activations"] = act
		}
	})
	refreeze(t, dir, editions.CampaignFile, "campaign")
	rehash(t, dir)
}

// runFP16 makes a raw record one of FP16 expert activations as a worker
// writes it: the dtype stated, and the batched prefill they apply to.
func runFP16(r *editions.RawRecord) {
	r.Artifact.ExpertActivationDType = editions.ExpertActFP16
	r.Setup.Prefill = "batched"
}

// TestExpertActivationsPhysics: physics.expert-activation-dtype holds
// every worker to its configuration's declared expert_activations (absent
// or fp32 read as FP32, which records leave out), and FP16 to what it
// applies to: INT4 experts and a batched prefill.
func TestExpertActivationsPhysics(t *testing.T) {
	hits := func(fs []Finding) []Finding {
		var out []Finding
		for _, f := range fs {
			if f.ID == IDPhysExpertActDType {
				out = append(out, f)
			}
		}
		return out
	}
	// Undeclared, unrecorded: FP32 against fp32.
	plain := newFixture(t)
	if got := hits(physicsOf(t, plain, nil)); len(got) != 0 {
		t.Fatalf("the fixture (no expert_activations, no expert_activation_dtype):\n%s", findingsText(got))
	}
	// "fp32" spelled out in a frozen campaign is FP32 too.
	fp32 := newFixture(t)
	declareExpertAct(t, fp32, "fp32", 0, 1)
	if got := hits(physicsOf(t, fp32, nil)); len(got) != 0 {
		t.Fatalf("expert_activations fp32 declared, records without the field:\n%s", findingsText(got))
	}

	dir := newFixture(t)
	declareExpertAct(t, dir, "fp16", 1) // tiny-c8
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, v *view)
		want   int    // findings of IDPhysExpertActDType
		about  string // in every finding's message
	}{
		{"declared and run", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runFP16(w.rec)
			}
		}, 0, ""},
		{"declared, not run", nil, 2, "the campaign declares expert_activations fp16 for tiny-c8"},
		{"declared, one worker not run", func(t *testing.T, v *view) {
			runFP16(rec(v, 1, 0))
		}, 1, "the worker ran FP32"},
		{"run where not declared", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runFP16(w.rec)
			}
			runFP16(rec(v, 0, 1))
		}, 1, "declares expert_activations fp32 (absent) for tiny-c4"},
		{"FP16 with a token-at-a-time prefill", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runFP16(w.rec)
				w.rec.Setup.Prefill = "token"
			}
		}, 2, "with prefill token"},
		{"FP16 on a record without a prefill (token at a time)", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runFP16(w.rec)
				w.rec.Setup.Prefill = ""
			}
		}, 2, "with prefill token (absent)"},
		{"FP16 with FP16 experts", func(t *testing.T, v *view) {
			for _, w := range v.configs[1].workers {
				runFP16(w.rec)
				w.rec.Artifact.ExpertFormat = "fp16"
			}
		}, 2, "with fp16 experts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hits(physicsOf(t, dir, tc.mutate))
			if len(got) != tc.want {
				t.Fatalf("%d %s findings, want %d:\n%s", len(got), IDPhysExpertActDType, tc.want, findingsText(got))
			}
			for _, f := range got {
				if f.Severity != Error || !strings.Contains(f.Message, tc.about) {
					t.Errorf("%s %s: %q, want an error about %q", f.Severity, f.ID, f.Message, tc.about)
				}
			}
		})
	}

	// A configuration the campaign does not list is held to its majority.
	t.Run("unlisted configuration", func(t *testing.T) {
		got := hits(physicsOf(t, plain, func(t *testing.T, v *view) {
			v.e.docs[editions.CampaignFile] = nil
			runFP16(rec(v, 0, 1))
		}))
		if len(got) != 1 || got[0].File != v0Raw(t, plain, 1) || !strings.Contains(got[0].Message, "in the majority") {
			t.Fatalf("want one majority finding on %s:\n%s", v0Raw(t, plain, 1), findingsText(got))
		}
	})
}

// v0Raw is the path of the first configuration's raw record at block
// index b (from 0).
func v0Raw(t *testing.T, dir string, b int) string {
	t.Helper()
	return rawPathsOf(t, dir, configIDs(t, dir)[0])[b]
}

// TestExpertActivationsNumerics: FP16 expert activations round a batched
// prefill's expert inputs, so a configuration that ran them need not
// match an FP32 one's tokens (check 7 compares them by agreement, a
// hint), while its own workers must still agree.
func TestExpertActivationsNumerics(t *testing.T) {
	dir := newFixture(t)
	declareExpertAct(t, dir, "fp16", 1)
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
	has := func(fs []Finding, id string) bool {
		for _, f := range fs {
			if f.ID == id {
				return true
			}
		}
		return false
	}

	if got := consistencyOf(bump); !has(got, IDConsTokenStream) {
		t.Fatalf("FP32 throughout, other tokens: want %s:\n%s", IDConsTokenStream, findingsText(got))
	}
	got := consistencyOf(func(v *view) {
		for _, w := range v.configs[1].workers {
			runFP16(w.rec)
		}
		bump(v)
	})
	if has(got, IDConsTokenStream) || !has(got, IDConsNumerics) {
		t.Fatalf("FP16 expert activations, other tokens: want a %s hint and no %s:\n%s", IDConsNumerics, IDConsTokenStream, findingsText(got))
	}
	for _, f := range got {
		if sides := fmt.Sprint(f.Expected, " vs ", f.Found); f.ID == IDConsNumerics && !strings.Contains(sides, "FP16 expert activations") {
			t.Errorf("the hint's sides (%s) do not name the FP16 expert activations", sides)
		}
	}
	got = consistencyOf(func(v *view) {
		for _, w := range v.configs[1].workers {
			runFP16(w.rec)
		}
		ids := rec(v, 1, 1).Requests[0].TokenIDs
		ids[len(ids)-1] = (ids[len(ids)-1] + 1) % 500
	})
	if !has(got, IDConsTokenStream) {
		t.Fatalf("FP16 expert activations, one worker's tokens changed: want %s:\n%s", IDConsTokenStream, findingsText(got))
	}
}
