package verifier

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// TestUncertaintyRecomputed: the fixture's configurations carry the
// runner's bootstrap-v1 uncertainty (report.Uncertainty through
// fixAggregate), the verifier's own implementation agrees bit for bit, and
// each careless edit of it (manifest re-hashed) is a recompute finding at
// the edited pointer. Removing it altogether is an older edition's shape
// and passes.
// d0 is configuration id's document as a tree.
func d0(t *testing.T, dir, id string) map[string]any {
	return readTree(t, dir, editions.ConfigPath(id))
}

func TestUncertaintyRecomputed(t *testing.T) {
	setNum := func(path ...string) func(u map[string]any, f func(float64) float64) {
		return func(u map[string]any, f func(float64) float64) {
			o := u
			for _, k := range path[:len(path)-1] {
				o = o[k].(map[string]any)
			}
			k := path[len(path)-1]
			v, err := strconv.ParseFloat(string(o[k].(json.Number)), 64)
			if err != nil {
				t.Fatal(err)
			}
			o[k] = json.Number(strconv.FormatFloat(f(v), 'g', -1, 64))
		}
	}
	down := func(v float64) float64 { return math.Nextafter(v, math.Inf(-1)) }
	for _, tc := range []struct {
		name    string
		edit    func(u map[string]any)
		want    string // "" : passes
		pointer string // "": any pointer
	}{
		{"as written", func(map[string]any) {}, "", ""},
		{"lower bound of pooled decode one ulp down", func(u map[string]any) { setNum("pooled_decode_tok_s", "lo")(u, down) },
			IDRecomputeBootstrap, "/uncertainty/pooled_decode_tok_s/lo"},
		{"upper bound of TTFT mean one ulp down", func(u map[string]any) { setNum("ttft_mean_s", "hi")(u, down) },
			IDRecomputeBootstrap, "/uncertainty/ttft_mean_s/hi"},
		{"seed changed", func(u map[string]any) { setNum("seed")(u, func(v float64) float64 { return v + 1 }) },
			IDRecomputeBootstrap, ""}, // whichever bounds the new draws move
		{"p99 of decode rate raised", func(u map[string]any) {
			setNum("request_decode_tok_s", "p99")(u, func(v float64) float64 { return v * 1.01 })
		},
			IDRecomputeQuantiles, "/uncertainty/request_decode_tok_s/p99"},
		{"p50 of TTFT lowered", func(u map[string]any) { setNum("request_ttft_s", "p50")(u, down) },
			IDRecomputeQuantiles, "/uncertainty/request_ttft_s/p50"},
		// The schema holds B to 2000 too; the verifier says so on its own.
		{"fewer resamples", func(u map[string]any) { u["resamples"] = json.Number("200") },
			IDRecomputeBootstrap, "/uncertainty/resamples"},
		{"removed (an edition before bootstrap-v1)", func(u map[string]any) { clear(u) }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newFixture(t)
			id := configIDs(t, dir)[0]
			edit(t, dir, editions.ConfigPath(id), func(d map[string]any) {
				u := obj(t, d, "uncertainty")
				tc.edit(u)
				if len(u) == 0 {
					delete(d, "uncertainty")
				}
			})
			if tc.want == "" {
				// An edition before bootstrap-v1 has no claim intervals either.
				edit(t, dir, editions.ClaimsFile, func(doc map[string]any) {
					claims, _ := doc["claims"].([]any)
					for _, c := range claims {
						c := c.(map[string]any)
						if src := obj(t, c, "source"); src["file"] == editions.ConfigPath(id) {
							if _, ok := d0(t, dir, id)["uncertainty"]; !ok {
								delete(c, "interval")
							}
						}
					}
				})
			} else {
				refreshClaimIntervals(t, dir) // a careful forger's claim states the edited bound
			}
			rerenderReports(t, dir) // the tables follow the documents (no interval columns without one)
			rehash(t, dir)
			rep := verifyFixture(t, dir)
			if tc.want == "" {
				if rep.Errors() != 0 {
					t.Fatalf("want a pass:\n%s", findingsText(rep.Findings))
				}
				return
			}
			for _, f := range rep.Findings {
				if f.ID == tc.want && f.File == editions.ConfigPath(id) && (tc.pointer == "" || f.Pointer == tc.pointer) {
					return
				}
			}
			t.Fatalf("want %s at %s#%s:\n%s", tc.want, editions.ConfigPath(id), tc.pointer, findingsText(rep.Findings))
		})
	}
}

// TestUncertaintyReportCell: the reports' interval columns are checked
// against the documents like every other cell.
func TestUncertaintyReportCell(t *testing.T) {
	for _, rel := range []string{editions.ReportMD, editions.ReportHTML} {
		t.Run(rel, func(t *testing.T) {
			dir := newFixture(t)
			docs, _, _, _ := reportInputs(t, dir)
			u := docs[0].Uncertainty.PooledDecodeTokS
			cell := strconv.FormatFloat(u.Lo, 'f', 2, 64) + "-" + strconv.FormatFloat(u.Hi, 'f', 2, 64)
			wider := strconv.FormatFloat(u.Lo, 'f', 2, 64) + "-" + strconv.FormatFloat(u.Hi+0.5, 'f', 2, 64)
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			if !strings.Contains(s, cell) {
				t.Fatalf("%s lacks the interval cell %q", rel, cell)
			}
			writeFile(t, dir, rel, strings.Replace(s, cell, wider, 1))
			rehash(t, dir)
			if rep := verifyFixture(t, dir); !rep.Has(IDDerivedCell) {
				t.Fatalf("want %s:\n%s", IDDerivedCell, findingsText(rep.Findings))
			}
		})
	}
}
