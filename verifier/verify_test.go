package verifier

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

func verifyFixture(t *testing.T, dir string) *Report {
	t.Helper()
	rep, err := Verify(dir, fixtureOptions(t, dir, fixtureSchemas(t)))
	if err != nil {
		t.Fatalf("Verify: %v\n%s", err, findingsText(rep.Findings))
	}
	return rep
}

func TestFixtureVerifiesClean(t *testing.T) {
	dir := newFixture(t)
	rep := verifyFixture(t, dir)
	if rep.Errors() != 0 {
		t.Fatalf("the valid fixture has %d errors:\n%s", rep.Errors(), findingsText(rep.Findings))
	}
	// The fixture's contract is not a released one: accepting it because
	// it is the contract file given must say so (a hint). The other hints
	// the valid fixture may carry say what it does not record (it is not
	// signed; its raw records are version 1, without routing traces, so
	// their counters are not replayed); anything else is unexpected.
	expected := map[string]bool{IDBindingContractExplicit: true, "signature.unsigned": true, "physics.tokenizer-unknown": true,
		IDReplayUnverified: true}
	for _, f := range rep.Findings {
		if !expected[f.ID] {
			t.Errorf("unexpected finding on the valid fixture: %s %s %s", f.ID, f.Where(), f.Message)
		}
	}
	if !rep.Has(IDBindingContractExplicit) {
		t.Errorf("no %s hint for the fixture's unreleased contract", IDBindingContractExplicit)
	}
	s := rep.Summary()
	if s.Result != "pass" || s.Configurations != 2 || s.RawRecords != 4 || s.Requests != 8 || s.Claims != 10 {
		t.Errorf("summary = %+v", s)
	}
}

func TestWithoutSchemasIsAHint(t *testing.T) {
	dir := newFixture(t)
	rep, err := Verify(dir, Options{ContractFile: fixtureContractFile(dir)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Has(IDSchemaUnavailable) || rep.Errors() != 0 {
		t.Fatalf("want a schema.unavailable hint and no errors:\n%s", findingsText(rep.Findings))
	}
}

func TestUnreadableEdition(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) string
	}{
		{"no such directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent") }},
		{"a file, not a directory", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			writeFile(t, filepath.Dir(p), "f", "x")
			return p
		}},
		{"no manifest", func(t *testing.T) string {
			dir := newFixture(t)
			os.Remove(filepath.Join(dir, editions.ManifestFile))
			return dir
		}},
		{"manifest not JSON", func(t *testing.T) string {
			dir := newFixture(t)
			writeFile(t, dir, editions.ManifestFile, "{not json")
			return dir
		}},
		{"manifest of the wrong shape", func(t *testing.T) string {
			dir := newFixture(t)
			writeFile(t, dir, editions.ManifestFile, `{"files": "all of them"}`)
			return dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Verify(tc.setup(t), Options{})
			if !errors.Is(err, ErrUnreadable) {
				t.Fatalf("err = %v, want ErrUnreadable", err)
			}
			if !rep.Unreadable() || rep.Summary().Result != "unreadable" {
				t.Fatalf("report does not say unreadable:\n%s", findingsText(rep.Findings))
			}
		})
	}
}

func TestIDsAreCatalogued(t *testing.T) {
	seen := map[string]bool{}
	for _, info := range IDs() {
		if seen[info.ID] {
			t.Errorf("duplicate id %s", info.ID)
		}
		seen[info.ID] = true
		if info.Summary == "" || (info.Severity != Error && info.Severity != Hint) {
			t.Errorf("%s: incomplete catalogue entry %+v", info.ID, info)
		}
		found := false
		for _, c := range Checks {
			found = found || c == info.Check
		}
		if !found {
			t.Errorf("%s: unknown check %q", info.ID, info.Check)
		}
	}
}

func TestEditionThroughSymlink(t *testing.T) {
	dir := newFixture(t)
	link := filepath.Join(t.TempDir(), "latest")
	if err := os.Symlink(dir, link); err != nil {
		t.Skip(err)
	}
	rep := verifyFixture(t, link)
	if !rep.Passed() {
		t.Fatalf("edition named through a symlink:\n%s", findingsText(rep.Findings))
	}
}

func TestMissingEOSIdsIsAHint(t *testing.T) {
	dir := newFixture(t)
	for _, id := range configIDs(t, dir) {
		for _, p := range rawPathsOf(t, dir, id) {
			edit(t, dir, p, func(d map[string]any) { obj(t, d, "setup", "model")["eos_token_ids"] = []any{} })
		}
		edit(t, dir, editions.ConfigPath(id), func(d map[string]any) { obj(t, d, "model")["eos_token_ids"] = []any{} })
	}
	rehash(t, dir)
	rep := verifyFixture(t, dir)
	if !rep.Has(IDContractEOSUnknown) || !rep.Passed() {
		t.Fatalf("want a contract.eos-unknown hint and no error:\n%s", findingsText(rep.Findings))
	}
}

func TestCrashingCheckIsReported(t *testing.T) {
	dir := newFixture(t)
	e, err := readEdition(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := runCheck("recompute", func(*view, *findings) {
		var m map[string]int
		m["boom"]++ // nil map write
	}, newView(e, Options{}))
	if len(got) != 1 || got[0].ID != IDInternalPanic || got[0].Severity != Error {
		t.Fatalf("got %+v", got)
	}
}
