package verifier

import (
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/ceilings"
	"github.com/horizon-runmap/horizon/editions"
)

// TestUnratedCeilingsHint: a cuda edition whose records name another GPU
// than the ceilings' figures verifies (its ceilings section says UNKNOWN,
// which is true), with one derived.ceilings-unrated hint a configuration;
// the genuine edition has none. A forger renaming the GPU to hide a poor
// share of the ceiling is then visible in the summary.
func TestUnratedCeilingsHint(t *testing.T) {
	src := filepath.Join("..", "editions", "full-residency-v2")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("%s: %v", src, err)
	}
	schemas := fixtureSchemas(t)
	for _, tc := range []struct {
		name   string
		rename bool
	}{{"genuine", false}, {"every record names an H100", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(src))
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			ids := configIDs(t, dir)
			if tc.rename {
				for _, id := range ids {
					for _, p := range rawPathsOf(t, dir, id) {
						edit(t, dir, p, func(d map[string]any) { obj(t, d, "environment")["gpu"] = "NVIDIA H100 80GB HBM3" })
					}
				}
				forge(t, dir)
				rerenderCeilings(t, dir)
			}
			rep, err := Verify(dir, Options{Schemas: schemas})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed() {
				t.Fatalf("did not verify:\n%s", findingsText(rep.Findings))
			}
			n := 0
			for _, f := range rep.Findings {
				if f.ID == IDDerivedCeilingsUnrated {
					n++
				}
			}
			want := 0
			if tc.rename {
				want = len(ids)
			}
			if n != want {
				t.Fatalf("%d %s hints, want %d:\n%s", n, IDDerivedCeilingsUnrated, want, findingsText(rep.Findings))
			}
		})
	}
}

// rerenderCeilings writes both reports' ceilings section and report.html's
// headline sentences from the raw records, as the runner does (package
// ceilings, default options), then the manifest: a careful forger's last
// step after editing the records.
func rerenderCeilings(t *testing.T, dir string) {
	t.Helper()
	confs, err := ceilings.LoadEdition(dir)
	if err != nil {
		t.Fatal(err)
	}
	texts, err := ceilings.SectionVersionsOf(confs)
	if err != nil {
		t.Fatal(err)
	}
	md := readFile(t, dir, editions.ReportMD)
	head := "\n## " + ceilingsHeading + "\n\n"
	i := strings.Index(md, head)
	if i < 0 {
		t.Fatalf("%s has no ceilings section", editions.ReportMD)
	}
	rest := md[i+len(head):]
	end := len(rest)
	if j := strings.Index(rest, "\n## "); j >= 0 {
		end = j
	}
	writeFile(t, dir, editions.ReportMD, md[:i+len(head)]+texts[0]+rest[end:])
	h := readFile(t, dir, editions.ReportHTML)
	i = strings.Index(h, "<h2>"+ceilingsHeading+"</h2>")
	if i < 0 {
		t.Fatalf("%s has no ceilings section", editions.ReportHTML)
	}
	a := i + strings.Index(h[i:], "<pre>") + len("<pre>")
	z := a + strings.Index(h[a:], "</pre>")
	writeFile(t, dir, editions.ReportHTML, h[:a]+html.EscapeString(texts[0])+h[z:])
	docs, _, _, _ := reportInputs(t, dir)
	rerenderHeadlines(t, dir, docs, func(string) map[string]float64 { return ceilings.HBMCeilings(confs, ceilings.DefaultOptions()) })
	rehash(t, dir)
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
