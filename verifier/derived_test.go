package verifier

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// TestDerivedCases: each way a report can depart from the JSON, on the
// fixture (manifest re-hashed, so only check derived speaks).
func TestDerivedCases(t *testing.T) {
	replace := func(rel, old, new string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), old) {
				t.Fatalf("%s lacks %q", rel, old)
			}
			writeFile(t, dir, rel, strings.Replace(string(b), old, new, 1))
		}
	}
	for _, tc := range []struct {
		name string
		want string
		edit func(t *testing.T, dir string)
	}{
		{"report.md deleted", IDDerivedReportMissing, func(t *testing.T, dir string) { remove(t, dir, editions.ReportMD) }},
		{"report.html deleted", IDDerivedReportMissing, func(t *testing.T, dir string) { remove(t, dir, editions.ReportHTML) }},
		{"plot not a PNG", IDDerivedPlotNotPNG, func(t *testing.T, dir string) { writeFile(t, dir, fixPlot, "GIF89a") }},
		{"claim count in report.md", IDDerivedClaimCount, replace(editions.ReportMD, "Claims: 10 in", "Claims: 12 in")},
		{"claim count in report.html", IDDerivedClaimCount, replace(editions.ReportHTML, "Claims: 10 in", "Claims: 9 in")},
		{"contract hash in report.md", IDDerivedContractLine, replace(editions.ReportMD, "(sha256 `5", "(sha256 `6")},
		{"contract id in report.html", IDDerivedContractLine, replace(editions.ReportHTML, "<strong>PERF-REAL-v1</strong>", "<strong>PERF-REAL-v2</strong>")},
		{"results table gone from report.md", IDDerivedTableMissing, replace(editions.ReportMD, "## Results", "## Outcomes")},
		{"invariants table gone from report.html", IDDerivedTableMissing,
			replace(editions.ReportHTML, "<h2>Cache contract invariants</h2>", "<h2>Invariants</h2>")},
		{"row renamed in report.md", IDDerivedRow, replace(editions.ReportMD, "| tiny-c8 | synthetic", "| tiny-c9 | synthetic")},
		{"invariant cell in report.md", IDDerivedCell, replace(editions.ReportMD, "| tiny-c4 | 0 |", "| tiny-c4 | 00 |")},
		{"escaped cell in report.html", IDDerivedCell, replace(editions.ReportHTML, "<td>tiny-c4</td><td>synthetic", "<td>tiny-c4</td><td>synthetic&#43;")},
		{"plot reference to an absent file", IDDerivedPlotMissing, replace(editions.ReportHTML, `src="plots/decode_tok_s.png"`, `src="plots/vram.png"`)},
		{"unknown column is a hint", IDDerivedColumn, replace(editions.ReportMD, "| regime |", "| regime (new) |")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newFixture(t)
			tc.edit(t, dir)
			rehash(t, dir)
			rep := verifyFixture(t, dir)
			if !rep.Has(tc.want) {
				t.Fatalf("want %s:\n%s", tc.want, findingsText(rep.Findings))
			}
			if catalogue[tc.want].Severity == Hint && !rep.Passed() {
				t.Fatalf("a hint case must not fail the edition:\n%s", findingsText(rep.Findings))
			}
		})
	}
}

// TestReportTablesParse: the parsers read the committed editions' reports
// (written by the runner) and the fixture's, every column known.
func TestReportTablesParse(t *testing.T) {
	dirs := append(committedEditions(t), newFixture(t))
	for _, dir := range dirs {
		for _, rf := range reportFormats {
			b, err := os.ReadFile(filepath.Join(dir, rf.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range []struct {
				title string
				cols  map[string]derivedColumn
			}{{resultsTitle, resultColumns}, {invariantsTitle, invariantColumns}} {
				tb, ok := rf.table(string(b), x.title)
				if !ok || len(tb.rows) == 0 {
					t.Errorf("%s %s: no %q table", dir, rf.file, x.title)
					continue
				}
				for _, h := range tb.headers {
					if x.cols[h] == nil {
						t.Errorf("%s %s: unknown column %q", dir, rf.file, h)
					}
				}
				if !slices.Contains(tb.headers, "configuration") {
					t.Errorf("%s %s: no configuration column", dir, rf.file)
				}
			}
		}
	}
}

func TestMDCells(t *testing.T) {
	got := mdCells(`| a | b \| c |  d  |`)
	if want := []string{"a", "b | c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("mdCells = %q, want %q", got, want)
	}
}
