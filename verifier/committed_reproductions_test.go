package verifier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// TestCommittedReproductionsVerify: every reproduction directory committed
// under results/ (a reproduction.json beside original/ and rerun/) checks
// against the committed edition it names, with 0 errors, and reproduces at
// least one claim. So the H200 reproductions in results/reproduce-h200 stay
// evidence: editing an edition they reproduced, or the records they keep,
// fails CI.
func TestCommittedReproductionsVerify(t *testing.T) {
	recs, err := filepath.Glob(filepath.Join("..", "results", "*", "*", editions.ReproductionFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Skip("results/ holds no reproduction")
	}
	schemas := fixtureSchemas(t)
	for _, rec := range recs {
		dir := filepath.Dir(rec)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			var head struct {
				Edition string `json:"edition"`
			}
			if err := json.Unmarshal(b, &head); err != nil || head.Edition == "" {
				t.Fatalf("%s names no edition (%v)", rec, err)
			}
			ed := filepath.Join("..", "editions", head.Edition)
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
