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
				// seventh after a KV cache column); with one output token it
				// is UNKNOWN, and the eighth (ninth) (overall output) is
				// edited instead.
				editReportCell(t, dir, editions.ReportMD,
					regexp.MustCompile(`(?m)^(\|(?:[^|\n]*\|){5,6} )(\d+)(\.\d\d \|)`),
					regexp.MustCompile(`(?m)^(\|(?:[^|\n]*\|){5,6} UNKNOWN \| UNKNOWN \| )(\d+)(\.\d\d \|)`))
				rehash(t, dir)
			}},
		forgery{family: "derived", name: "number in report.html's results table edited", want: IDDerivedCell,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				// The sixth cell of the first data row is pooled decode
				// (the seventh after a KV cache column). (With one output
				// token it is UNKNOWN: the eighth, overall output, after the
				// two UNKNOWN cells.)
				editReportCell(t, dir, editions.ReportHTML,
					regexp.MustCompile(`(<tr>(?:<td[^>]*>[^<]*</td>){5,6}<td[^>]*>)(\d+)(\.\d\d</td>)`),
					regexp.MustCompile(`(<tr>(?:<td[^>]*>[^<]*</td>){5,6}<td[^>]*>UNKNOWN</td><td[^>]*>UNKNOWN</td><td[^>]*>)(\d+)(\.\d\d</td>)`))
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
	// a later table (the ceilings sections, which the verifier does not
	// check) may hold a row of the same shape.
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
