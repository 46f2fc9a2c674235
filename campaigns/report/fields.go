package report

import (
	"fmt"

	"github.com/horizon-runmap/horizon/editions"
)

// field is one column of the results table. This one list drives every
// report format (report.md and report.html), llama-bench style, so the
// formats cannot disagree on what is shown or how it is rounded.
type field struct {
	Name  string // header
	Unit  string // "" when the value has none
	Right bool   // numbers align right
	Value func(d *editions.ConfigDoc) string
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

var configFields = []field{
	{Name: "configuration", Value: func(d *editions.ConfigDoc) string { return d.ID }},
	{Name: "checkpoint", Value: func(d *editions.ConfigDoc) string { return CheckpointLabel(d.Checkpoint) }},
	{Name: "executor", Value: func(d *editions.ConfigDoc) string {
		if d.SeedExecutor != "" {
			return fmt.Sprintf("%s (seed: %s)", d.Executor, d.SeedExecutor)
		}
		return d.Executor
	}},
	{Name: "capacity", Unit: "experts/layer", Right: true, Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%d/%d", d.Capacity, d.ExpertsPerLayer)
	}},
	{Name: "regime", Value: func(d *editions.ConfigDoc) string { return d.Regime }},
	{Name: "pooled decode", Unit: "tok/s", Right: true, Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.2f", d.Metrics.PooledDecodeTokS)
	}},
	{Name: "block spread", Unit: "tok/s", Right: true, Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.2f-%.2f", d.Metrics.BlockSpread.Min, d.Metrics.BlockSpread.Max)
	}},
	{Name: "overall output", Unit: "tok/s", Right: true, Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.2f", d.Metrics.OverallOutputTokS)
	}},
	{Name: "TTFT mean", Unit: "ms", Right: true, Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.1f", d.Metrics.TTFTMeanS*1e3)
	}},
	{Name: "response mean", Unit: "s", Right: true, Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.3f", d.Metrics.ResponseMeanS)
	}},
	{Name: "H2D", Unit: "MiB", Right: true, Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%.1f", float64(d.Metrics.H2DBytes)/mib)
	}},
	{Name: "misses", Right: true, Value: func(d *editions.ConfigDoc) string { return fmt.Sprint(d.Metrics.Misses) }},
	{Name: "RSS peak", Unit: "MiB", Right: true, Value: func(d *editions.ConfigDoc) string {
		return obsString(d.Metrics.RSSPeakBytes, mib, 1)
	}},
	{Name: "VRAM peak", Unit: "GiB", Right: true, Value: func(d *editions.ConfigDoc) string {
		return obsString(d.Metrics.VRAMPeakBytes, gib, 2)
	}},
	{Name: "requests", Right: true, Value: func(d *editions.ConfigDoc) string {
		return fmt.Sprintf("%d (%d blocks)", d.Requests, d.Blocks)
	}},
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
