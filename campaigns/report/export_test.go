package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// committedEditions are the editions under editions/ that carry a
// report.md.
func committedEditions(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("..", "..", "editions"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join("..", "..", "editions", e.Name(), editions.ReportMD)); err != nil {
			continue
		}
		// residency editions only: IFEval and fidelity editions have their own documents
		var kd editions.ContractDoc
		b, err := os.ReadFile(filepath.Join("..", "..", "editions", e.Name(), editions.ContractFile))
		if err == nil && json.Unmarshal(b, &kd) == nil && (contracts.IsIFEval(kd.ID) || contracts.IsFidelity(kd.ID)) {
			continue
		}
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		t.Fatal("no committed editions found")
	}
	return names
}

// loadConfigs reads a committed edition's configuration documents in
// campaign order, the order report.md's rows follow.
func loadConfigs(t *testing.T, name string) []editions.ConfigDoc {
	t.Helper()
	src := filepath.Join("..", "..", "editions", name)
	var cd editions.CampaignDoc
	readJSON(t, filepath.Join(src, editions.CampaignFile), &cd)
	c, err := CampaignFromDoc(cd)
	if err != nil {
		t.Fatal(err)
	}
	docs := make([]editions.ConfigDoc, len(c.Configurations))
	for i, cfg := range c.Configurations {
		readJSON(t, filepath.Join(src, filepath.FromSlash(editions.ConfigPath(cfg.ID))), &docs[i])
	}
	return docs
}

func export(t *testing.T, format string, docs []editions.ConfigDoc) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := ExportResults(&b, format, docs); err != nil {
		t.Fatalf("%s: %v", format, err)
	}
	return b.Bytes()
}

// TestExportGolden pins every format of the cpu smoke edition's results
// table, and md, csv and json of the prefill and depth smoke editions'
// (with their per-prompt tables) (testdata/export_<edition>.<format>;
// -update rewrites them). horizon-bench's CLI tests hold the command's
// output to the smoke-cpu files.
func TestExportGolden(t *testing.T) {
	for _, tc := range []struct{ edition, format string }{
		{"smoke-cpu", "md"}, {"smoke-cpu", "csv"}, {"smoke-cpu", "json"}, {"smoke-cpu", "jsonl"},
		{"prefill-smoke-cpu", "md"}, {"prefill-smoke-cpu", "csv"}, {"prefill-smoke-cpu", "json"},
		{"depth-smoke-cpu", "md"}, {"depth-smoke-cpu", "csv"}, {"depth-smoke-cpu", "json"},
	} {
		format := tc.format
		docs := loadConfigs(t, tc.edition)
		t.Run(tc.edition+"/"+format, func(t *testing.T) {
			got := export(t, format, docs)
			golden := filepath.Join("testdata", "export_"+tc.edition+"."+format)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s (run with -update):\n%s", format, golden, got)
			}
		})
	}
}

// resultsTable is the results table of a report.md: the table lines after
// "## Results".
func resultsTable(t *testing.T, md string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n## Results\n\n")
	if !ok {
		t.Fatal("report.md has no ## Results section")
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(rest, "\n") {
		if !strings.HasPrefix(l, "|") {
			break
		}
		b.WriteString(l)
	}
	return b.String()
}

// sectionTable is the first table of a report.md after heading ("" when
// report.md has no such section).
func sectionTable(md, heading string) string {
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n\n")
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(rest, "\n") {
		switch {
		case strings.HasPrefix(l, "|"):
			b.WriteString(l)
		case b.Len() > 0:
			return b.String()
		}
	}
	return b.String()
}

// TestExportMDIsReportTable: -o md is the tables every committed report.md
// carries, byte for byte (the results table, then the per-prompt tables
// under their headings where the edition has them), so the export and the
// report cannot disagree.
func TestExportMDIsReportTable(t *testing.T) {
	for _, name := range committedEditions(t) {
		t.Run(name, func(t *testing.T) {
			md, err := os.ReadFile(filepath.Join("..", "..", "editions", name, editions.ReportMD))
			if err != nil {
				t.Fatal(err)
			}
			want := resultsTable(t, string(md))
			for _, h := range []string{prefillHeading, depthHeading} {
				if tb := sectionTable(string(md), h); tb != "" {
					want += "\n" + h + "\n\n" + tb
				}
			}
			if got := string(export(t, "md", loadConfigs(t, name))); got != want {
				t.Errorf("md export differs from report.md's results table:\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestExportCSV: the csv parses back to report.md's headers and cells.
func TestExportCSV(t *testing.T) {
	docs := loadConfigs(t, "smoke-cpu")
	recs, err := csv.NewReader(bytes.NewReader(export(t, "csv", docs))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := makeTable(resultFields(docs), docs)
	if len(recs) != 1+len(docs) {
		t.Fatalf("%d csv rows, want a header and %d", len(recs), len(docs))
	}
	if !slices.Equal(recs[0], want.Headers) {
		t.Errorf("header %q, want %q", recs[0], want.Headers)
	}
	for i, r := range recs[1:] {
		if !slices.Equal(r, want.Rows[i]) {
			t.Errorf("row %d: %q, want %q", i, r, want.Rows[i])
		}
	}
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestExportFields: every exported field has a Raw value and a snake_case
// key, and no two keys (status keys included) collide.
func TestExportFields(t *testing.T) {
	seen := map[string]string{}
	docs := loadConfigs(t, "smoke-cpu")
	for _, f := range configFields {
		if f.Raw == nil || !snakeCase.MatchString(f.Key) {
			t.Errorf("field %q: key %q, Raw set %v: want a snake_case key and a Raw value", f.Name, f.Key, f.Raw != nil)
			continue
		}
		keys := []string{f.Key}
		if _, ok := f.Raw(&docs[0]).(editions.Obs[float64]); ok {
			keys = append(keys, f.Key+"_status")
		}
		for _, k := range keys {
			if other, dup := seen[k]; dup {
				t.Errorf("key %q of field %q is also field %q's", k, f.Name, other)
			}
			seen[k] = f.Name
		}
	}
}

var cellNumber = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// rawNumbers are the numbers of a Raw value in the order they are
// encoded (struct fields in declaration order).
func rawNumbers(t *testing.T, v any) []json.Number {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out []json.Number
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch x := tok.(type) {
		case json.Number:
			out = append(out, x)
		case string, json.Delim:
		default:
			t.Fatalf("raw %v holds %T %v: want numbers only", v, tok, tok)
		}
	}
}

// TestRawAgreesWithValue: on every committed edition, each field's Raw
// value, rounded as its cell is, is the cell: text is the same text, a
// number rounds to the cell's digits, an observation not made shows its
// status, and a two-number cell shows both numbers in order. So the json
// exports say what report.md says, only unrounded.
func TestRawAgreesWithValue(t *testing.T) {
	for _, name := range committedEditions(t) {
		t.Run(name, func(t *testing.T) {
			docs := loadConfigs(t, name)
			for i := range docs {
				d := &docs[i]
				for _, f := range configFields {
					cell, raw := f.Value(d), f.Raw(d)
					where := d.ID + " " + f.Key
					switch v := raw.(type) {
					case string:
						if v != cell {
							t.Errorf("%s: raw %q, cell %q", where, v, cell)
						}
						continue
					case editions.Obs[float64]:
						if !v.Ok() {
							if v.Status != cell {
								t.Errorf("%s: raw status %q, cell %q", where, v.Status, cell)
							}
							continue
						}
						raw = v.Value
					case int, int64, float64, capacityCell, requestsCell, spreadCell:
					default:
						t.Errorf("%s: raw value of type %T: not one the exports write", where, raw)
						continue
					}
					nums, shown := rawNumbers(t, raw), cellNumber.FindAllString(cell, -1)
					if len(nums) != len(shown) {
						t.Errorf("%s: raw %v has %d numbers, cell %q shows %d", where, raw, len(nums), cell, len(shown))
						continue
					}
					for j, s := range shown {
						x, err := nums[j].Float64()
						if err != nil {
							t.Fatal(err)
						}
						digits := 0
						if _, frac, ok := strings.Cut(s, "."); ok {
							digits = len(frac)
						}
						if got := strconv.FormatFloat(x, 'f', digits, 64); got != s {
							t.Errorf("%s: raw %v rounds to %s, cell %q shows %s", where, raw, got, cell, s)
						}
					}
				}
			}
		})
	}
}

// jsonObjects decodes a json export (an array) or a jsonl export (one
// object a line), numbers kept as json.Number.
func jsonObjects(t *testing.T, format string, b []byte) []map[string]any {
	t.Helper()
	decode := func(b []byte, v any) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s: %v\n%s", format, err, b)
		}
		if dec.More() {
			t.Fatalf("%s: trailing data", format)
		}
	}
	var objs []map[string]any
	if format == "json" {
		decode(b, &objs)
		return objs
	}
	for _, l := range strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n") {
		var o map[string]any
		decode([]byte(l), &o)
		objs = append(objs, o)
	}
	return objs
}

// TestExportJSONNumbers: in json and jsonl, one object per configuration
// with every field's key; numeric fields are JSON numbers that parse, an
// observation is a number with a null status or null with its status
// (never 0), and jsonl's objects are json's.
func TestExportJSONNumbers(t *testing.T) {
	for _, name := range committedEditions(t) {
		t.Run(name, func(t *testing.T) {
			docs := loadConfigs(t, name)
			objs := jsonObjects(t, "json", export(t, "json", docs))
			lines := jsonObjects(t, "jsonl", export(t, "jsonl", docs))
			if len(objs) != len(docs) || len(lines) != len(docs) {
				t.Fatalf("%d json and %d jsonl objects, want %d", len(objs), len(lines), len(docs))
			}
			for i, o := range objs {
				if o["configuration"] != docs[i].ID {
					t.Errorf("object %d is %v, want configuration %s (campaign order)", i, o["configuration"], docs[i].ID)
				}
				if a, b := jsonText(t, o), jsonText(t, lines[i]); a != b {
					t.Errorf("object %d: json %s, jsonl %s", i, a, b)
				}
				for _, f := range configFields {
					v, ok := o[f.Key]
					if !ok {
						t.Errorf("%s: no key %q", docs[i].ID, f.Key)
						continue
					}
					switch raw := f.Raw(&docs[i]).(type) {
					case string:
						if _, isStr := v.(string); !isStr {
							t.Errorf("%s.%s = %v (%T), want a string", docs[i].ID, f.Key, v, v)
						}
					case editions.Obs[float64]:
						status := o[f.Key+"_status"]
						if raw.Ok() {
							if _, err := number(v); err != nil || status != nil {
								t.Errorf("%s.%s = %v, status %v: want a number and a null status", docs[i].ID, f.Key, v, status)
							}
						} else if v != nil || (status != editions.Unknown && status != editions.Unsupported) {
							t.Errorf("%s.%s = %v, status %v: want null and UNKNOWN or UNSUPPORTED", docs[i].ID, f.Key, v, status)
						}
					case capacityCell, requestsCell, spreadCell:
						m, isObj := v.(map[string]any)
						if !isObj || len(m) != 2 {
							t.Errorf("%s.%s = %v, want an object of two numbers", docs[i].ID, f.Key, v)
						}
						for k, x := range m {
							if _, err := number(x); err != nil {
								t.Errorf("%s.%s.%s: %v", docs[i].ID, f.Key, k, err)
							}
						}
					default:
						if _, err := number(v); err != nil {
							t.Errorf("%s.%s: %v", docs[i].ID, f.Key, err)
						}
					}
				}
			}
		})
	}
}

func number(v any) (float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("not a JSON number")
	}
	return n.Float64()
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExportObservations: an observation not made is null beside its
// status in json and jsonl, never 0, and its status in md and csv.
func TestExportObservations(t *testing.T) {
	docs := loadConfigs(t, "smoke-cpu")[:1]
	cases := []struct {
		name       string
		rss        editions.Obs[int64]
		value      any // the decoded rss_peak_mib
		status     any // the decoded rss_peak_mib_status
		csvContain string
	}{
		{"observed", editions.Observed[int64](3 * mib / 2), json.Number("1.5"), nil, ",1.5,"},
		{"unknown", editions.UnknownObs[int64](), nil, editions.Unknown, ",UNKNOWN,"},
		{"unsupported", editions.UnsupportedObs[int64](), nil, editions.Unsupported, ",UNSUPPORTED,"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			docs[0].Metrics.RSSPeakBytes = c.rss
			for _, format := range []string{"json", "jsonl"} {
				o := jsonObjects(t, format, export(t, format, docs))[0]
				if o["rss_peak_mib"] != c.value || o["rss_peak_mib_status"] != c.status {
					t.Errorf("%s: rss_peak_mib %v, status %v; want %v, %v", format, o["rss_peak_mib"], o["rss_peak_mib_status"], c.value, c.status)
				}
			}
			if got := string(export(t, "csv", docs)); !strings.Contains(got, c.csvContain) {
				t.Errorf("csv does not show %q:\n%s", c.csvContain, got)
			}
		})
	}
}

func TestExportUnknownFormat(t *testing.T) {
	for _, format := range []string{"", "xml", "JSON", "markdown"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			err := ExportResults(&b, format, loadConfigs(t, "smoke-cpu"))
			if !errors.Is(err, ErrTableFormat) || b.Len() != 0 {
				t.Fatalf("err %v, %d bytes written; want ErrTableFormat and nothing", err, b.Len())
			}
		})
	}
}
