package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// The results table of an edition, exported (horizon-bench report): the
// one field list that report.md and report.html render (resultFields),
// written in one more format each, never a second list.
//
//	md     the table exactly as report.md carries it (writeMDTable)
//	csv    the same headers (with units) and cells, RFC 4180
//	json   an array of objects, one per configuration: each field's Key
//	       with its Raw value, so numbers are JSON numbers, unrounded, in
//	       the field's unit; an observation field adds <Key>_status
//	jsonl  the same objects, one per line
//
// An observation that was not made is never written as 0: its value is
// null and <Key>_status says UNKNOWN or UNSUPPORTED. When it was made,
// the value is the number and the status null, so exactly one of the two
// is null and every object has the same keys.

// TableFormats are the formats ExportResults writes, md (the default)
// first.
var TableFormats = []string{"md", "csv", "json", "jsonl"}

// ErrTableFormat is returned (wrapped) for a format not in TableFormats.
var ErrTableFormat = errors.New("unknown table format")

// tableWriter writes the results table of configurations (in campaign
// order) in one format.
type tableWriter func(w io.Writer, docs []editions.ConfigDoc) error

var tableWriters = map[string]tableWriter{
	"md":    resultsMD,
	"csv":   resultsCSV,
	"json":  resultsJSON,
	"jsonl": resultsJSONL,
}

// ExportResults writes the results table of docs, the edition's
// configuration documents in campaign order (report.md's row order), in
// format, one of TableFormats.
func ExportResults(w io.Writer, format string, docs []editions.ConfigDoc) error {
	write, ok := tableWriters[format]
	if !ok {
		return fmt.Errorf("%w %q: want one of %s", ErrTableFormat, format, strings.Join(TableFormats, ", "))
	}
	return write(w, docs)
}

func resultsMD(w io.Writer, docs []editions.ConfigDoc) error {
	var b strings.Builder
	writeMDTable(&b, makeTable(resultFields(docs), docs))
	_, err := io.WriteString(w, b.String())
	return err
}

func resultsCSV(w io.Writer, docs []editions.ConfigDoc) error {
	t := makeTable(resultFields(docs), docs)
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Headers); err != nil {
		return err
	}
	if err := cw.WriteAll(t.Rows); err != nil { // WriteAll flushes
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// resultsJSON writes a JSON array, one configuration's object per line.
func resultsJSON(w io.Writer, docs []editions.ConfigDoc) error {
	if len(docs) == 0 {
		_, err := io.WriteString(w, "[]\n")
		return err
	}
	var b bytes.Buffer
	b.WriteString("[\n")
	fields := resultFields(docs)
	for i := range docs {
		o, err := resultObject(fields, &docs[i])
		if err != nil {
			return err
		}
		b.WriteString("  ")
		b.Write(o)
		if i < len(docs)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := w.Write(b.Bytes())
	return err
}

// resultsJSONL writes JSON Lines: one configuration's object per line.
func resultsJSONL(w io.Writer, docs []editions.ConfigDoc) error {
	var b bytes.Buffer
	fields := resultFields(docs)
	for i := range docs {
		o, err := resultObject(fields, &docs[i])
		if err != nil {
			return err
		}
		b.Write(o)
		b.WriteString("\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// resultObject is one configuration as a compact JSON object (one line),
// its members in field order.
func resultObject(fields []field, d *editions.ConfigDoc) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{")
	member := func(key string, v any) error {
		enc, err := marshalJSON(v)
		if err != nil {
			return fmt.Errorf("configuration %s: %s: %w", d.ID, key, err)
		}
		if b.Len() > 1 {
			b.WriteString(",")
		}
		k, _ := marshalJSON(key)
		b.Write(k)
		b.WriteString(":")
		b.Write(enc)
		return nil
	}
	for _, f := range fields {
		v := f.Raw(d)
		o, isObs := v.(editions.Obs[float64])
		if !isObs {
			if err := member(f.Key, v); err != nil {
				return nil, err
			}
			continue
		}
		var value, status any // nil: null
		if o.Ok() {
			value = o.Value
		} else {
			status = o.Status
		}
		if err := member(f.Key, value); err != nil {
			return nil, err
		}
		if err := member(f.Key+"_status", status); err != nil {
			return nil, err
		}
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

// marshalJSON is json.Marshal without HTML escaping, on one line: a
// checkpoint label reads the same in every format.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
