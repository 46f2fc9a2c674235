package report

import (
	"fmt"
	"slices"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// field is one column of the results table. This one list drives every
// report format (report.md and report.html) and every export of the table
// (export.go: md, csv, json, jsonl), llama-bench style, so the formats
// cannot disagree on what is shown or how it is rounded.
type field struct {
	Name  string // header
	Unit  string // "" when the value has none
	Right bool   // numbers align right
	Value func(d *editions.ConfigDoc) string
	// Key names the column in the JSON exports: snake_case, its unit as a
	// suffix. Headers may be reworded; keys are what scripts read, so they
	// stay as they are.
	Key string
	// Raw is the cell as data, for the JSON exports: what Value formats,
	// in Unit, unrounded. It is a string (text), an int or int64 or a
	// float64 (a number), an editions.Obs[float64] (a number, or the
	// status of an observation that was not made), or a small struct of
	// numbers with JSON tags, for a cell that shows two (a range, a part
	// of a total), in the order the cell shows them.
	// TestRawAgreesWithValue holds Value to Raw, rounded, on every
	// committed edition. The lists that are not exported
	// (invariantFields) leave Key and Raw unset.
	Raw func(d *editions.ConfigDoc) any
}

// Header is the column header with its unit.
func (f field) Header() string {
	if f.Unit == "" {
		return f.Name
	}
	return f.Name + " (" + f.Unit + ")"
}

const (
	mib = 1 << 20
	gib = 1 << 30
)

// obsString formats an observation divided by scale, or its status.
func obsString(o editions.Obs[int64], scale float64, decimals int) string {
	if !o.Ok() {
		return o.Status
	}
	return fmt.Sprintf("%.*f", decimals, float64(o.Value)/scale)
}

// obsScaled is an observation divided by scale, or its status: obsString's
// value as data.
func obsScaled(o editions.Obs[int64], scale float64) editions.Obs[float64] {
	if !o.Ok() {
		return editions.Obs[float64]{Status: o.Status}
	}
	return editions.Observed(float64(o.Value) / scale)
}

// obsFloat formats an observation times scale, or its status.
func obsFloat(o editions.Obs[float64], scale float64, decimals int) string {
	if !o.Ok() {
		return o.Status
	}
	return fmt.Sprintf("%.*f", decimals, o.Value*scale)
}

// spreadCell is the block spread cell as data.
type spreadCell struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// capacityCell is the capacity cell as data: resident experts per layer
// of the layer's experts.
type capacityCell struct {
	Resident int `json:"resident"`
	Experts  int `json:"experts"`
}

// requestsCell is the requests cell as data: measured requests in all, and
// the blocks they ran in.
type requestsCell struct {
	Measured int `json:"measured"`
	Blocks   int `json:"blocks"`
}

var configFields = []field{
	{Name: "configuration", Key: "configuration",
		Value: func(d *editions.ConfigDoc) string { return d.ID },
		Raw:   func(d *editions.ConfigDoc) any { return d.ID }},
	{Name: "checkpoint", Key: "checkpoint",
		Value: func(d *editions.ConfigDoc) string { return editions.CheckpointLabel(d.Checkpoint) },
		Raw:   func(d *editions.ConfigDoc) any { return editions.CheckpointLabel(d.Checkpoint) }},
	{Name: "executor", Key: "executor", Value: executorLabel,
		Raw: func(d *editions.ConfigDoc) any { return executorLabel(d) }},
	{Name: "capacity", Unit: "experts/layer", Right: true, Key: "capacity", Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%d/%d", d.Capacity, d.ExpertsPerLayer)
	}, Raw: func(d *editions.ConfigDoc) any { return capacityCell{d.Capacity, d.ExpertsPerLayer} }},
	{Name: "regime", Key: "regime",
		Value: func(d *editions.ConfigDoc) string { return d.Regime },
		Raw:   func(d *editions.ConfigDoc) any { return d.Regime }},
	{Name: "pooled decode", Unit: "tok/s", Right: true, Key: "pooled_decode_tok_s", Value: func(d *editions.ConfigDoc) string {
		return obsFloat(d.Metrics.PooledDecodeTokS, 1, 2)
	}, Raw: func(d *editions.ConfigDoc) any { return d.Metrics.PooledDecodeTokS }},
	{Name: "block spread", Unit: "tok/s", Right: true, Key: "block_spread_tok_s", Value: func(d *editions.ConfigDoc) string {
		sp := d.Metrics.BlockSpread
		if !sp.Min.Ok() || !sp.Max.Ok() {
			return editions.Unknown
		}
		return fmt.Sprintf("%.2f-%.2f", sp.Min.Value, sp.Max.Value)
	}, Raw: func(d *editions.ConfigDoc) any {
		// A range cell as data: two numbers, or the status of the spread
		// that was not observed (one output token: no decode interval).
		sp := d.Metrics.BlockSpread
		if !sp.Min.Ok() || !sp.Max.Ok() {
			return editions.UnknownObs[float64]()
		}
		return spreadCell{sp.Min.Value, sp.Max.Value}
	}},
	{Name: "overall output", Unit: "tok/s", Right: true, Key: "overall_output_tok_s", Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.2f", d.Metrics.OverallOutputTokS)
	}, Raw: func(d *editions.ConfigDoc) any { return d.Metrics.OverallOutputTokS }},
	{Name: "TTFT mean", Unit: "ms", Right: true, Key: "ttft_mean_ms", Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.1f", d.Metrics.TTFTMeanS*1e3)
	}, Raw: func(d *editions.ConfigDoc) any { return d.Metrics.TTFTMeanS * 1e3 }},
	{Name: "response mean", Unit: "s", Right: true, Key: "response_mean_s", Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.3f", d.Metrics.ResponseMeanS)
	}, Raw: func(d *editions.ConfigDoc) any { return d.Metrics.ResponseMeanS }},
	{Name: "H2D", Unit: "MiB", Right: true, Key: "h2d_mib", Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.1f", float64(d.Metrics.H2DBytes)/mib)
	}, Raw: func(d *editions.ConfigDoc) any { return float64(d.Metrics.H2DBytes) / mib }},
	{Name: "misses", Right: true, Key: "misses",
		Value: func(d *editions.ConfigDoc) string { return fmt.Sprint(d.Metrics.Misses) },
		Raw:   func(d *editions.ConfigDoc) any { return d.Metrics.Misses }},
	{Name: "RSS peak", Unit: "MiB", Right: true, Key: "rss_peak_mib", Value: func(d *editions.ConfigDoc) string {
		return obsString(d.Metrics.RSSPeakBytes, mib, 1)
	}, Raw: func(d *editions.ConfigDoc) any { return obsScaled(d.Metrics.RSSPeakBytes, mib) }},
	{Name: "VRAM peak", Unit: "GiB", Right: true, Key: "vram_peak_gib", Value: func(d *editions.ConfigDoc) string {
		return obsString(d.Metrics.VRAMPeakBytes, gib, 2)
	}, Raw: func(d *editions.ConfigDoc) any { return obsScaled(d.Metrics.VRAMPeakBytes, gib) }},
	{Name: "requests", Right: true, Key: "requests", Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%d (%d blocks)", d.Requests, d.Blocks)
	}, Raw: func(d *editions.ConfigDoc) any { return requestsCell{d.Requests, d.Blocks} }},
}

// intervalField is a bootstrap interval column: the interval of a
// configuration's uncertainty, "lo-hi" in the column's unit, rounded as the
// point value's column is.
func intervalField(name, unit, key string, scale float64, decimals int, iv func(u *editions.Uncertainty) editions.Interval) field {
	return field{Name: name, Unit: unit, Right: true, Key: key, Value: func(d *editions.ConfigDoc) string {
		x := iv(d.Uncertainty)
		return fmt.Sprintf("%.*f-%.*f", decimals, x.Lo*scale, decimals, x.Hi*scale)
	}, Raw: func(d *editions.ConfigDoc) any {
		x := iv(d.Uncertainty)
		return editions.Interval{Lo: x.Lo * scale, Hi: x.Hi * scale}
	}}
}

// uncertaintyFields are the bootstrap-v1 interval columns, each shown
// right after the column of its point value (after).
var uncertaintyFields = []struct {
	after string
	field
}{
	{"pooled_decode_tok_s", intervalField("pooled decode 95% CI", "tok/s", "pooled_decode_ci95_tok_s", 1, 2,
		func(u *editions.Uncertainty) editions.Interval { return u.PooledDecodeTokS })},
	{"ttft_mean_ms", intervalField("TTFT mean 95% CI", "ms", "ttft_mean_ci95_ms", 1e3, 1,
		func(u *editions.Uncertainty) editions.Interval { return u.TTFTMeanS })},
}

// prefillField is the isolated prefill rate, shown after the TTFT mean
// (and its interval) when every document carries it.
var prefillField = field{Name: "prefill", Unit: "tok/s", Right: true, Key: "prefill_tok_s", Value: func(d *editions.ConfigDoc) string {
	if o := d.Metrics.Prefill.TokS; !o.Ok() {
		return o.Status
	}
	return fmt.Sprintf("%.1f", d.Metrics.Prefill.TokS.Value)
}, Raw: func(d *editions.ConfigDoc) any { return d.Metrics.Prefill.TokS }}

// resultFields are the results table's columns for docs: configFields,
// with the interval columns when every document carries an uncertainty,
// the prefill column when every document carries a prefill rate, and the
// policy column when the documents ran more than one eviction policy (a
// PERF-POLICY-v1 comparison). The KV cache column (after the executor's)
// is shown when every document records artifact.kv_dtype, the expert
// activations column (after it) when some document records
// artifact.expert_activation_dtype, and the dense activations column
// (after that) when some document records artifact.dense_activation_dtype
// (FP16 both; FP32 is left out of records).
// Editions made before bootstrap-v1 (or before prefill_seconds) lack them,
// so their tables (and exports) keep the columns they were published with.
func resultFields(docs []editions.ConfigDoc) []field {
	every := func(has func(d editions.ConfigDoc) bool) bool {
		return len(docs) > 0 && !slices.ContainsFunc(docs, func(d editions.ConfigDoc) bool { return !has(d) })
	}
	intervals := every(func(d editions.ConfigDoc) bool { return d.Uncertainty != nil })
	prefill := every(func(d editions.ConfigDoc) bool { return d.Metrics.Prefill != nil })
	policies := len(docs) > 0 && slices.ContainsFunc(docs, func(d editions.ConfigDoc) bool { return d.Policy != docs[0].Policy })
	kv := every(func(d editions.ConfigDoc) bool { return d.Artifact.KVDType != "" })
	act := slices.ContainsFunc(docs, func(d editions.ConfigDoc) bool { return d.Artifact.ExpertActivationDType != "" })
	dense := slices.ContainsFunc(docs, func(d editions.ConfigDoc) bool { return d.Artifact.DenseActivationDType != "" })
	var out []field
	for _, f := range configFields {
		out = append(out, f)
		if kv && f.Key == "executor" {
			out = append(out, kvField)
		}
		if act && f.Key == "executor" {
			out = append(out, expertActField)
		}
		if dense && f.Key == "executor" {
			out = append(out, denseActField)
		}
		if policies && f.Key == "capacity" {
			out = append(out, policyField)
		}
		if intervals {
			for _, u := range uncertaintyFields {
				if u.after == f.Key {
					out = append(out, u.field)
				}
			}
		}
		if prefill && f.Key == "ttft_mean_ms" {
			out = append(out, prefillField)
		}
	}
	return out
}

// kvField is the configuration's KV cache element type, artifact.kv_dtype
// (resultFields: shown where every configuration records it, so editions
// made before the field keep the table they were published with).
var kvField = field{Name: "KV cache", Key: "kv_cache",
	Value: func(d *editions.ConfigDoc) string { return d.Artifact.KVDTypeOf() },
	Raw:   func(d *editions.ConfigDoc) any { return d.Artifact.KVDTypeOf() }}

// expertActField is the dtype the configuration's routed experts took
// their batched-prefill activations in, artifact.expert_activation_dtype
// (absent: FP32). Workers record it only where it is FP16, so resultFields
// shows it where some configuration records it: editions without FP16
// expert activations keep the table they were published with.
var expertActField = field{Name: "expert activations", Key: "expert_activations",
	Value: func(d *editions.ConfigDoc) string { return d.Artifact.ExpertActivationDTypeOf() },
	Raw:   func(d *editions.ConfigDoc) any { return d.Artifact.ExpertActivationDTypeOf() }}

// denseActField is the dtype the configuration's dense projections (q, k,
// v, o; the shared expert's gate, up and down) took their batched-prefill
// activations in, artifact.dense_activation_dtype (absent: FP32). Workers
// record it only where it is FP16, so resultFields shows it where some
// configuration records it: editions without FP16 dense activations keep
// the table they were published with.
var denseActField = field{Name: "dense activations", Key: "dense_activations",
	Value: func(d *editions.ConfigDoc) string { return d.Artifact.DenseActivationDTypeOf() },
	Raw:   func(d *editions.ConfigDoc) any { return d.Artifact.DenseActivationDTypeOf() }}

// policyField is the configuration's eviction policy (resultFields).
var policyField = field{Name: "policy", Key: "policy",
	Value: func(d *editions.ConfigDoc) string { return d.Policy },
	Raw:   func(d *editions.ConfigDoc) any { return d.Policy }}

// speedKeys and resourceKeys split the results columns (by Key) into
// report.html's two tables; a key a table's fields lack is skipped.
var (
	speedKeys = []string{"configuration", "capacity", "policy", "pooled_decode_tok_s", "pooled_decode_ci95_tok_s",
		"block_spread_tok_s", "overall_output_tok_s", "ttft_mean_ms", "ttft_mean_ci95_ms", "prefill_tok_s", "response_mean_s"}
	resourceKeys = []string{"configuration", "checkpoint", "executor", "kv_cache", "expert_activations", "dense_activations", "regime", "h2d_mib", "misses", "rss_peak_mib", "vram_peak_gib", "requests"}
)

// pickFields is the fields of fs whose keys are in keys, in fs's order.
func pickFields(fs []field, keys []string) []field {
	var out []field
	for _, f := range fs {
		if slices.Contains(keys, f.Key) {
			out = append(out, f)
		}
	}
	return out
}

// executorLabel is the executor, with the seed campaign's name for it
// when the configuration reproduces one.
func executorLabel(d *editions.ConfigDoc) string {
	if d.SeedExecutor != "" {
		return fmt.Sprintf("%s (seed: %s)", d.Executor, d.SeedExecutor)
	}
	return d.Executor
}

// invariantFields are the cache contract's required zeros, per
// configuration.
var invariantFields = []field{
	{Name: "configuration", Value: func(d *editions.ConfigDoc) string { return d.ID }},
	{Name: "expert D2H", Unit: "bytes", Right: true, Value: func(d *editions.ConfigDoc) string { return obsString(d.Invariants.D2HExpertBytes, 1, 0) }},
	{Name: "writebacks", Right: true, Value: func(d *editions.ConfigDoc) string { return obsString(d.Invariants.Writebacks, 1, 0) }},
	{Name: "authority writes", Right: true, Value: func(d *editions.ConfigDoc) string { return obsString(d.Invariants.AuthorityWrites, 1, 0) }},
	{Name: "request SHA work", Unit: "bytes", Right: true, Value: func(d *editions.ConfigDoc) string {
		return obsString(d.Invariants.RequestHashBytes, 1, 0)
	}},
	{Name: "request artifact reads", Right: true, Value: func(d *editions.ConfigDoc) string {
		return obsString(d.Invariants.RequestArtifactReads, 1, 0)
	}},
}

// prefillRow is one row of the prefill table: a configuration at one of
// its prompt lengths.
type prefillRow struct {
	d *editions.ConfigDoc
	p *editions.PrefillLength
}

// prefillLengthField is one column of the prefill table (llama-bench's pp
// rows: one per configuration and prompt length), the table report.md and
// report.html both render from this one list.
type prefillLengthField struct {
	Name  string
	Unit  string
	Right bool
	Value func(r prefillRow) string
	// Key and Raw are the column in the JSON exports, as a field's.
	Key string
	Raw func(r prefillRow) any
}

// Header is the column header with its unit.
func (f prefillLengthField) Header() string { return field{Name: f.Name, Unit: f.Unit}.Header() }

var prefillLengthFields = []prefillLengthField{
	{Name: "configuration", Key: "configuration", Value: func(r prefillRow) string { return r.d.ID },
		Raw: func(r prefillRow) any { return r.d.ID }},
	{Name: "capacity", Unit: "experts/layer", Right: true, Key: "capacity", Value: func(r prefillRow) string {
		return fmt.Sprintf("%d/%d", r.d.Capacity, r.d.ExpertsPerLayer)
	}, Raw: func(r prefillRow) any { return capacityCell{r.d.Capacity, r.d.ExpertsPerLayer} }},
	{Name: "prompt", Key: "prompt", Value: func(r prefillRow) string { return r.p.PromptID },
		Raw: func(r prefillRow) any { return r.p.PromptID }},
	{Name: "prompt tokens", Right: true, Key: "prompt_tokens", Value: func(r prefillRow) string { return fmt.Sprint(r.p.PromptTokens) },
		Raw: func(r prefillRow) any { return r.p.PromptTokens }},
	{Name: "prefill mean", Unit: "tok/s", Right: true, Key: "prefill_mean_tok_s", Value: func(r prefillRow) string { return obsFloat(r.p.MeanTokS, 1, 1) },
		Raw: func(r prefillRow) any { return r.p.MeanTokS }},
	{Name: "prefill mean 95% CI", Unit: "tok/s", Right: true, Key: "prefill_mean_ci95_tok_s", Value: func(r prefillRow) string {
		if r.p.Interval == nil {
			return editions.Unknown
		}
		return fmt.Sprintf("%.1f-%.1f", r.p.Interval.Lo, r.p.Interval.Hi)
	}, Raw: func(r prefillRow) any { return prefillIntervalCell(r.p.Interval, 1) }},
	{Name: "prefill median", Unit: "tok/s", Right: true, Key: "prefill_median_tok_s", Value: func(r prefillRow) string { return obsFloat(r.p.MedianTokS, 1, 1) },
		Raw: func(r prefillRow) any { return r.p.MedianTokS }},
	{Name: "requests", Right: true, Key: "requests", Value: func(r prefillRow) string { return fmt.Sprint(r.p.Requests) },
		Raw: func(r prefillRow) any { return r.p.Requests }},
}

// intervalCell is an interval cell as data that may be absent: the
// exports write its bounds, or null with <key>_status UNKNOWN (a
// per-prompt interval is absent where the rates were not observed).
type intervalCell struct {
	Interval *editions.Interval // nil: not observed
}

// prefillIntervalCell is a per-prompt bootstrap interval, times scale.
func prefillIntervalCell(iv *editions.PrefillInterval, scale float64) intervalCell {
	if iv == nil {
		return intervalCell{}
	}
	return intervalCell{&editions.Interval{Lo: iv.Lo * scale, Hi: iv.Hi * scale}}
}

// makePrefillTable is the prefill table of docs: a row per configuration
// and prompt length, in document then contract order; no rows when no
// document has prefill lengths.
func makePrefillTable(docs []editions.ConfigDoc) Table {
	t := Table{}
	for _, f := range prefillLengthFields {
		t.Headers = append(t.Headers, f.Header())
		t.Right = append(t.Right, f.Right)
	}
	for i := range docs {
		for _, r := range prefillRows(&docs[i]) {
			row := make([]string, len(prefillLengthFields))
			for k, f := range prefillLengthFields {
				row[k] = f.Value(r)
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

// depthRow is one row of the depth table: a configuration at one of its
// context depths, with that depth's prefill entry (nil when absent).
type depthRow struct {
	d  *editions.ConfigDoc
	dd *editions.DecodeDepth
	pl *editions.PrefillLength
}

// depthField is one column of the depth table (llama-bench's tg at -d
// rows: one per configuration and depth), the table report.md and
// report.html both render from this one list.
type depthField struct {
	Name  string
	Unit  string
	Right bool
	Value func(r depthRow) string
	// Key and Raw are the column in the JSON exports, as a field's.
	Key string
	Raw func(r depthRow) any
}

// Header is the column header with its unit.
func (f depthField) Header() string { return field{Name: f.Name, Unit: f.Unit}.Header() }

var depthFields = []depthField{
	{Name: "configuration", Key: "configuration", Value: func(r depthRow) string { return r.d.ID },
		Raw: func(r depthRow) any { return r.d.ID }},
	{Name: "capacity", Unit: "experts/layer", Right: true, Key: "capacity", Value: func(r depthRow) string {
		return fmt.Sprintf("%d/%d", r.d.Capacity, r.d.ExpertsPerLayer)
	}, Raw: func(r depthRow) any { return capacityCell{r.d.Capacity, r.d.ExpertsPerLayer} }},
	{Name: "depth", Key: "depth", Value: func(r depthRow) string { return r.dd.PromptID },
		Raw: func(r depthRow) any { return r.dd.PromptID }},
	{Name: "depth tokens", Right: true, Key: "depth_tokens", Value: func(r depthRow) string { return fmt.Sprint(r.dd.DepthTokens) },
		Raw: func(r depthRow) any { return r.dd.DepthTokens }},
	{Name: "pooled decode", Unit: "tok/s", Right: true, Key: "pooled_decode_tok_s", Value: func(r depthRow) string { return obsFloat(r.dd.PooledTokS, 1, 2) },
		Raw: func(r depthRow) any { return r.dd.PooledTokS }},
	{Name: "pooled decode 95% CI", Unit: "tok/s", Right: true, Key: "pooled_decode_ci95_tok_s", Value: func(r depthRow) string {
		if r.dd.Interval == nil {
			return editions.Unknown
		}
		return fmt.Sprintf("%.2f-%.2f", r.dd.Interval.Lo, r.dd.Interval.Hi)
	}, Raw: func(r depthRow) any { return prefillIntervalCell(r.dd.Interval, 1) }},
	{Name: "decode mean", Unit: "tok/s", Right: true, Key: "decode_mean_tok_s", Value: func(r depthRow) string { return obsFloat(r.dd.MeanTokS, 1, 2) },
		Raw: func(r depthRow) any { return r.dd.MeanTokS }},
	{Name: "decode median", Unit: "tok/s", Right: true, Key: "decode_median_tok_s", Value: func(r depthRow) string { return obsFloat(r.dd.MedianTokS, 1, 2) },
		Raw: func(r depthRow) any { return r.dd.MedianTokS }},
	{Name: "TPOT", Unit: "ms", Right: true, Key: "tpot_ms", Value: func(r depthRow) string { return obsFloat(r.dd.TPOTS, 1e3, 3) },
		Raw: func(r depthRow) any { return scaledObs(r.dd.TPOTS, 1e3) }},
	{Name: "prefill mean", Unit: "tok/s", Right: true, Key: "prefill_mean_tok_s", Value: func(r depthRow) string {
		if r.pl == nil {
			return editions.Unknown
		}
		return obsFloat(r.pl.MeanTokS, 1, 1)
	}, Raw: func(r depthRow) any {
		if r.pl == nil {
			return editions.UnknownObs[float64]()
		}
		return r.pl.MeanTokS
	}},
	{Name: "requests", Right: true, Key: "requests", Value: func(r depthRow) string { return fmt.Sprint(r.dd.Requests) },
		Raw: func(r depthRow) any { return r.dd.Requests }},
}

// scaledObs is an observation times scale (obsFloat's value as data).
func scaledObs(o editions.Obs[float64], scale float64) editions.Obs[float64] {
	if !o.Ok() {
		return o
	}
	return editions.Observed(o.Value * scale)
}

// makeDepthTable is the depth table of docs: a row per configuration and
// context depth it ran, in document then contract order, each with the
// depth's prefill rate (the prefill_lengths entry of the same prompt); no
// rows when no document has decode depths.
func makeDepthTable(docs []editions.ConfigDoc) Table {
	t := Table{}
	for _, f := range depthFields {
		t.Headers = append(t.Headers, f.Header())
		t.Right = append(t.Right, f.Right)
	}
	for i := range docs {
		for _, r := range depthRows(&docs[i]) {
			row := make([]string, len(depthFields))
			for k, f := range depthFields {
				row[k] = f.Value(r)
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

// prefillRows are d's rows of the prefill table, in contract order.
func prefillRows(d *editions.ConfigDoc) []prefillRow {
	var out []prefillRow
	for j := range d.Metrics.PrefillLengths {
		out = append(out, prefillRow{d, &d.Metrics.PrefillLengths[j]})
	}
	return out
}

// depthRows are d's rows of the depth table, in contract order, each with
// the depth's prefill entry (the prefill_lengths entry of the same
// prompt).
func depthRows(d *editions.ConfigDoc) []depthRow {
	var out []depthRow
	m := &d.Metrics
	for j := range m.DecodeDepths {
		r := depthRow{d: d, dd: &m.DecodeDepths[j]}
		if k := slices.IndexFunc(m.PrefillLengths, func(pl editions.PrefillLength) bool { return pl.PromptID == r.dd.PromptID }); k >= 0 {
			r.pl = &m.PrefillLengths[k]
		}
		out = append(out, r)
	}
	return out
}

// depthsNotRun are the where-held depths of k some configuration's model
// context could not hold, one phrase each ("olmoe-x: d8064 (8191 positions,
// context 4096)"), in document then contract order.
func depthsNotRun(k *contracts.Contract, docs []editions.ConfigDoc) []string {
	var out []string
	for i := range docs {
		d := &docs[i]
		if d.Metrics.DecodeDepths == nil {
			continue
		}
		ran := k.PromptsFor(d.Model.MaxPositions)
		for _, p := range k.Prompts {
			if !slices.ContainsFunc(ran, func(q contracts.Prompt) bool { return q.ID == p.ID }) {
				out = append(out, fmt.Sprintf("%s: %s (%d positions, context %d)", d.ID, p.ID, k.Positions(p), d.Model.MaxPositions))
			}
		}
	}
	return out
}

// Table is a rendered table: headers and rows of cells.
type Table struct {
	Headers []string
	Right   []bool
	Rows    [][]string
}

func makeTable(fields []field, docs []editions.ConfigDoc) Table {
	t := Table{}
	for _, f := range fields {
		t.Headers = append(t.Headers, f.Header())
		t.Right = append(t.Right, f.Right)
	}
	for i := range docs {
		row := make([]string, len(fields))
		for j, f := range fields {
			row[j] = f.Value(&docs[i])
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
