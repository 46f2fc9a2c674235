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
//
// An edition of a contract with declared prompt lengths also has the
// per-prompt tables report.md carries, from their own field lists
// (prefillLengthFields, depthFields), after the results table: md under
// report.md's headings ("## Prefill by prompt length", "## Decode by
// context depth"); csv after an empty line each, with its own header row
// (encoding/csv skips the empty line; read with FieldsPerRecord -1); json
// and jsonl as each configuration's "prefill_lengths" and "decode_depths",
// an array of row objects with the tables' keys, present in every object
// when any configuration has such a table. An edition without them is
// exported exactly as before.

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

// promptTables are the per-prompt tables of docs that have rows, with
// report.md's heading of each.
func promptTables(docs []editions.ConfigDoc) []struct {
	heading string
	table   Table
} {
	var out []struct {
		heading string
		table   Table
	}
	for _, t := range []struct {
		heading string
		table   Table
	}{{prefillHeading, makePrefillTable(docs)}, {depthHeading, makeDepthTable(docs)}} {
		if len(t.table.Rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}

func resultsMD(w io.Writer, docs []editions.ConfigDoc) error {
	var b strings.Builder
	writeMDTable(&b, makeTable(resultFields(docs), docs))
	for _, t := range promptTables(docs) {
		b.WriteString("\n" + t.heading + "\n\n")
		writeMDTable(&b, t.table)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func resultsCSV(w io.Writer, docs []editions.ConfigDoc) error {
	tables := []Table{makeTable(resultFields(docs), docs)}
	for _, t := range promptTables(docs) {
		tables = append(tables, t.table)
	}
	for i, t := range tables {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		cw := csv.NewWriter(w)
		if err := cw.Write(t.Headers); err != nil {
			return err
		}
		if err := cw.WriteAll(t.Rows); err != nil { // WriteAll flushes
			return fmt.Errorf("csv: %w", err)
		}
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
	prefill, depths := hasPromptTables(docs)
	for i := range docs {
		o, err := resultObject(fields, &docs[i], prefill, depths)
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
	prefill, depths := hasPromptTables(docs)
	for i := range docs {
		o, err := resultObject(fields, &docs[i], prefill, depths)
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
// its members in field order, then its per-prompt rows where the edition
// has per-prompt tables (fields decides: every object has the same keys).
func resultObject(fields []field, d *editions.ConfigDoc, prefill, depths bool) ([]byte, error) {
	var ms []jsonMember
	for _, f := range fields {
		ms = append(ms, jsonMember{f.Key, f.Raw(d)})
	}
	if prefill {
		var rows []json.RawMessage
		for _, r := range prefillRows(d) {
			var rm []jsonMember
			for _, f := range prefillLengthFields {
				rm = append(rm, jsonMember{f.Key, f.Raw(r)})
			}
			o, err := jsonObject(rm)
			if err != nil {
				return nil, fmt.Errorf("configuration %s prefill_lengths %s: %w", d.ID, r.p.PromptID, err)
			}
			rows = append(rows, o)
		}
		ms = append(ms, jsonMember{"prefill_lengths", rawArray(rows)})
	}
	if depths {
		var rows []json.RawMessage
		for _, r := range depthRows(d) {
			var rm []jsonMember
			for _, f := range depthFields {
				rm = append(rm, jsonMember{f.Key, f.Raw(r)})
			}
			o, err := jsonObject(rm)
			if err != nil {
				return nil, fmt.Errorf("configuration %s decode_depths %s: %w", d.ID, r.dd.PromptID, err)
			}
			rows = append(rows, o)
		}
		ms = append(ms, jsonMember{"decode_depths", rawArray(rows)})
	}
	o, err := jsonObject(ms)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", d.ID, err)
	}
	return o, nil
}

// rawArray is rows as one JSON array ([] when there are none).
func rawArray(rows []json.RawMessage) json.RawMessage {
	return json.RawMessage("[" + string(bytes.Join(rowsBytes(rows), []byte(","))) + "]")
}

func rowsBytes(rows []json.RawMessage) [][]byte {
	out := make([][]byte, len(rows))
	for i, r := range rows {
		out[i] = r
	}
	return out
}

// jsonMember is one key of an exported object with its Raw value.
type jsonMember struct {
	key string
	raw any
}

// jsonObject writes members as a compact JSON object, in order: an
// observation (editions.Obs[float64]) or an intervalCell as its value and
// <key>_status, exactly one of them null.
func jsonObject(ms []jsonMember) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{")
	member := func(key string, v any) error {
		enc, err := marshalJSON(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
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
	for _, m := range ms {
		var value, status any // nil: null
		switch v := m.raw.(type) {
		case editions.Obs[float64]:
			if v.Ok() {
				value = v.Value
			} else {
				status = v.Status
			}
		case intervalCell:
			if v.Interval != nil {
				value = *v.Interval
			} else {
				status = editions.Unknown
			}
		default:
			if err := member(m.key, v); err != nil {
				return nil, err
			}
			continue
		}
		if err := member(m.key, value); err != nil {
			return nil, err
		}
		if err := member(m.key+"_status", status); err != nil {
			return nil, err
		}
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

// hasPromptTables says which per-prompt tables docs have rows in.
func hasPromptTables(docs []editions.ConfigDoc) (prefill, depths bool) {
	for i := range docs {
		prefill = prefill || len(docs[i].Metrics.PrefillLengths) > 0
		depths = depths || len(docs[i].Metrics.DecodeDepths) > 0
	}
	return prefill, depths
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
