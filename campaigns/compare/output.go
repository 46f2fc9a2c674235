package compare

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Reporter writes one format of a Result. Each format is one small function
// over the one field list.
type Reporter func(w io.Writer, r *Result) error

// Formats are the output formats, by their -o name, the default first.
var Formats = []string{"md", "csv", "json"}

// ReporterFor returns the reporter of a format named in Formats.
func ReporterFor(format string) (Reporter, bool) {
	switch format {
	case "md":
		return Markdown, true
	case "csv":
		return CSV, true
	case "json":
		return JSON, true
	}
	return nil, false
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func editionLine(e EditionInfo) string {
	return fmt.Sprintf("**%s** (%s): contract %s (sha256 %s), %d configurations", e.Name, e.Dir, e.ContractID, e.ContractSHA256, e.Configurations)
}

// Markdown writes the editions, the rule, the differences and the
// unmatched configurations as lines, then the table of rows.
func Markdown(w io.Writer, r *Result) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Edition comparison\n\n")
	p("- baseline A: %s\n", editionLine(r.Editions[0]))
	for _, e := range r.Editions[1:] {
		p("- compared as B: %s\n", editionLine(e))
	}
	p("\n## Build, environment and setup differences\n\n")
	if len(r.Differences) == 0 {
		p("None.\n")
	}
	for _, d := range r.Differences {
		p("- %s\n", d.Line())
	}
	p("\n## Configurations not in every edition\n\n")
	if len(r.Unmatched) == 0 {
		p("None.\n")
	}
	for _, u := range r.Unmatched {
		p("- %s: only in %s\n", u.Config, strings.Join(u.In, ", "))
	}
	p("\n## Results\n\n")
	p("Verdict rule: %s\n\n", r.Rule)
	p("|")
	for _, f := range fields {
		p(" %s |", mdCell(f.Header))
	}
	p("\n|")
	for _, f := range fields {
		if f.Right {
			p(" ---: |")
		} else {
			p(" --- |")
		}
	}
	p("\n")
	for i := range r.Rows {
		p("|")
		for _, f := range fields {
			p(" %s |", mdCell(f.Text(&r.Rows[i])))
		}
		p("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// CSV writes one header row of field names, then one row per
// (configuration, edition pair).
func CSV(w io.Writer, r *Result) error {
	cw := csv.NewWriter(w)
	row := make([]string, len(fields))
	for i, f := range fields {
		row[i] = f.Name
	}
	if err := cw.Write(row); err != nil {
		return err
	}
	for i := range r.Rows {
		for j, f := range fields {
			row[j] = f.Text(&r.Rows[i])
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonRow is a row as a JSON object, its keys in field order.
type jsonRow struct{ r *Row }

func (j jsonRow) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		v, err := json.Marshal(f.JSON(j.r))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// JSON writes one object: the rule, the editions, the differences, the
// unmatched configurations and the rows (keys in field order).
func JSON(w io.Writer, r *Result) error {
	doc := struct {
		Rule        string        `json:"rule"`
		Editions    []EditionInfo `json:"editions"`
		Differences []Difference  `json:"differences"`
		Unmatched   []Unmatched   `json:"unmatched"`
		Rows        []jsonRow     `json:"rows"`
	}{Rule: r.Rule, Editions: r.Editions, Differences: r.Differences, Unmatched: r.Unmatched, Rows: []jsonRow{}}
	for i := range r.Rows {
		doc.Rows = append(doc.Rows, jsonRow{&r.Rows[i]})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
