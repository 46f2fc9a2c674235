package editions

import (
	"fmt"
	"slices"
	"strings"
)

// The headline sentences of an edition's report (report.html's list under
// the title): written by campaigns/report from the configuration documents
// and, on cuda, each configuration's HBM decode ceiling (package ceilings);
// recomputed from the same by the verifier (check derived), so both use
// this one function.

// headlineMiB is the MiB the headlines give H2D bytes in.
const headlineMiB = 1 << 20

// Headlines is one sentence per model (checkpoint), in document order:
// its configurations at the largest capacity measured (the model's
// reference), with their pooled decode rate (and its share of the HBM
// ceiling where hbm has one) and TTFT mean, then the configuration at its
// smallest capacity, with its rate as a ratio of the first and its H2D
// bytes. The tables below have every configuration.
func Headlines(docs []ConfigDoc, hbm map[string]float64) []string {
	var order []string
	byModel := map[string][]*ConfigDoc{}
	for i := range docs {
		label := CheckpointLabel(docs[i].Checkpoint)
		if _, ok := byModel[label]; !ok {
			order = append(order, label)
		}
		byModel[label] = append(byModel[label], &docs[i])
	}
	var out []string
	for _, label := range order {
		ds := slices.Clone(byModel[label])
		slices.SortStableFunc(ds, func(a, b *ConfigDoc) int { return b.Capacity - a.Capacity })
		top := ds[0]
		one := func(d *ConfigDoc) string {
			m := d.Metrics
			var s string
			pd, topPD, longest := m.PooledDecodeTokS, top.Metrics.PooledDecodeTokS, longestPrefill(d)
			switch {
			case pd.Ok():
				s = fmt.Sprintf("%s (%d/%d experts): %.1f tok/s", d.ID, d.Capacity, d.ExpertsPerLayer, pd.Value)
				if ceil, ok := hbm[d.ID]; ok && ceil > 0 {
					s += fmt.Sprintf(", %.0f%% of the HBM ceiling (%.0f tok/s)", 100*pd.Value/ceil, ceil)
				}
				if d.Capacity < top.Capacity && topPD.Ok() && topPD.Value > 0 {
					s += fmt.Sprintf(", %.2fx of %s", pd.Value/topPD.Value, top.ID)
				}
			case longest != nil && longest.MeanTokS.Ok():
				// One output token: the headline is the longest prompt's
				// prefill rate.
				s = fmt.Sprintf("%s (%d/%d experts): prefill %.1f tok/s at %d prompt tokens (mean)", d.ID, d.Capacity, d.ExpertsPerLayer, longest.MeanTokS.Value, longest.PromptTokens)
				if tl := longestPrefill(top); d.Capacity < top.Capacity && tl != nil && tl.MeanTokS.Ok() && tl.MeanTokS.Value > 0 {
					s += fmt.Sprintf(", %.2fx of %s", longest.MeanTokS.Value/tl.MeanTokS.Value, top.ID)
				}
			default:
				s = fmt.Sprintf("%s (%d/%d experts): decode UNKNOWN", d.ID, d.Capacity, d.ExpertsPerLayer)
			}
			s += fmt.Sprintf(", TTFT %.1f ms", m.TTFTMeanS*1e3)
			if d.Capacity < d.ExpertsPerLayer {
				s += fmt.Sprintf(", %.1f MiB H2D", float64(m.H2DBytes)/headlineMiB)
			}
			return s
		}
		var parts []string
		for _, d := range ds {
			if d.Capacity == top.Capacity {
				parts = append(parts, one(d))
			}
		}
		// The first configuration (campaign order) at the smallest capacity.
		low := ds[len(ds)-1]
		for _, d := range byModel[label] {
			if d.Capacity == low.Capacity {
				low = d
				break
			}
		}
		if low.Capacity < top.Capacity {
			parts = append(parts, "at the smallest capacity "+one(low))
		}
		out = append(out, label+": "+strings.Join(parts, "; ")+".")
	}
	return out
}

// longestPrefill is the prefill entry of d's longest prompt, nil when d has
// no prefill lengths.
func longestPrefill(d *ConfigDoc) *PrefillLength {
	var best *PrefillLength
	for i := range d.Metrics.PrefillLengths {
		if pl := &d.Metrics.PrefillLengths[i]; best == nil || pl.PromptTokens > best.PromptTokens {
			best = pl
		}
	}
	return best
}

// CheckpointLabel says what kind of checkpoint a configuration ran:
// "synthetic olmoe-1b-7b seed 924" or "hf <dir>@<revision>".
func CheckpointLabel(k Checkpoint) string {
	if k.Kind == "synthetic" {
		seed := "?"
		if k.Seed != nil {
			seed = fmt.Sprint(*k.Seed)
		}
		return fmt.Sprintf("synthetic %s seed %s", k.Arch, seed)
	}
	if k.Revision != "" {
		return fmt.Sprintf("hf %s %s@%s", k.Arch, k.Dir, k.Revision)
	}
	return fmt.Sprintf("hf %s %s", k.Arch, k.Dir)
}
