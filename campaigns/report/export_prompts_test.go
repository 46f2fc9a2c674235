package report

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// promptCells are every (key, cell, raw) of the per-prompt tables of docs,
// from prefillLengthFields and depthFields.
func promptCells(docs []editions.ConfigDoc) [][3]any {
	var out [][3]any
	for i := range docs {
		for _, r := range prefillRows(&docs[i]) {
			for _, f := range prefillLengthFields {
				out = append(out, [3]any{docs[i].ID + " " + r.p.PromptID + " " + f.Key, f.Value(r), f.Raw(r)})
			}
		}
		for _, r := range depthRows(&docs[i]) {
			for _, f := range depthFields {
				out = append(out, [3]any{docs[i].ID + " " + r.dd.PromptID + " " + f.Key, f.Value(r), f.Raw(r)})
			}
		}
	}
	return out
}

// The per-prompt tables' Raw values are their cells, unrounded (as
// TestRawAgreesWithValue holds the results table's), an absent observation
// its status, never 0; and the csv export reads back as the results table
// then each per-prompt table, with their own headers.
func TestExportPromptTables(t *testing.T) {
	for _, tc := range []struct {
		edition string
		tables  int // csv sections after the results table
	}{{"prefill-smoke-cpu", 1}, {"depth-smoke-cpu", 2}, {"smoke-cpu", 0}} {
		t.Run(tc.edition, func(t *testing.T) {
			docs := loadConfigs(t, tc.edition)
			cells := promptCells(docs)
			if tc.tables > 0 && len(cells) == 0 {
				t.Fatal("no per-prompt cells")
			}
			for _, c := range cells {
				where, cell, raw := c[0].(string), c[1].(string), c[2]
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
				case intervalCell:
					if v.Interval == nil {
						if cell != editions.Unknown {
							t.Errorf("%s: no interval, cell %q", where, cell)
						}
						continue
					}
					raw = *v.Interval
				case int, capacityCell:
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
					x, _ := nums[j].Float64()
					digits := 0
					if _, frac, ok := strings.Cut(s, "."); ok {
						digits = len(frac)
					}
					if got := strconv.FormatFloat(x, 'f', digits, 64); got != s {
						t.Errorf("%s: raw %v rounds to %s, cell %q shows %s", where, raw, got, cell, s)
					}
				}
			}

			r := csv.NewReader(bytes.NewReader(export(t, "csv", docs)))
			r.FieldsPerRecord = -1
			recs, err := r.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			headers := 0
			for _, rec := range recs {
				if rec[0] == "configuration" {
					headers++
				}
			}
			if headers != 1+tc.tables {
				t.Errorf("%d header rows in the csv, want %d", headers, 1+tc.tables)
			}
			for _, o := range jsonObjects(t, "json", export(t, "json", docs)) {
				_, pl := o["prefill_lengths"]
				_, dd := o["decode_depths"]
				if pl != (tc.tables >= 1) || dd != (tc.tables == 2) {
					t.Errorf("%v: prefill_lengths %v, decode_depths %v", o["configuration"], pl, dd)
				}
			}
		})
	}
}
