package verifier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/editions"
)

// The reproduction check on hand-made reproduction directories of the
// committed smoke-cpu edition: the "rerun" records are the edition's own,
// edited per case, and reproduction.json is assembled by the writer's code
// (campaigns.Reproduction) so that an honest record and the verifier must
// agree, and a record edited afterwards must not.

const reproEdition = "../editions/smoke-cpu"

// reproCase edits the rerun records before the record is written (rerun),
// then the directory after (after).
type reproCase struct {
	name    string
	workers [][2]any // (config, block); default olmoe-tiny-c6 blocks 1 and 2
	rerun   func(t *testing.T, r *editions.RawRecord)
	after   func(t *testing.T, dir string)
	errors  []string // IDs that must be reported as errors
	hints   []string // IDs that must be reported
	absent  []string // IDs that must not be reported
}

func readRawFile(t *testing.T, path string) *editions.RawRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r editions.RawRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// makeReproduction writes a reproduction directory of reproEdition.
func makeReproduction(t *testing.T, workers [][2]any, edit func(t *testing.T, r *editions.RawRecord)) string {
	t.Helper()
	return makeReproductionOf(t, reproEdition, workers, edit)
}

// makeReproductionOf writes a reproduction directory of the edition
// reproEdition, under its own frozen campaign and contract.
func makeReproductionOf(t *testing.T, reproEdition string, workers [][2]any, edit func(t *testing.T, r *editions.RawRecord)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repro")
	msum, _, err := editions.HashFile(filepath.Join(reproEdition, editions.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	camp, k, _, err := campaigns.LoadFrozen(filepath.Join(reproEdition, editions.CampaignFile), filepath.Join(reproEdition, editions.ContractFile))
	if err != nil {
		t.Fatal(err)
	}
	var pairs []campaigns.ReproPair
	for _, w := range workers {
		id, block := w[0].(string), w[1].(int)
		src := filepath.Join(reproEdition, editions.RawPath(id, block))
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		op := filepath.Join(dir, editions.ReproOriginalPath(id, block))
		if err := editions.WriteFileAtomic(op, b); err != nil {
			t.Fatal(err)
		}
		rerun := readRawFile(t, src)
		rerun.Environment.Hostname = "elsewhere"
		if edit != nil {
			edit(t, rerun)
		}
		rp := filepath.Join(dir, editions.ReproRerunPath(id, block))
		if err := editions.WriteDoc(rp, rerun); err != nil {
			t.Fatal(err)
		}
		p := campaigns.ReproPair{Original: readRawFile(t, src), Rerun: rerun}
		for _, f := range []struct {
			rel  string
			file *editions.ReproFile
		}{{editions.ReproOriginalPath(id, block), &p.OriginalFile}, {editions.ReproRerunPath(id, block), &p.RerunFile}} {
			sum, n, err := editions.HashFile(filepath.Join(dir, f.rel))
			if err != nil {
				t.Fatal(err)
			}
			*f.file = editions.ReproFile{Path: f.rel, Bytes: n, SHA256: sum}
		}
		pairs = append(pairs, p)
	}
	d, err := campaigns.Reproduction(camp.Edition, msum, "2026-01-02T03:04:05Z", editions.DefaultSpeedTolerance, k, pairs)
	if err != nil {
		t.Fatal(err)
	}
	if err := editions.WriteDoc(filepath.Join(dir, editions.ReproductionFile), &d); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editRepro rewrites reproduction.json through f (without re-validation,
// as a forger with a text editor would).
func editRepro(t *testing.T, dir string, f func(d *editions.ReproductionDoc)) {
	t.Helper()
	p := filepath.Join(dir, editions.ReproductionFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var d editions.ReproductionDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	f(&d)
	out, _ := json.MarshalIndent(&d, "", "  ")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// slower scales a record's timestamps by k, keeping its timings consistent.
func slower(k int64) func(t *testing.T, r *editions.RawRecord) {
	return func(t *testing.T, r *editions.RawRecord) {
		for i := range r.Requests {
			q := &r.Requests[i]
			for j := range q.TokenNs {
				q.TokenNs[j] *= k
			}
			ns := q.TokenNs
			q.TTFTSeconds, q.RuntimeSeconds, q.DecodeSeconds = float64(ns[0])/1e9, float64(ns[len(ns)-1])/1e9, float64(ns[len(ns)-1]-ns[0])/1e9
		}
	}
}

var reproCases = []reproCase{
	{name: "identical",
		hints:  []string{IDReproClaimReproduced, IDReproClaimNotRerun},
		absent: []string{IDReproSpeedOutside, IDReproDiffers, IDReproComparison, IDReproNoClaims}},
	{name: "slower machine: speed reported, not enforced", rerun: slower(2),
		hints:  []string{IDReproSpeedOutside, IDReproClaimReproduced},
		absent: []string{IDReproClaimNotReproduced}},
	{name: "a token differs",
		rerun:  func(t *testing.T, r *editions.RawRecord) { r.Requests[3].TokenIDs[7] ^= 1 },
		errors: []string{IDReproDiffers, IDReproClaimNotReproduced},
		absent: []string{IDReproComparison}},
	{name: "a counter differs",
		rerun:  func(t *testing.T, r *editions.RawRecord) { r.Requests[0].Cache.Evictions++ },
		errors: []string{IDReproDiffers, IDReproClaimNotReproduced}},
	{name: "a prompt differs",
		rerun:  func(t *testing.T, r *editions.RawRecord) { r.Requests[2].PromptTokenIDs[0]++ },
		errors: []string{IDReproDiffers, IDReproClaimNotReproduced}},
	{name: "flipped tokens_identical",
		rerun: func(t *testing.T, r *editions.RawRecord) { r.Requests[3].TokenIDs[7] ^= 1 },
		after: func(t *testing.T, dir string) {
			editRepro(t, dir, func(d *editions.ReproductionDoc) {
				for i := range d.Workers {
					d.Workers[i].Identical = true
					for j := range d.Workers[i].Requests {
						q := &d.Workers[i].Requests[j]
						q.TokensIdentical, q.FirstTokenDifference = true, -1
					}
				}
				d.Identical, d.Configurations[0].Identical = true, true
			})
		},
		errors: []string{IDReproComparison, IDReproDiffers, IDReproClaimNotReproduced}},
	{name: "forged speed ratio",
		rerun: slower(2),
		after: func(t *testing.T, dir string) {
			editRepro(t, dir, func(d *editions.ReproductionDoc) {
				c := &d.Configurations[0]
				c.RerunPooledDecodeTokS, c.SpeedRatio, c.WithinTolerance = c.OriginalPooledDecodeTokS, 1, true
			})
		},
		errors: []string{IDReproComparison}},
	{name: "another edition's manifest",
		after: func(t *testing.T, dir string) {
			editRepro(t, dir, func(d *editions.ReproductionDoc) { d.EditionManifestSHA256 = strings.Repeat("0", 64) })
		},
		errors: []string{IDReproEdition}},
	{name: "original copy is not the edition's",
		after: func(t *testing.T, dir string) {
			p := filepath.Join(dir, editions.ReproOriginalPath("olmoe-tiny-c6", 1))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, '\n'), 0o644)
		},
		errors: []string{IDReproOriginal}},
	{name: "rerun record replaced after the record was written",
		after: func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(reproEdition, editions.RawPath("olmoe-tiny-c6", 3)))
			os.WriteFile(filepath.Join(dir, editions.ReproRerunPath("olmoe-tiny-c6", 1)), b, 0o644)
		},
		errors: []string{IDReproRerun}},
	{name: "rerun under another contract",
		rerun:  func(t *testing.T, r *editions.RawRecord) { r.Contract.SHA256 = strings.Repeat("1", 64) },
		errors: []string{IDReproRerun, IDReproClaimNotReproduced}},
	{name: "rerun prefilled another way",
		rerun:  func(t *testing.T, r *editions.RawRecord) { r.Setup.Prefill = "token" },
		errors: []string{IDReproRerun, IDReproClaimNotReproduced}},
	{name: "rerun timings not its timestamps",
		rerun:  func(t *testing.T, r *editions.RawRecord) { r.Requests[0].DecodeSeconds /= 2 },
		errors: []string{IDReproRerun, IDReproClaimNotReproduced}},
	{name: "stray file",
		after: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, editions.ReproRerunDir, "raw", "olmoe-tiny-c6", "block-3.json"), []byte("{}"), 0o644)
		},
		errors: []string{IDReproRecord}},
	{name: "a block the edition lacks",
		after: func(t *testing.T, dir string) {
			editRepro(t, dir, func(d *editions.ReproductionDoc) { d.Workers[1].Block = 9 })
		},
		errors: []string{IDReproRecord}},
	{name: "no reproduction.json",
		after:  func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, editions.ReproductionFile)) },
		errors: []string{IDReproUnreadable}},
	{name: "not a reproduction record",
		after: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, editions.ReproductionFile), []byte(`{"schema":"horizon.claims","version":1}`), 0o644)
		},
		errors: []string{IDReproUnreadable}},
}

func TestReproductionCheck(t *testing.T) {
	schemas := fixtureSchemas(t)
	for _, tc := range reproCases {
		t.Run(tc.name, func(t *testing.T) {
			workers := tc.workers
			if workers == nil {
				workers = [][2]any{{"olmoe-tiny-c6", 1}, {"olmoe-tiny-c6", 2}}
			}
			dir := makeReproduction(t, workers, tc.rerun)
			if tc.after != nil {
				tc.after(t, dir)
			}
			rep, err := Verify(reproEdition, Options{Schemas: schemas, Reproduction: dir})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range tc.errors {
				if !hasSeverity(rep, id, Error) {
					t.Errorf("no %s error:\n%s", id, findingsText(rep.Findings))
				}
			}
			if len(tc.errors) == 0 && !rep.Passed() {
				t.Errorf("an honest reproduction fails:\n%s", findingsText(rep.Findings))
			}
			for _, id := range tc.hints {
				if !rep.Has(id) {
					t.Errorf("no %s:\n%s", id, findingsText(rep.Findings))
				}
			}
			for _, id := range tc.absent {
				if rep.Has(id) {
					t.Errorf("unexpected %s:\n%s", id, findingsText(rep.Findings))
				}
			}
		})
	}
}

func hasSeverity(rep *Report, id string, s Severity) bool {
	for _, f := range rep.Findings {
		if f.ID == id && f.Severity == s {
			return true
		}
	}
	return false
}

// Every claim of a rerun configuration gets exactly one verdict, and the
// others are said not to be rerun; without --reproduction the check is
// silent.
func TestReproductionClaimVerdicts(t *testing.T) {
	dir := makeReproduction(t, [][2]any{{"olmoe-tiny-c6", 1}}, nil)
	rep, err := Verify(reproEdition, Options{Schemas: fixtureSchemas(t), Reproduction: dir})
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]string{}
	for _, f := range rep.Findings {
		if f.Check != "reproduction" || f.File != editions.ClaimsFile {
			continue
		}
		if prev, ok := verdicts[f.Pointer]; ok {
			t.Errorf("%s has two verdicts: %s and %s", f.Pointer, prev, f.ID)
		}
		verdicts[f.Pointer] = f.ID
	}
	if rep.Claims == 0 || len(verdicts) != rep.Claims {
		t.Fatalf("%d verdicts for %d claims:\n%s", len(verdicts), rep.Claims, findingsText(rep.Findings))
	}
	reproduced := 0
	for _, id := range verdicts {
		if id == IDReproClaimReproduced {
			reproduced++
		}
	}
	if reproduced < 2 { // h2d_bytes and the identical timings at least
		t.Errorf("%d claims reproduced:\n%s", reproduced, findingsText(rep.Findings))
	}
	plain, err := Verify(reproEdition, Options{Schemas: fixtureSchemas(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range plain.Findings {
		if f.Check == "reproduction" {
			t.Errorf("reproduction finding without a reproduction: %+v", f)
		}
	}
}
