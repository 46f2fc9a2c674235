package verifier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// TestCommittedReproductionsVerify: every reproduction directory committed
// under results/, one or two levels down (a reproduction.json beside
// original/ and rerun/), of an
// edition that is still committed checks against it, with 0 errors, and
// reproduces at least one claim. So the H200 reproductions stay evidence:
// editing an edition they reproduced, or the records they keep, fails CI.
// A reproduction of an edition that has since been re-made (another
// manifest SHA-256 under the same name) is history: it is skipped, with a
// log line, and it still must name a manifest the repository's history
// holds, which its README gives.
func TestCommittedReproductionsVerify(t *testing.T) {
	var recs []string
	for _, depth := range [][]string{{"*", "*"}, {"*", "*", "*"}} { // results/<run>/[<part>/]<reproduction>
		m, err := filepath.Glob(filepath.Join(append(append([]string{"..", "results"}, depth...), editions.ReproductionFile)...))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, m...)
	}
	if len(recs) == 0 {
		t.Skip("results/ holds no reproduction")
	}
	schemas := fixtureSchemas(t)
	verified := 0
	defer func() {
		if verified == 0 && !t.Failed() {
			t.Errorf("no committed reproduction reproduces a committed edition")
		}
	}()
	for _, rec := range recs {
		dir := filepath.Dir(rec)
		name, _ := filepath.Rel(filepath.Join("..", "results"), dir)
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			var head struct {
				Edition  string `json:"edition"`
				Manifest string `json:"edition_manifest_sha256"`
			}
			if err := json.Unmarshal(b, &head); err != nil || head.Edition == "" {
				t.Fatalf("%s names no edition (%v)", rec, err)
			}
			ed := filepath.Join("..", "editions", head.Edition)
			sum, _, err := editions.HashFile(filepath.Join(ed, editions.ManifestFile))
			if err != nil {
				t.Fatalf("%s reproduces %s, which is not committed: %v", dir, head.Edition, err)
			}
			var m editions.Manifest
			if b, err := os.ReadFile(filepath.Join(ed, editions.ManifestFile)); err != nil || json.Unmarshal(b, &m) != nil {
				t.Fatalf("%s: manifest: %v", ed, err)
			}
			if sum != head.Manifest && !slices.Contains(m.ManifestLineage(), head.Manifest) {
				t.Skipf("%s reproduces an earlier %s (manifest %s; the committed one is %s): history, not checked", dir, head.Edition, head.Manifest[:12], sum[:12])
			}
			verified++
			rep, err := Verify(ed, Options{Schemas: schemas, Reproduction: dir})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed() {
				t.Fatalf("%s against %s:\n%s", dir, ed, findingsText(rep.Findings))
			}
			if !rep.Has(IDReproClaimReproduced) {
				t.Fatalf("%s reproduces no claim of %s", dir, ed)
			}
		})
	}
}
