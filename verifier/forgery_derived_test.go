package verifier

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// Consistent forgeries against the derived files: the JSON stays honest
// (and every hash is re-derived), and the number a reader sees is not.
func init() {
	forgeries = append(forgeries,
		forgery{family: "derived", name: "number in report.md's results table edited", want: IDDerivedCell,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				// Pooled decode, the sixth cell of the first data row (the
				// seventh after a KV cache column, the eighth after an expert
				// activations column too, the ninth after a dense activations
				// column: the lazy {5,8}? tries the fewest text cells first,
				// and those columns hold no decimals); with
				// one output token it is UNKNOWN, and overall output, after
				// the two UNKNOWN cells, is edited instead.
				editReportCell(t, dir, editions.ReportMD,
					regexp.MustCompile(`(?m)^(\|(?:[^|\n]*\|){5,8}? )(\d+)(\.\d\d \|)`),
					regexp.MustCompile(`(?m)^(\|(?:[^|\n]*\|){5,8}? UNKNOWN \| UNKNOWN \| )(\d+)(\.\d\d \|)`))
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "number in report.html's results table edited", want: IDDerivedCell,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				// The sixth cell of the first data row is pooled decode
				// (the seventh after a KV cache column, the eighth after an
				// expert activations column too, the ninth after a dense
				// activations column). (With one output token it
				// is UNKNOWN: overall output, after the two UNKNOWN cells.)
				editReportCell(t, dir, editions.ReportHTML,
					regexp.MustCompile(`(<tr>(?:<td[^>]*>[^<]*</td>){5,8}?<td[^>]*>)(\d+)(\.\d\d</td>)`),
					regexp.MustCompile(`(<tr>(?:<td[^>]*>[^<]*</td>){5,8}?<td[^>]*>UNKNOWN</td><td[^>]*>UNKNOWN</td><td[^>]*>)(\d+)(\.\d\d</td>)`))
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "HBM share in report.html's headline edited", want: IDDerivedHeadline,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				// A cuda sentence's share of the HBM ceiling, raised by 7
				// points: it is no longer the rate over the stated ceiling.
				b, err := os.ReadFile(filepath.Join(dir, editions.ReportHTML))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(b), "% of the HBM ceiling (") {
					t.Skip("no HBM clause in the headline (a cpu edition)")
				}
				editReportCell(t, dir, editions.ReportHTML, regexp.MustCompile(`(<ul class="headline"><li>[^<]*?, )(\d+)(% of the HBM ceiling \()`))
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "HBM ceiling and share in report.html's headline edited together", want: IDDerivedHeadline,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				editHeadlineCeiling(t, dir)
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "number in report.md's ceilings section edited", want: IDDerivedCeilings,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				editCeilingsNumber(t, dir, editions.ReportMD)
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "ceilings section taken out of report.md", want: IDDerivedCeilings,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				dropCeilingsSection(t, dir, editions.ReportMD)
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "ceilings section taken out of report.html", want: IDDerivedCeilings,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				dropCeilingsSection(t, dir, editions.ReportHTML)
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "number in report.html's ceilings section edited", want: IDDerivedCeilings,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				editCeilingsNumber(t, dir, editions.ReportHTML)
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "rate in report.html's headline edited", want: IDDerivedHeadline,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				// The first rate of the first sentence: pooled decode, or
				// the longest prompt's prefill with one output token.
				editReportCell(t, dir, editions.ReportHTML,
					regexp.MustCompile(`(<ul class="headline"><li>[^<]*?[:,] (?:prefill )?)(\d+)(\.\d tok/s)`))
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "plot deleted from the manifest and the disk", want: IDDerivedPlotMissing,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				b, err := os.ReadFile(filepath.Join(dir, editions.ReportMD))
				if err != nil {
					t.Fatal(err)
				}
				m := regexp.MustCompile(`!\[[^\]]*\]\((plots/[^)]+\.png)\)`).FindStringSubmatch(string(b))
				if m == nil {
					t.Skip("report.md shows no plot")
				}
				remove(t, dir, m[1])
				rehash(t, dir)
			}},
	)
}

// editReportCell raises the integer part of the number at the earliest
// match of any of res (groups: before, integer part, after) by 7 in a
// report file.
func editReportCell(t *testing.T, dir, rel string, res ...*regexp.Regexp) {
	t.Helper()
	p := filepath.Join(dir, rel)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	// The earliest match of any pattern: the results table comes first, and
	// a later table (the ceilings section, checked separately) may hold a
	// row of the same shape.
	var loc []int
	for _, re := range res {
		if l := re.FindStringSubmatchIndex(s); l != nil && (loc == nil || l[0] < loc[0]) {
			loc = l
		}
	}
	if loc == nil {
		t.Fatalf("%s: no cell to edit", rel)
	}
	n, err := strconv.Atoi(s[loc[4]:loc[5]])
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, rel, s[:loc[4]]+strconv.Itoa(n+7)+s[loc[5]:])
}

// editHeadlineCeiling lowers the first HBM ceiling a report.html headline
// states by a third and restates the share as the pooled decode rate over
// the new ceiling, so that the clause is consistent with itself: a forger
// who makes the runtime look closer to its bound. It skips an edition
// without an HBM clause (cpu editions).
func editHeadlineCeiling(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, editions.ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	re := regexp.MustCompile(`(\S+) \(\d+/\d+ experts\): [0-9.]+ tok/s, (\d+)% of the HBM ceiling \((\d+) tok/s\)`)
	m := re.FindStringSubmatchIndex(s)
	if m == nil {
		t.Skip("no HBM clause in the headline (a cpu edition)")
	}
	cb, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(s[m[2]:m[3]]))))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := LoadConfig(cb)
	if err != nil {
		t.Fatal(err)
	}
	pd := doc.Metrics.PooledDecodeTokS
	if !pd.Ok() {
		t.Skip("the configuration has no pooled decode rate")
	}
	ceil, err := strconv.Atoi(s[m[6]:m[7]])
	if err != nil {
		t.Fatal(err)
	}
	forged := ceil * 2 / 3
	share := strconv.FormatFloat(100*pd.Value/float64(forged), 'f', 0, 64)
	writeFile(t, dir, editions.ReportHTML, s[:m[4]]+share+s[m[5]:m[6]]+strconv.Itoa(forged)+s[m[7]:])
}

// editCeilingsNumber raises by 7 the integer part of the first number cell
// of the first table row in a report's ceilings section (an HBM ceiling, a
// pooled decode rate, a byte count: whatever comes first). It skips an
// edition whose report has no ceilings section (cpu editions).
func editCeilingsNumber(t *testing.T, dir, rel string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	at := strings.Index(s, ceilingsHeading)
	if at < 0 {
		t.Skip("the report has no ceilings section")
	}
	num := regexp.MustCompile(`^ *(\d+)(\.\d+)? *$`)
	sep := false
	for off := at; off < len(s); {
		end := strings.IndexByte(s[off:], '\n')
		if end < 0 {
			break
		}
		line := s[off : off+end]
		switch {
		case strings.HasPrefix(line, "| ---"):
			sep = true
		case sep && strings.HasPrefix(line, "| "):
			pos := off + 1
			for _, cell := range strings.Split(line[1:], "|") {
				if m := num.FindStringSubmatchIndex(cell); m != nil {
					n, err := strconv.Atoi(cell[m[2]:m[3]])
					if err != nil {
						t.Fatal(err)
					}
					i := pos + m[2]
					writeFile(t, dir, rel, s[:i]+strconv.Itoa(n+7)+s[pos+m[3]:])
					return
				}
				pos += len(cell) + 1
			}
			sep = false
		}
		off += end + 1
	}
	t.Skip("the report's ceilings section has no number cell")
}

// dropCeilingsSection takes the ceilings section out of a report, heading
// and all, up to the next section of its level. It skips an edition whose
// report has none (cpu editions).
func dropCeilingsSection(t *testing.T, dir, rel string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	open, next := "\n## "+ceilingsHeading+"\n", "\n## "
	if strings.HasSuffix(rel, ".html") {
		open, next = "<h2>"+ceilingsHeading+"</h2>", "<h2>"
	}
	at := strings.Index(s, open)
	if at < 0 {
		t.Skip("the report has no ceilings section")
	}
	end := len(s)
	if i := strings.Index(s[at+len(open):], next); i >= 0 {
		end = at + len(open) + i
	} else if strings.HasSuffix(rel, ".html") {
		if i := strings.Index(s[at:], "</body>"); i >= 0 {
			end = at + i
		}
	}
	writeFile(t, dir, rel, s[:at]+s[end:])
}
