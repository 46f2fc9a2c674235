package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/fidelity"
)

// FidelityInput is what WriteFidelityEdition needs.
type FidelityInput struct {
	CampaignDoc editions.CampaignDoc
	ContractDoc editions.ContractDoc
	// Shards are each pair's records in shard order, by the pair's
	// (treatment's) id; RunDir holds their files (copied byte for byte).
	Shards map[string][]*editions.FidelityShard
	RunDir string
	Now    func() time.Time
	// Republish: as EditionInput's.
	Republish *Republish
}

// FidelityPlotFile is the divergence-by-position figure.
const FidelityPlotFile = "plots/fidelity_kl_by_position.png"

// FidelityPairIDs are a fidelity campaign's pair ids (its treatment
// configurations', expert_format int4) in campaign order.
func FidelityPairIDs(c *Campaign, k *contracts.Fidelity) []string {
	var ids []string
	for _, cfg := range c.Configurations {
		if cfg.ExpertFormat == k.Arms.Treatment {
			ids = append(ids, cfg.ID)
		}
	}
	return ids
}

// WriteFidelityEdition writes a complete fidelity edition into dir.
func WriteFidelityEdition(dir string, in FidelityInput) error {
	c, err := CampaignFromDoc(in.CampaignDoc)
	if err != nil {
		return err
	}
	k, err := contracts.FidelityFromJSON(in.ContractDoc.Contract)
	if err != nil {
		return fmt.Errorf("frozen contract: %w", err)
	}
	ins, err := fidelity.Inputs(k)
	if err != nil {
		return err
	}
	var pairs []editions.FidelityPair
	for _, id := range FidelityPairIDs(c, k) {
		shards := in.Shards[id]
		for i := range shards {
			rel := editions.FidelityShardPath(id, i+1)
			b, err := os.ReadFile(filepath.Join(in.RunDir, filepath.FromSlash(rel)))
			if err != nil {
				return err
			}
			if err := editions.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(rel)), b); err != nil {
				return err
			}
		}
		d, err := fidelity.Aggregate(k, ins, id, shards)
		if err != nil {
			return err
		}
		if err := editions.WriteDoc(filepath.Join(dir, filepath.FromSlash(editions.FidelityPairPath(id))), &d); err != nil {
			return err
		}
		pairs = append(pairs, d)
	}
	for name, doc := range map[string]any{editions.CampaignFile: in.CampaignDoc, editions.ContractFile: in.ContractDoc} {
		if err := editions.WriteDoc(filepath.Join(dir, name), doc); err != nil {
			return err
		}
	}
	claims := fidelity.ClaimsOf(c.Edition, c.Evidence, c.Publication, pairs)
	if err := editions.WriteDoc(filepath.Join(dir, editions.ClaimsFile), &claims); err != nil {
		return err
	}
	png, err := FidelityPlot(in.Shards, FidelityPairIDs(c, k))
	if err != nil {
		return err
	}
	if err := editions.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(FidelityPlotFile)), png); err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Campaign, *contracts.Fidelity, string, []editions.FidelityPair) error
	}{{editions.ReportMD, FidelityMarkdown}, {editions.ReportHTML, FidelityHTML}} {
		var b bytes.Buffer
		if err := f.write(&b, c, k, in.ContractDoc.SHA256, pairs); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if err := editions.WriteFileAtomic(filepath.Join(dir, f.name), b.Bytes()); err != nil {
			return err
		}
	}
	return writeManifestAs(dir, c.Edition, in.Now, in.Republish)
}

// FidelitySyntheticWarning is the first thing both reports say of an
// edition on synthetic checkpoints.
const FidelitySyntheticWarning = "The checkpoints are synthetic: deterministic random weights with a real model's shapes. Their responses are meaningless text, and whatever instructions they satisfy they satisfy by chance, so the paired structural outcomes (passes, regressions, improvements, McNemar p) are meaningless. The per-token divergence still measures how far INT4 b256 experts move the next-token distribution on these shapes."

// fidelityField is one column of the reports' pair table: both formats
// render the same list.
type fidelityField struct {
	Header string
	Value  func(editions.FidelityPair) string
}

func statCI(s editions.FidelityStat, prec int) string {
	return fmt.Sprintf("%.*g [%.*g, %.*g]", prec, s.Value, prec, s.CI.Lo, prec, s.CI.Hi)
}

// FidelityPValue renders a McNemar p-value, UNKNOWN without discordant
// pairs.
func FidelityPValue(p *float64) string {
	if p == nil {
		return "UNKNOWN"
	}
	return fmt.Sprintf("%.4g", *p)
}

func countsCell(n editions.FidelityCounts) string {
	return fmt.Sprintf("%d / %d / %d / %d", n.BothPass, n.BothFail, n.Regression, n.Improvement)
}

// FidelityFields is the pair table's field list.
var FidelityFields = []fidelityField{
	{"pair (treatment)", func(d editions.FidelityPair) string { return d.ID }},
	{"reference", func(d editions.FidelityPair) string { return d.Reference }},
	{"checkpoint", func(d editions.FidelityPair) string { return checkpointLabel(d.Checkpoint) }},
	{"prompts: both pass / both fail / regression / improvement (strict)", func(d editions.FidelityPair) string { return countsCell(d.Strict.Prompts) }},
	{"identical text", func(d editions.FidelityPair) string {
		return fmt.Sprintf("%d/%d", d.Strict.Prompts.Identical, d.Strict.Prompts.Total)
	}},
	{"McNemar p (strict)", func(d editions.FidelityPair) string { return FidelityPValue(d.Strict.McNemarP) }},
	{"prompts (loose)", func(d editions.FidelityPair) string { return countsCell(d.Loose.Prompts) }},
	{"McNemar p (loose)", func(d editions.FidelityPair) string { return FidelityPValue(d.Loose.McNemarP) }},
	{"instructions (strict)", func(d editions.FidelityPair) string { return countsCell(d.Strict.Instructions) }},
	{"instructions (loose)", func(d editions.FidelityPair) string { return countsCell(d.Loose.Instructions) }},
	{"positions", func(d editions.FidelityPair) string { return fmt.Sprint(d.Positions) }},
	{"KL median [95% CI]", func(d editions.FidelityPair) string { return statCI(d.KL.Median, 3) }},
	{"KL p90", func(d editions.FidelityPair) string { return statCI(d.KL.P90, 3) }},
	{"KL max", func(d editions.FidelityPair) string { return statCI(d.KL.Max, 3) }},
	{"top-1 agreement", func(d editions.FidelityPair) string { return statCI(d.Top1.Value, 3) }},
	{"max abs logit diff median / p90 / max", func(d editions.FidelityPair) string {
		return fmt.Sprintf("%.3g / %.3g / %.3g", d.MaxAbsLogitDiff.Median.Value, d.MaxAbsLogitDiff.P90.Value, d.MaxAbsLogitDiff.Max.Value)
	}},
	{"diverged (free-running)", func(d editions.FidelityPair) string {
		return fmt.Sprintf("%d/%d", d.Diverged, d.Strict.Prompts.Total)
	}},
	{"first divergence median [95% CI]", func(d editions.FidelityPair) string {
		if d.FirstDivergence == nil {
			return "UNKNOWN"
		}
		return statCI(d.FirstDivergence.Median, 3)
	}}, {"workers' wall clock, summed (s)", func(d editions.FidelityPair) string { return fmt.Sprintf("%.1f", d.WallSeconds) }},
}

// fidelityPromptFields is the per-prompt table's field list.
var fidelityPromptFields = []struct {
	Header string
	Value  func(editions.FidelityPromptRow) string
}{
	{"key", func(r editions.FidelityPromptRow) string { return fmt.Sprint(r.Key) }},
	{"strict", func(r editions.FidelityPromptRow) string { return r.Strict }},
	{"loose", func(r editions.FidelityPromptRow) string { return r.Loose }},
	{"identical", func(r editions.FidelityPromptRow) string { return fmt.Sprint(r.Identical) }},
	{"first divergence", func(r editions.FidelityPromptRow) string {
		if r.FirstDivergence == nil {
			return "none"
		}
		return fmt.Sprint(*r.FirstDivergence)
	}},
	{"positions", func(r editions.FidelityPromptRow) string { return fmt.Sprint(r.Positions) }},
	{"KL median / p90 / max", func(r editions.FidelityPromptRow) string {
		return fmt.Sprintf("%.3g / %.3g / %.3g", r.KL.Median.Value, r.KL.P90.Value, r.KL.Max.Value)
	}},
	{"top-1 agreement", func(r editions.FidelityPromptRow) string { return fmt.Sprintf("%.3g", r.Top1.Value.Value) }},
	{"max abs logit diff", func(r editions.FidelityPromptRow) string { return fmt.Sprintf("%.3g", r.MaxAbsLogitDiff.Max.Value) }},
}

// fidelityReport is what both reports show.
type fidelityReport struct {
	Edition, Description, Contract, ContractSHA, Rules, Device string
	Synthetic                                                  bool
	Warning                                                    string
	Headers                                                    []string
	Rows                                                       [][]string
	Pairs                                                      []fidelityPairTable
	Plot                                                       string
	Bootstrap                                                  editions.FidelityBootstrap
	TopK                                                       int
}

type fidelityPairTable struct {
	ID      string
	Headers []string
	Rows    [][]string
}

func buildFidelityReport(c *Campaign, k *contracts.Fidelity, sha string, pairs []editions.FidelityPair) fidelityReport {
	r := fidelityReport{Edition: c.Edition, Description: strings.TrimSpace(c.Description), Contract: k.ID, ContractSHA: sha, Rules: k.Scorer,
		Device: c.Device, Warning: FidelitySyntheticWarning, Plot: FidelityPlotFile, Bootstrap: editions.FidelityBootstrap(k.Bootstrap), TopK: k.TopK}
	for _, f := range FidelityFields {
		r.Headers = append(r.Headers, f.Header)
	}
	for _, d := range pairs {
		if d.Checkpoint.Kind == "synthetic" {
			r.Synthetic = true
		}
		var row []string
		for _, f := range FidelityFields {
			row = append(row, f.Value(d))
		}
		r.Rows = append(r.Rows, row)
		t := fidelityPairTable{ID: d.ID}
		for _, f := range fidelityPromptFields {
			t.Headers = append(t.Headers, f.Header)
		}
		for _, p := range d.Prompts {
			var row []string
			for _, f := range fidelityPromptFields {
				row = append(row, f.Value(p))
			}
			t.Rows = append(t.Rows, row)
		}
		r.Pairs = append(r.Pairs, t)
	}
	return r
}

// FidelityMarkdown writes report.md of a fidelity edition: the synthetic
// warning first, then the pair table (one row per field, one column per
// pair), then each pair's prompts.
func FidelityMarkdown(w io.Writer, c *Campaign, k *contracts.Fidelity, sha string, pairs []editions.FidelityPair) error {
	r := buildFidelityReport(c, k, sha, pairs)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# %s\n\n", r.Edition)
	if r.Synthetic {
		p("**Read this first.** %s\n\n", r.Warning)
	}
	p("%s\n\nContract %s (sha256 %s), scorer rules %s, device %s. Reference arm: routed experts in FP16; treatment arm: INT4 b256 (W4A16); everything else equal. Teacher-forced: the reference's tokens are fed to the treatment arm, and each position keeps KL(reference || treatment), top-1 agreement, max |logit difference| and the reference's top %d ids with both arms' logits. Intervals: %d-resample percentile bootstrap at %g, seed %d (pooled: prompts resampled; per prompt: positions). `horizon-verify` re-scores every response and recomputes every number below; the per-position KL and max |logit difference| themselves it can only check against the stored top-%d (a lower bound each), since the full distributions are not kept.\n\n",
		r.Description, r.Contract, r.ContractSHA, r.Rules, r.Device, r.TopK, r.Bootstrap.Resamples, r.Bootstrap.Level, r.Bootstrap.Seed, r.TopK)
	p("| |")
	for _, t := range r.Pairs {
		p(" %s |", t.ID)
	}
	p("\n| --- |%s\n", strings.Repeat(" ---: |", len(r.Pairs)))
	for i, h := range r.Headers {
		p("| %s |", h)
		for _, row := range r.Rows {
			p(" %s |", row[i])
		}
		p("\n")
	}
	p("\n![KL(reference || INT4) by position](%s)\n", r.Plot)
	for _, t := range r.Pairs {
		p("\n## %s, per prompt\n\n| %s |\n|%s\n", t.ID, strings.Join(t.Headers, " | "), strings.Repeat(" --- |", len(t.Headers)))
		for _, row := range t.Rows {
			p("| %s |\n", strings.Join(row, " | "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var fidelityHTML = template.Must(template.New("fidelity").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Edition}}</title>
<style>body{font-family:sans-serif;max-width:80em;margin:2em auto;padding:0 1em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em}td.n{text-align:right}.warn{background:#fff3cd;padding:.8em;border:1px solid #e0c36b}</style>
</head><body>
<h1>{{.Edition}}</h1>
{{if .Synthetic}}<p class="warn"><strong>Read this first.</strong> {{.Warning}}</p>{{end}}
<p>{{.Description}}</p>
<p>Contract {{.Contract}} (sha256 <code>{{.ContractSHA}}</code>), scorer rules {{.Rules}}, device {{.Device}}. Reference arm: routed experts in FP16; treatment arm: INT4 b256 (W4A16). Teacher-forced positions keep KL(reference || treatment), top-1 agreement, max |logit difference| and the reference's top {{.TopK}} ids with both arms' logits. Intervals: {{.Bootstrap.Resamples}}-resample percentile bootstrap at {{.Bootstrap.Level}}, seed {{.Bootstrap.Seed}}. <code>horizon-verify</code> recomputes every number; the per-position KL and max |logit difference| it checks against the stored top-{{.TopK}} only.</p>
<table>{{range $i, $h := .Headers}}<tr><th>{{$h}}</th>{{range $.Rows}}<td class="n">{{index . $i}}</td>{{end}}</tr>
{{end}}</table>
<p><img src="{{.Plot}}" alt="KL(reference || INT4) by position"></p>
{{range .Pairs}}<h2>{{.ID}}, per prompt</h2>
<table><tr>{{range .Headers}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}</body></html>
`))

// FidelityHTML writes report.html of a fidelity edition.
func FidelityHTML(w io.Writer, c *Campaign, k *contracts.Fidelity, sha string, pairs []editions.FidelityPair) error {
	return fidelityHTML.Execute(w, buildFidelityReport(c, k, sha, pairs))
}

// FidelityPlot draws, for each pair, the median over prompts of the
// teacher-forced KL at each position (the prompts long enough to reach
// it), against the position.
func FidelityPlot(shards map[string][]*editions.FidelityShard, ids []string) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "KL(reference || INT4) by position, median over prompts"
	p.X.Label.Text = "position (generated token index)"
	p.Y.Label.Text = "KL (nats)"
	for i, id := range ids {
		var byPos [][]float64
		for _, s := range shards[id] {
			for _, f := range s.Forced {
				for _, q := range f.Positions {
					for len(byPos) <= q.Index {
						byPos = append(byPos, nil)
					}
					byPos[q.Index] = append(byPos[q.Index], q.KL)
				}
			}
		}
		pts := make(plotter.XYs, 0, len(byPos))
		for x, v := range byPos {
			if len(v) == 0 {
				continue
			}
			slices.Sort(v)
			pts = append(pts, plotter.XY{X: float64(x), Y: stat.Quantile(0.5, stat.Empirical, v, nil)})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("pair %s: %w", id, err)
		}
		line.Color = plotutil.Color(i)
		p.Add(line)
		p.Legend.Add(id, line)
	}
	p.Legend.Top = true
	wt, err := p.WriterTo(9*vg.Inch, 5*vg.Inch, "png")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
