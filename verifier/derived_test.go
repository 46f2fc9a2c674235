package verifier

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
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

// splitResults rewrites the fixture's report.html results table as the
// runner's two tables (speed, resources): the columns from the first
// whose header starts with split on go to a second table, which starts
// with the configuration column again. edit then changes the split text.
func splitResults(split string, edit func(s string) string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		b, err := os.ReadFile(filepath.Join(dir, editions.ReportHTML))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		tab, ok := htmlTableUnder(text, resultsTitle)
		if !ok {
			t.Fatal("the fixture's results table does not parse")
		}
		at := slices.IndexFunc(tab.headers, func(h string) bool { return strings.HasPrefix(h, split) })
		if at < 1 {
			t.Fatalf("no column %q after the first in %v", split, tab.headers)
		}
		render := func(cols []int) string {
			var s strings.Builder
			s.WriteString("<table>\n<tr>")
			for _, c := range cols {
				s.WriteString("<th>" + html.EscapeString(tab.headers[c]) + "</th>")
			}
			s.WriteString("</tr>\n")
			for _, r := range tab.rows {
				s.WriteString("<tr>")
				for _, c := range cols {
					s.WriteString("<td>" + html.EscapeString(r[c]) + "</td>")
				}
				s.WriteString("</tr>\n")
			}
			return s.String() + "</table>"
		}
		var first, second []int
		for c := range tab.headers {
			if c < at {
				first = append(first, c)
			} else {
				second = append(second, c)
			}
		}
		second = append([]int{0}, second...)
		i := strings.Index(text, "<h2>Results</h2>")
		j := i + strings.Index(text[i:], "</table>") + len("</table>")
		text = text[:i] + "<h2>Results</h2>\n<h3>Speed</h3>\n" + render(first) + "\n<h3>Resources</h3>\n" + render(second) + text[j:]
		writeFile(t, dir, editions.ReportHTML, edit(text))
	}
}

// The split results tables of report.html are joined on their first
// column: unchanged they verify, a changed cell in the second is an error,
// and rows out of step between the two are no table.
func TestDerivedSplitResults(t *testing.T) {
	same := func(s string) string { return s }
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, dir string)
		want string // "" for clean
	}{
		{"split, unchanged", splitResults("H2D", same), ""},
		{"a cell of the second table", splitResults("H2D", func(s string) string {
			_, res, _ := strings.Cut(s, "<h3>Resources</h3>")
			cell := regexp.MustCompile(`<td>tiny-c4</td><td>([^<]*)</td>`).FindStringSubmatch(res)
			if cell == nil {
				panic("no tiny-c4 row in the resources table")
			}
			return strings.Replace(s, cell[0], "<td>tiny-c4</td><td>9"+cell[1]+"</td>", 1)
		}), IDDerivedCell},
		{"rows out of step", splitResults("H2D", func(s string) string {
			head, res, _ := strings.Cut(s, "<h3>Resources</h3>")
			res = strings.Replace(strings.Replace(strings.Replace(res, "<td>tiny-c4</td>", "<td>@</td>", 1), "<td>tiny-c8</td>", "<td>tiny-c4</td>", 1), "<td>@</td>", "<td>tiny-c8</td>", 1)
			return head + "<h3>Resources</h3>" + res
		}), IDDerivedTableMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newFixture(t)
			tc.edit(t, dir)
			rehash(t, dir)
			rep := verifyFixture(t, dir)
			if tc.want == "" {
				if !rep.Passed() || rep.Has(IDDerivedTableMissing) || rep.Has(IDDerivedCell) {
					t.Fatalf("the split report does not verify:\n%s", findingsText(rep.Findings))
				}
				return
			}
			if !rep.Has(tc.want) {
				t.Fatalf("want %s:\n%s", tc.want, findingsText(rep.Findings))
			}
		})
	}
}
