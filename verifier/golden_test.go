package verifier

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/editions/fixture-cpu from the fixture generator")

// goldenFixture is the fixture edition committed for black-box tests of
// cmd/horizon-verify (and for reading): exactly what newFixture writes.
// Refresh it with: go test ./verifier -run TestFixtureGolden -update
var goldenFixture = filepath.Join("testdata", "editions", fixEdition)

func TestFixtureGolden(t *testing.T) {
	dir := newFixture(t)
	if *update {
		if err := os.RemoveAll(goldenFixture); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(goldenFixture, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(fixtureContractFile(dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixtureContractFile(goldenFixture), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readTreeFiles(t, dir)
	got := readTreeFiles(t, goldenFixture)
	for p, b := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s: missing from %s (run with -update)", p, goldenFixture)
		} else if !bytes.Equal(g, b) {
			t.Errorf("%s differs from the generator's output (run with -update)", p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: not written by the generator (run with -update)", p)
		}
	}
	// The fixture's contract is not released: its YAML is committed beside
	// the edition (testdata/editions/fixture-cpu-contract.yaml).
	rep, err := Verify(goldenFixture, fixtureOptions(t, goldenFixture, fixtureSchemas(t)))
	if err != nil || !rep.Passed() {
		t.Fatalf("committed fixture does not verify: %v\n%s", err, findingsText(rep.Findings))
	}
}

func readTreeFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
