package compare

import (
	"strconv"

	"github.com/horizon-runmap/horizon/editions"
)

// field is one column of the comparison. This one list drives every
// output format (md, csv, json), llama-bench style: Name is the csv header
// and the json key, Header the Markdown header, Text the cell of md and
// csv (rounded), JSON the json value (full precision, in the same unit).
type field struct {
	Name   string
	Header string
	Right  bool // numbers align right in md
	Text   func(r *Row) string
	JSON   func(r *Row) any
}

func fixed(v float64, decimals int) string { return strconv.FormatFloat(v, 'f', decimals, 64) }

// obsText is an observation rounded, or its status.
func obsText(o editions.Obs[float64], decimals int) string {
	if !o.Ok() {
		return o.Status
	}
	return fixed(o.Value, decimals)
}

// rangeText is "min..max" rounded, or the range's status.
func rangeText(r Range, decimals int) string {
	if !r.Ok() {
		return r.Status
	}
	return fixed(r.Min, decimals) + ".." + fixed(r.Max, decimals)
}

// rangeJSON is {"min": .., "max": ..}, or the range's status.
func rangeJSON(r Range) any {
	if !r.Ok() {
		return r.Status
	}
	return struct {
		Min float64 `json:"min"`
		Max float64 `json:"max"`
	}{r.Min, r.Max}
}

// metricFields are the five columns of one metric: A, B, B/A and each
// edition's block spread. get picks the metric of a row.
func metricFields(name, header, unit string, decimals int, get func(r *Row) *[2]Metric) []field {
	value := func(i int) field {
		side := string(rune('a' + i))
		return field{Name: name + "_" + side, Header: header + " " + string(rune('A'+i)) + " (" + unit + ")", Right: true,
			Text: func(r *Row) string { return obsText(get(r)[i].Value, decimals) },
			JSON: func(r *Row) any { return get(r)[i].Value }}
	}
	spread := func(i int) field {
		side := string(rune('a' + i))
		return field{Name: name + "_blocks_" + side, Header: header + " " + string(rune('A'+i)) + " blocks", Right: true,
			Text: func(r *Row) string { return rangeText(get(r)[i].Blocks, decimals) },
			JSON: func(r *Row) any { return rangeJSON(get(r)[i].Blocks) }}
	}
	ratio := field{Name: name + "_ratio", Header: header + " B/A", Right: true,
		Text: func(r *Row) string { return obsText(Ratio(*get(r)), 3) },
		JSON: func(r *Row) any { return Ratio(*get(r)) }}
	return []field{value(0), value(1), ratio, spread(0), spread(1)}
}

// textField is a column of text.
func textField(name, header string, f func(r *Row) string) field {
	return field{Name: name, Header: header, Text: f, JSON: func(r *Row) any { return f(r) }}
}

// countField is a column of counts.
func countField(name, header string, f func(r *Row) int) field {
	return field{Name: name, Header: header, Right: true,
		Text: func(r *Row) string { return strconv.Itoa(f(r)) }, JSON: func(r *Row) any { return f(r) }}
}

// fields is the one field list of every format.
var fields = func() []field {
	fs := []field{
		textField("config", "configuration", func(r *Row) string { return r.Config }),
		textField("edition_a", "A", func(r *Row) string { return r.A }),
		textField("edition_b", "B", func(r *Row) string { return r.B }),
	}
	fs = append(fs, metricFields("decode_tok_s", "decode", "tok/s", 2, func(r *Row) *[2]Metric { return &r.Decode })...)
	fs = append(fs, textField("decode_verdict", "verdict", func(r *Row) string { return r.Verdict }))
	fs = append(fs, metricFields("ttft_mean_ms", "TTFT mean", "ms", 1, func(r *Row) *[2]Metric { return &r.TTFT })...)
	fs = append(fs, metricFields("vram_peak_gib", "VRAM peak", "GiB", 2, func(r *Row) *[2]Metric { return &r.VRAM })...)
	return append(fs,
		textField("tokens", "tokens", func(r *Row) string { return r.Tokens }),
		countField("tokens_compared", "requests compared", func(r *Row) int { return r.Compared }),
		countField("tokens_differing", "requests differing", func(r *Row) int { return r.Differ }),
	)
}()
