package verifier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// The reproduction check on the committed prefill and depth smoke
// editions: the per-prompt comparisons of reproduction.json
// (prefill_lengths, decode_depths) are recomputed, and every
// <config>.prefill_lengths.<prompt>.* and <config>.decode_depths.<prompt>.*
// claim of a rerun configuration gets the verdict a decode claim gets:
// reproduced, outside the tolerance (a hint), or not reproduced.

const (
	prefillReproEdition = "../editions/prefill-smoke-cpu"
	depthReproEdition   = "../editions/depth-smoke-cpu"
)

// slowerPrefill doubles every measured request's prefill_seconds (the
// prompt rate halves; decode, TTFT and the timestamps are unchanged).
func slowerPrefill(t *testing.T, r *editions.RawRecord) {
	for i := range r.Requests {
		if ps := r.Requests[i].PrefillSeconds; ps != nil && ps.Ok() {
			ps.Value *= 2
		}
	}
}

func TestReproductionPromptClaims(t *testing.T) {
	const prefillClaim, depthClaim = ".prefill_lengths.", ".decode_depths."
	workers := [][2]any{{"olmoe-tiny-c6", 1}, {"olmoe-tiny-c6", 2}}
	cases := []struct {
		name    string
		edition string
		rerun   func(t *testing.T, r *editions.RawRecord)
		after   func(t *testing.T, dir string)
		// verdicts: the verdict every claim of the rerun configuration whose
		// id holds the key must get.
		verdicts map[string]string
		errors   []string
	}{
		{name: "prefill identical", edition: prefillReproEdition,
			verdicts: map[string]string{prefillClaim: IDReproClaimReproduced}},
		{name: "prefill slower: reported, not enforced", edition: prefillReproEdition, rerun: slowerPrefill,
			verdicts: map[string]string{prefillClaim: IDReproSpeedOutside}},
		{name: "prefill token differs", edition: prefillReproEdition,
			rerun:    func(t *testing.T, r *editions.RawRecord) { r.Requests[1].TokenIDs[0] ^= 1 },
			verdicts: map[string]string{prefillClaim: IDReproClaimNotReproduced},
			errors:   []string{IDReproDiffers, IDReproClaimNotReproduced}},
		{name: "prefill forged ratio", edition: prefillReproEdition, rerun: slowerPrefill,
			after: func(t *testing.T, dir string) {
				editRepro(t, dir, func(d *editions.ReproductionDoc) {
					m := &d.Configurations[0].PrefillLengths[1].Metrics[0]
					m.Rerun, m.Ratio, m.WithinTolerance = m.Original, editions.Observed(1.0), true
				})
			},
			errors: []string{IDReproComparison}},
		{name: "prefill comparisons dropped", edition: prefillReproEdition,
			after: func(t *testing.T, dir string) {
				editRepro(t, dir, func(d *editions.ReproductionDoc) { d.Configurations[0].PrefillLengths = nil })
			},
			errors: []string{IDReproComparison}},
		{name: "prefill prompt renamed", edition: prefillReproEdition,
			after: func(t *testing.T, dir string) {
				editRepro(t, dir, func(d *editions.ReproductionDoc) { d.Configurations[0].PrefillLengths[0].PromptID = "pp17" })
			},
			errors: []string{IDReproComparison}},
		{name: "decode depth comparisons on a prefill edition", edition: prefillReproEdition,
			after: func(t *testing.T, dir string) {
				editRepro(t, dir, func(d *editions.ReproductionDoc) {
					d.Configurations[0].DecodeDepths = d.Configurations[0].PrefillLengths
				})
			},
			errors: []string{IDReproComparison}},
		{name: "depth identical", edition: depthReproEdition,
			verdicts: map[string]string{prefillClaim: IDReproClaimReproduced, depthClaim: IDReproClaimReproduced}},
		{name: "depth decode slower: prefill claims still reproduced", edition: depthReproEdition, rerun: slower(2),
			verdicts: map[string]string{prefillClaim: IDReproClaimReproduced, depthClaim: IDReproSpeedOutside}},
		{name: "depth prefill slower: decode claims still reproduced", edition: depthReproEdition, rerun: slowerPrefill,
			verdicts: map[string]string{prefillClaim: IDReproSpeedOutside, depthClaim: IDReproClaimReproduced}},
		{name: "depth counter differs", edition: depthReproEdition,
			rerun:    func(t *testing.T, r *editions.RawRecord) { r.Requests[2].Cache.Misses++ },
			verdicts: map[string]string{prefillClaim: IDReproClaimNotReproduced, depthClaim: IDReproClaimNotReproduced},
			errors:   []string{IDReproDiffers}},
		{name: "depth forged tpot", edition: depthReproEdition, rerun: slower(2),
			after: func(t *testing.T, dir string) {
				editRepro(t, dir, func(d *editions.ReproductionDoc) {
					q := d.Configurations[0].DecodeDepths[2]
					m := &q.Metrics[len(q.Metrics)-1]
					m.Rerun, m.Ratio, m.WithinTolerance = m.Original, editions.Observed(1.0), true
				})
			},
			errors: []string{IDReproComparison}},
		{name: "depth metric renamed", edition: depthReproEdition,
			after: func(t *testing.T, dir string) {
				editRepro(t, dir, func(d *editions.ReproductionDoc) {
					d.Configurations[0].DecodeDepths[0].Metrics[0].Metric = "mean_tok_s"
				})
			},
			errors: []string{IDReproComparison}},
	}
	schemas := fixtureSchemas(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := makeReproductionOf(t, tc.edition, workers, tc.rerun)
			if tc.after != nil {
				tc.after(t, dir)
			}
			rep, err := Verify(tc.edition, Options{Schemas: schemas, Reproduction: dir})
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
			if len(tc.verdicts) == 0 {
				return
			}
			claims := readClaimsFile(t, tc.edition)
			got := map[string]string{}
			for _, f := range rep.Findings {
				if f.Check == "reproduction" && f.File == editions.ClaimsFile && strings.HasPrefix(f.Pointer, "/claims/") {
					got[f.Pointer] = f.ID
				}
			}
			for key, want := range tc.verdicts {
				n := 0
				for i, cl := range claims {
					if !strings.HasPrefix(cl.ID, "olmoe-tiny-c6.") || !strings.Contains(cl.ID, key) {
						continue
					}
					n++
					if g := got[ptr("claims", i)]; g != want {
						t.Errorf("claim %s: verdict %s, want %s", cl.ID, g, want)
					}
				}
				if n == 0 {
					t.Errorf("the edition has no olmoe-tiny-c6 claim holding %q", key)
				}
			}
		})
	}
}

func readClaimsFile(t *testing.T, edition string) []editions.Claim {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(edition, editions.ClaimsFile))
	if err != nil {
		t.Fatal(err)
	}
	var d editions.ClaimsDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d.Claims
}
