package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// Report is what report.md and report.html show; both render this one
// value, so they say the same things.
type Report struct {
	Edition     string
	Description string
	Contract    *contracts.Contract
	ContractSHA string
	Device      string
	Env         editions.Environment
	// Checkpoints says plainly which kind of checkpoint each model was.
	Checkpoints []string
	Caveats     []string
	Results     Table
	// Speed and Resources split the results table's columns in two for
	// report.html (speedKeys, resourceKeys: one field list still), each
	// narrow enough for a 1024 px page.
	Speed, Resources Table
	// Headlines is one sentence per model: its configurations' decode
	// rates (with their share of the HBM ceiling on cuda), TTFT and
	// transfers, largest capacity first.
	Headlines []string
	// Prefill is the isolated prefill rate per configuration and prompt
	// length (prefillLengthFields), under a contract with declared prompt
	// lengths; no rows otherwise.
	Prefill Table
	// Depth is the decode per configuration and context depth
	// (depthFields), under a contract with decode per prompt
	// (PERF-DEPTH-v1); no rows otherwise. DepthsNotRun names the
	// where-held depths a configuration's context could not hold.
	Depth        Table
	DepthsNotRun []string
	Invariants   Table
	Plots        []FigureRef
	Workers      []string
	Claims       int
	// Ceilings is the Markdown of package ceilings' sections (cuda
	// editions): each speed beside its HBM / PCIe ceiling, the partial
	// residency model check and VRAM against the weights held.
	Ceilings string
}

// FigureRef is one figure, or the reason it is absent.
type FigureRef struct {
	Title string
	File  string // plots/<name>.png, "" when absent
	Note  string
}

// buildReport assembles the report of an edition from its campaign, its
// contract (and the contract's hash), its records and aggregates, what its
// routing traces say (nil without traces), its plots and the number of its
// claims.
//
// hbm holds the cuda configurations' HBM decode ceilings (tok/s) by id, for
// the headlines; nil shows none.
func buildReport(c *Campaign, k *contracts.Contract, contractSHA string, records map[string][]*editions.RawRecord,
	docs []editions.ConfigDoc, routing []modelRouting, plots []FigureRef, claims int, hbm map[string]float64) Report {
	fs := resultFields(docs)
	r := Report{
		Edition: c.Edition, Description: strings.TrimSpace(c.Description),
		Contract: k, ContractSHA: contractSHA, Device: c.Device,
		Results: makeTable(fs, docs), Invariants: makeTable(invariantFields, docs),
		Speed: makeTable(pickFields(fs, speedKeys), docs), Resources: makeTable(pickFields(fs, resourceKeys), docs),
		Headlines: editions.Headlines(docs, hbm), Prefill: makePrefillTable(docs),
		Depth: makeDepthTable(docs), DepthsNotRun: depthsNotRun(k, docs),
		Plots: plots, Claims: claims,
	}
	for _, cfg := range c.Configurations {
		if recs := records[cfg.ID]; len(recs) > 0 {
			r.Env = recs[0].Environment
			break
		}
	}
	seen := map[string]bool{}
	synthetic := 0
	for i := range docs {
		d := &docs[i]
		r.Workers = append(r.Workers, d.Workers...)
		label := editions.CheckpointLabel(d.Checkpoint)
		if d.Checkpoint.Kind == "synthetic" {
			synthetic++
		}
		if seen[label] {
			continue
		}
		seen[label] = true
		m := d.Model
		r.Checkpoints = append(r.Checkpoints, fmt.Sprintf("%s: %s, %d layers, hidden %d, %d experts per layer, top-%d, expert FFN %d; checkpoint sha256 %s; artifact %s (%s routed experts, %s scales, %s non-routed, %s activations, %s accumulation, from %s weights)",
			label, m.ModelType, m.Layers, m.Hidden, m.ExpertsPerLayer, m.TopK, m.ExpertFFN, d.Checkpoint.SHA256,
			d.Artifact.SHA256[:12], d.Artifact.ExpertFormat, d.Artifact.ScaleDType, d.Artifact.NonRoutedDType,
			d.Artifact.ActivationDType, d.Artifact.AccumulationDType, d.Artifact.OriginalDType))
	}
	switch {
	case synthetic == len(docs):
		r.Caveats = append(r.Caveats, "Every configuration ran a SYNTHETIC checkpoint: deterministic random weights with the exact tensor shapes of the named architecture, generated from the seed shown. The numbers measure the runtime on those shapes; the generated tokens are not meaningful text and say nothing about model quality.")
	case synthetic > 0:
		r.Caveats = append(r.Caveats, fmt.Sprintf("%d of %d configurations ran SYNTHETIC checkpoints (random weights with real shapes); the others ran Hugging Face checkpoints. The checkpoint column says which is which.", synthetic, len(docs)))
	default:
		r.Caveats = append(r.Caveats, "Every configuration ran a Hugging Face checkpoint; the checkpoint column gives its directory and revision.")
	}
	// Executor changes within one model make capacity steps not
	// residency-only (the seed's c60 -> c64 step).
	execs := map[string][]string{}
	for i := range docs {
		label := editions.CheckpointLabel(docs[i].Checkpoint)
		if !slices.Contains(execs[label], docs[i].Executor) {
			execs[label] = append(execs[label], docs[i].Executor)
		}
	}
	var mixed []string
	for label, ex := range execs {
		if len(ex) > 1 {
			mixed = append(mixed, fmt.Sprintf("%s (%s)", label, strings.Join(ex, ", ")))
		}
	}
	slices.Sort(mixed)
	if len(mixed) > 0 {
		r.Caveats = append(r.Caveats, "The executor changes between capacities of "+strings.Join(mixed, "; ")+": a difference between those configurations is not a residency-only effect.")
	} else {
		r.Caveats = append(r.Caveats, "Within each model the executor is the same at every capacity, so capacity steps compare residency with the executor held fixed.")
	}
	if k.OutputTokens == 1 {
		r.Caveats = append(r.Caveats, "Every request produces one token: there is no decode interval, so pooled decode, block spread and their intervals are UNKNOWN (not 0); TTFT is the prefill plus one selection and read-back.")
	}
	if len(r.Prefill.Rows) > 0 {
		r.Caveats = append(r.Caveats, fmt.Sprintf("The prefill table gives each prompt length's rate (prompt tokens / prefill seconds per request, llama-bench's pp): its mean and median over the measured requests (one per block) and a %s percentile interval of the mean (%d resamples, seed %d). With %d blocks the interval rests on %d requests per length: read it as a spread, not a population estimate.",
			editions.BootstrapV1, editions.BootstrapResamples, editions.BootstrapSeed, k.Blocks, k.Blocks))
	}
	if len(r.Depth.Rows) > 0 {
		r.Caveats = append(r.Caveats, fmt.Sprintf("The depth table gives each context depth's decode (first token to last: the depth's prefill and the first-token wait excluded) over its measured requests (one per block): pooled, the mean and median of the per-request rates, TPOT, and a %s percentile interval of the pooled rate (%d resamples, seed %d); the prefill column is the depth's isolated prefill rate from the prefill table. With %d blocks each interval rests on %d requests: read it as a spread, not a population estimate. The results table's pooled decode pools every depth.",
			editions.BootstrapV1, editions.BootstrapResamples, editions.BootstrapSeed, k.Blocks, k.Blocks))
	}
	r.Caveats = append(r.Caveats,
		"Block spread is the minimum and maximum of the per-block pooled decode rate: a descriptive range, not a confidence interval.",
		"Decode rate excludes the first-token wait; it is not end-to-end latency. H2D is a byte sum over the measured requests, not a rate.",
		fmt.Sprintf("Timing is internal to the worker process (%s); there is no HTTP boundary.", k.Timing.Clock))
	if len(docs) > 0 && !slices.ContainsFunc(docs, func(d editions.ConfigDoc) bool { return d.Uncertainty == nil }) {
		u := docs[0].Uncertainty
		r.Caveats = append(r.Caveats, fmt.Sprintf("The 95%% CIs are %s percentile intervals over the measured requests (%d resamples with replacement, seed %d, "+
			"declared in each configs/<id>.json beside p50/p90/p99 of per-request decode rate and TTFT): they describe request-to-request variation "+
			"within this run, not run-to-run or machine-to-machine variation; horizon-verify recomputes them exactly.", u.Algorithm, u.Resamples, u.Seed))
	}
	// Editions whose records carry routing traces: what the traces say
	// of each model's routing (none otherwise).
	for i := range routing {
		r.Caveats = append(r.Caveats, routing[i].caveat())
	}
	if c.Device == "cpu" {
		r.Caveats = append(r.Caveats, "On the cpu device the expert cache's rows live in host memory: H2D counts copies from the host authority into cache rows, VRAM is UNSUPPORTED, and speed says nothing about a GPU.")
	}
	return r
}

// promptBytes is the length of a prompt's text in bytes.
func promptBytes(p contracts.Prompt) int { return len(p.Text) }
