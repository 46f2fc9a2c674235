package verifier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// committedEditions lists the residency editions committed under editions/
// (every directory with a manifest.json whose contract is not an IFEval
// one).
func committedEditions(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("..", "editions", "*", editions.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range dirs {
		if !ifevalDir(filepath.Dir(m)) {
			out = append(out, filepath.Dir(m))
		}
	}
	if len(out) == 0 {
		t.Skip("editions/ holds no edition yet")
	}
	return out
}

// ifevalDir reports whether a committed edition is an IFEval or a fidelity
// edition (their own tests: ifeval_forgery_test.go,
// fidelity_forgery_test.go); committedEditions lists the others.
func ifevalDir(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, editions.ContractFile))
	if err != nil {
		return false
	}
	var kd editions.ContractDoc
	return json.Unmarshal(b, &kd) == nil && (contracts.IsIFEval(kd.ID) || contracts.IsFidelity(kd.ID))
}

// TestCommittedEditionsVerify: every committed edition verifies without an
// error against the embedded schemas.
func TestCommittedEditionsVerify(t *testing.T) {
	schemas := fixtureSchemas(t)
	for _, dir := range committedEditions(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rep, err := Verify(dir, Options{Schemas: schemas})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed() {
				t.Fatalf("%s does not verify:\n%s", dir, findingsText(rep.Findings))
			}
			for _, f := range rep.Findings {
				t.Logf("%s %s %s: %s", f.Severity, f.ID, f.Where(), f.Message)
			}
		})
	}
}

// TestMutationsOnCommittedEditions runs the mutation suite on a copy of
// each committed edition (cases whose precondition an edition lacks skip).
func TestMutationsOnCommittedEditions(t *testing.T) {
	schemas := fixtureSchemas(t)
	for _, src := range committedEditions(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			for _, m := range mutations {
				t.Run(m.name, func(t *testing.T) {
					t.Parallel() // each case verifies its own copy
					dir := filepath.Join(t.TempDir(), filepath.Base(src))
					if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
						t.Fatal(err)
					}
					runMutation(t, dir, m, schemas)
				})
			}
		})
	}
}
