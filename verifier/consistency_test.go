package verifier

import (
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// An executor outside the shared-numerics list may produce other tokens: that
// is a hint with the agreement rate, not an error. The fixture's second
// configuration runs grouped-v1 here, and the verifier is told that only
// scalar-v1 shares numerics.
func TestDeclaredDifferentNumericsIsAHint(t *testing.T) {
	dir := newFixture(t)
	const other = "tiny-c8"
	for _, p := range rawPathsOf(t, dir, other) {
		edit(t, dir, p, func(d map[string]any) {
			obj(t, d, "setup")["executor"] = "grouped-v1"
			bumpToken(t, d, arr(t, d, "requests", 1, "token_ids"), 5)
		})
	}
	edit(t, dir, editions.ConfigPath(other), func(d map[string]any) { d["executor"] = "grouped-v1" })
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		obj(t, d, "campaign", "configurations", 1)["executor"] = "grouped-v1"
	})
	refreeze(t, dir, editions.CampaignFile, "campaign")
	reaggregate(t, dir) // the claims' statements and the reports name the executor
	rehash(t, dir)

	rep, err := Verify(dir, Options{Schemas: nil, SharedNumerics: []string{"scalar-v1"}, ContractFile: fixtureContractFile(dir)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Has(IDConsNumerics) || rep.Has(IDConsTokenStream) {
		t.Fatalf("want a consistency.executor-numerics hint and no token-stream error:\n%s", findingsText(rep.Findings))
	}
	for _, f := range rep.Findings {
		if f.Severity == Error {
			t.Errorf("unexpected error %s %s: %s", f.ID, f.Where(), f.Message)
		}
		if f.ID == IDConsNumerics {
			t.Logf("hint: %s", f.Message)
		}
	}

	// With the default list the same edition is an error: grouped-v1 is
	// designed to share scalar-v1's numerics.
	rep, err = Verify(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Has(IDConsTokenStream) {
		t.Fatalf("want consistency.token-stream with the default shared list:\n%s", findingsText(rep.Findings))
	}
}
