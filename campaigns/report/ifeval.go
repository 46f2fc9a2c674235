package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/ifeval"
)

// IFEvalInputs returns the contract's population: the embedded official
// input, checked against the contract's hash, cut to its subset and
// checked against its declared prompt and instruction counts.
func IFEvalInputs(k *contracts.IFEval) ([]ifeval.Input, error) {
	if ifeval.OfficialInputSHA256 != k.Input.SHA256 {
		return nil, fmt.Errorf("contract %s pins input sha256 %s; this build embeds %s", k.ID, k.Input.SHA256, ifeval.OfficialInputSHA256)
	}
	all, err := ifeval.OfficialInputs()
	if err != nil {
		return nil, err
	}
	ins := all
	if k.Input.First > 0 {
		if k.Input.First > len(all) {
			return nil, fmt.Errorf("contract %s: input.first %d, the input has %d prompts", k.ID, k.Input.First, len(all))
		}
		ins = all[:k.Input.First]
	}
	n := 0
	for _, in := range ins {
		n += len(in.InstructionIDList)
	}
	if len(ins) != k.Input.Prompts || n != k.Input.Instructions {
		return nil, fmt.Errorf("contract %s declares %d prompts and %d instructions; the input gives %d and %d",
			k.ID, k.Input.Prompts, k.Input.Instructions, len(ins), n)
	}
	return ins, nil
}

// PromptSHA256 is the hex SHA-256 of a prompt's text.
func PromptSHA256(prompt string) string {
	s := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(s[:])
}

// CheckIFEvalShard checks one shard record: its place (configuration id,
// shard number), the contract it names, and that it holds exactly the
// shard's prompts in file order, each with a valid ending.
func CheckIFEvalShard(k *contracts.IFEval, contractSHA string, ins []ifeval.Input, id string, shard int, s *editions.IFEvalShard) error {
	lo, hi := k.ShardRange(shard)
	switch {
	case s.Schema != editions.SchemaIFEvalShard || s.Version != editions.Version:
		return fmt.Errorf("configuration %s shard %d: schema %s version %d, want %s %d", id, shard, s.Schema, s.Version, editions.SchemaIFEvalShard, editions.Version)
	case s.Shard != shard || s.ConfigID != id:
		return fmt.Errorf("configuration %s: shard %d of %s is in the place of shard %d", id, s.Shard, s.ConfigID, shard)
	case s.Contract.ID != k.ID || (contractSHA != "" && s.Contract.SHA256 != contractSHA):
		return fmt.Errorf("configuration %s shard %d: measured under contract %s %.12s, the edition's is %s %.12s", id, shard, s.Contract.ID, s.Contract.SHA256, k.ID, contractSHA)
	case s.Setup.MaxNewTokens != k.MaxNewTokens:
		return fmt.Errorf("configuration %s shard %d: max_new_tokens %d, the contract's is %d", id, shard, s.Setup.MaxNewTokens, k.MaxNewTokens)
	case k.PromptFormat == contracts.FormatRaw && s.Setup.PromptFormat != contracts.FormatRaw:
		return fmt.Errorf("configuration %s shard %d: prompt format %s, the contract prescribes raw", id, shard, s.Setup.PromptFormat)
	case s.Setup.PromptFormat != contracts.FormatRaw && s.Setup.PromptFormat != contracts.FormatChatTemplate:
		return fmt.Errorf("configuration %s shard %d: prompt format %q", id, shard, s.Setup.PromptFormat)
	case (s.Setup.PromptFormat == contracts.FormatChatTemplate) != (s.Setup.ChatTemplateSHA256 != ""):
		return fmt.Errorf("configuration %s shard %d: prompt format %s with chat template sha256 %q", id, shard, s.Setup.PromptFormat, s.Setup.ChatTemplateSHA256)
	case len(s.Responses) != hi-lo:
		return fmt.Errorf("configuration %s shard %d: %d responses, the shard holds prompts %d..%d", id, shard, len(s.Responses), lo, hi-1)
	case len(s.Setup.Model.EOSTokenIDs) == 0:
		return fmt.Errorf("configuration %s shard %d: the record lists no EOS ids", id, shard)
	}
	for j, r := range s.Responses {
		in := ins[lo+j]
		if r.Key != in.Key || r.PromptSHA256 != PromptSHA256(in.Prompt) {
			return fmt.Errorf("configuration %s shard %d response %d: key %d (prompt sha256 %.12s), want key %d", id, shard, j, r.Key, r.PromptSHA256, in.Key)
		}
		if len(r.PromptTokenIDs) == 0 {
			return fmt.Errorf("configuration %s key %d: no prompt tokens", id, r.Key)
		}
		if err := checkEnding(r, s.Setup.Model.EOSTokenIDs, k.MaxNewTokens); err != nil {
			return fmt.Errorf("configuration %s key %d: %w", id, r.Key, err)
		}
		if r.Seconds <= 0 {
			return fmt.Errorf("configuration %s key %d: %v seconds", id, r.Key, r.Seconds)
		}
	}
	return nil
}

// IFEvalShardsOf checks every shard of a configuration (CheckIFEvalShard)
// and returns the responses in file order.
func IFEvalShardsOf(k *contracts.IFEval, ins []ifeval.Input, id string, shards []*editions.IFEvalShard) ([]editions.IFEvalReply, error) {
	if len(shards) != k.Shards() {
		return nil, fmt.Errorf("configuration %s: %d shards, the contract has %d", id, len(shards), k.Shards())
	}
	var out []editions.IFEvalReply
	for i, s := range shards {
		if err := CheckIFEvalShard(k, "", ins, id, i+1, s); err != nil {
			return nil, err
		}
		out = append(out, s.Responses...)
	}
	return out, nil
}

// checkEnding: eos means the last id is an EOS id and none before it;
// length means MaxNewTokens ids and no EOS id among them.
func checkEnding(r editions.IFEvalReply, eos []int, max int) error {
	n := len(r.TokenIDs)
	if n == 0 || n > max {
		return fmt.Errorf("%d tokens, want 1..%d", n, max)
	}
	for i, t := range r.TokenIDs[:n-1] {
		if slices.Contains(eos, t) {
			return fmt.Errorf("EOS id %d at token %d of %d: generation ends at EOS", t, i, n)
		}
	}
	last := slices.Contains(eos, r.TokenIDs[n-1])
	switch r.Ending {
	case contracts.EndingEOS:
		if !last {
			return fmt.Errorf("ending eos, but the last token %d is not an EOS id %v", r.TokenIDs[n-1], eos)
		}
	case contracts.EndingLength:
		if last || n != max {
			return fmt.Errorf("ending length with %d tokens (last an EOS id: %v); want %d tokens and no EOS", n, last, max)
		}
	default:
		return fmt.Errorf("ending %q: want %s or %s", r.Ending, contracts.EndingEOS, contracts.EndingLength)
	}
	return nil
}

// IFEvalAggregate scores a configuration's responses (package ifeval) and
// sums its endings and rate.
func IFEvalAggregate(k *contracts.IFEval, ins []ifeval.Input, id string, shards []*editions.IFEvalShard) (editions.IFEvalConfig, error) {
	d := editions.IFEvalConfig{Schema: editions.SchemaIFEvalConfig, Version: editions.Version, ID: id, Rules: ifeval.Rules.Version,
		Endings: map[string]int{contracts.EndingEOS: 0, contracts.EndingLength: 0}, Verdicts: []editions.IFEvalVerdict{}}
	if k.Scorer != ifeval.Rules.Version {
		return d, fmt.Errorf("contract %s scores with %s; this build's scorer is %s", k.ID, k.Scorer, ifeval.Rules.Version)
	}
	replies, err := IFEvalShardsOf(k, ins, id, shards)
	if err != nil {
		return d, err
	}
	d.Checkpoint, d.PromptFormat = shards[0].Checkpoint, shards[0].Setup.PromptFormat
	for i, s := range shards {
		d.Shards = append(d.Shards, editions.IFEvalShardPath(id, i+1))
		if s.Setup.PromptFormat != d.PromptFormat {
			return d, fmt.Errorf("configuration %s: shard %d used prompt format %s, shard 1 %s", id, i+1, s.Setup.PromptFormat, d.PromptFormat)
		}
	}
	resp := map[string]string{}
	for i, r := range replies {
		resp[ins[i].Prompt] = r.Text
		d.Endings[r.Ending]++
		d.Tokens += int64(len(r.TokenIDs))
		d.Seconds += r.Seconds
	}
	if d.Seconds > 0 {
		d.TokS = float64(d.Tokens) / d.Seconds
	}
	rep, err := ifeval.Score(ins, resp)
	if err != nil {
		return d, err
	}
	if len(rep.Missing) > 0 {
		return d, fmt.Errorf("configuration %s: no response to keys %v", id, rep.Missing)
	}
	d.Prompts, d.Instructions = rep.Strict.Prompt.Total, rep.Strict.Instruction.Total
	d.Strict, d.Loose = accuracyDoc(rep.Strict), accuracyDoc(rep.Loose)
	for _, p := range rep.Prompts {
		d.Verdicts = append(d.Verdicts, editions.IFEvalVerdict{Key: p.Key, InstructionIDList: p.InstructionIDList, Strict: p.Strict, Loose: p.Loose})
	}
	return d, nil
}

func accuracyDoc(a ifeval.Accuracy) editions.IFEvalAccuracy {
	r := func(x ifeval.Ratio) editions.IFEvalRatio {
		return editions.IFEvalRatio{Followed: x.Followed, Total: x.Total}
	}
	m := func(in map[string]ifeval.Ratio) map[string]editions.IFEvalRatio {
		out := map[string]editions.IFEvalRatio{}
		for k, v := range in {
			out[k] = r(v)
		}
		return out
	}
	return editions.IFEvalAccuracy{PromptLevel: r(a.Prompt), InstructionLevel: r(a.Instruction), ByCategory: m(a.ByCategory), ByInstruction: m(a.ByInstruction)}
}

// IFEvalClaimsOf lists the claims of an IFEval edition: per
// configuration, the four accuracies and the response rate.
func IFEvalClaimsOf(c *Campaign, docs []editions.IFEvalConfig) editions.IFEvalClaims {
	out := editions.IFEvalClaims{Schema: editions.SchemaIFEvalClaims, Version: editions.Version, Edition: c.Edition, Claims: []editions.IFEvalClaim{}}
	for _, d := range docs {
		add := func(metric string, num, den float64) {
			v := 0.0
			if den > 0 {
				v = num / den
			}
			out.Claims = append(out.Claims, editions.IFEvalClaim{ID: d.ID + "." + metric, Config: d.ID, Metric: metric, Value: v,
				Numerator: num, Denominator: den, Evidence: c.Evidence, Publication: c.Publication, Synthetic: d.Checkpoint.Kind == "synthetic"})
		}
		add("prompt_level_strict", float64(d.Strict.PromptLevel.Followed), float64(d.Strict.PromptLevel.Total))
		add("instruction_level_strict", float64(d.Strict.InstructionLevel.Followed), float64(d.Strict.InstructionLevel.Total))
		add("prompt_level_loose", float64(d.Loose.PromptLevel.Followed), float64(d.Loose.PromptLevel.Total))
		add("instruction_level_loose", float64(d.Loose.InstructionLevel.Followed), float64(d.Loose.InstructionLevel.Total))
		add("response_tok_s", float64(d.Tokens), d.Seconds)
	}
	return out
}

// IFEvalInput is what WriteIFEvalEdition needs.
type IFEvalInput struct {
	CampaignDoc editions.CampaignDoc
	ContractDoc editions.ContractDoc
	// Shards are each configuration's records in shard order; RunDir holds
	// their files (copied byte for byte).
	Shards map[string][]*editions.IFEvalShard
	RunDir string
	Now    func() time.Time
	// Republish: as EditionInput's.
	Republish *Republish
}

// IFEvalPlotFile is the per-category figure of an IFEval edition.
const IFEvalPlotFile = "plots/ifeval_categories.png"

// WriteIFEvalEdition writes a complete IFEval edition into dir.
func WriteIFEvalEdition(dir string, in IFEvalInput) error {
	c, err := CampaignFromDoc(in.CampaignDoc)
	if err != nil {
		return err
	}
	k, err := contracts.IFEvalFromJSON(in.ContractDoc.Contract)
	if err != nil {
		return fmt.Errorf("frozen contract: %w", err)
	}
	ins, err := IFEvalInputs(k)
	if err != nil {
		return err
	}
	var docs []editions.IFEvalConfig
	for _, cfg := range c.Configurations {
		shards := in.Shards[cfg.ID]
		for i := range shards {
			rel := editions.IFEvalShardPath(cfg.ID, i+1)
			b, err := os.ReadFile(filepath.Join(in.RunDir, filepath.FromSlash(rel)))
			if err != nil {
				return err
			}
			if err := editions.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(rel)), b); err != nil {
				return err
			}
		}
		d, err := IFEvalAggregate(k, ins, cfg.ID, shards)
		if err != nil {
			return err
		}
		if err := editions.WriteDoc(filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(cfg.ID))), &d); err != nil {
			return err
		}
		docs = append(docs, d)
	}
	for name, doc := range map[string]any{editions.CampaignFile: in.CampaignDoc, editions.ContractFile: in.ContractDoc} {
		if err := editions.WriteDoc(filepath.Join(dir, name), doc); err != nil {
			return err
		}
	}
	claims := IFEvalClaimsOf(c, docs)
	if err := editions.WriteDoc(filepath.Join(dir, editions.ClaimsFile), &claims); err != nil {
		return err
	}
	png, err := IFEvalPlot(docs)
	if err != nil {
		return err
	}
	if err := editions.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(IFEvalPlotFile)), png); err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Campaign, *contracts.IFEval, string, []editions.IFEvalConfig) error
	}{{editions.ReportMD, IFEvalMarkdown}, {editions.ReportHTML, IFEvalHTML}} {
		var b bytes.Buffer
		if err := f.write(&b, c, k, in.ContractDoc.SHA256, docs); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if err := editions.WriteFileAtomic(filepath.Join(dir, f.name), b.Bytes()); err != nil {
			return err
		}
	}
	return writeManifestAs(dir, c.Edition, in.Now, in.Republish)
}

// ifevalReport is what both IFEval reports show.
type ifevalReport struct {
	Edition, Description, Contract, ContractSHA, Rules, Device string
	Synthetic                                                  []string // labels of synthetic checkpoints
	Configs                                                    []ifevalRow
	Categories                                                 []string
	// Cells[i][j] is configuration i's category j, "strict / loose".
	Cells [][]string
	Plot  string
}

type ifevalRow struct {
	ID, Checkpoint, Format                                   string
	PromptStrict, InstStrict, PromptLoose, InstLoose, Ending string
	Tokens                                                   int64
	TokS                                                     string
}

func ratio(r editions.IFEvalRatio) string {
	if r.Total == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d (%.1f%%)", r.Followed, r.Total, 100*float64(r.Followed)/float64(r.Total))
}

func checkpointLabel(ck editions.Checkpoint) string {
	if ck.Kind == "synthetic" && ck.Seed != nil {
		return fmt.Sprintf("synthetic %s seed %d", ck.Arch, *ck.Seed)
	}
	return fmt.Sprintf("%s %s", ck.Kind, ck.Arch)
}

func buildIFEvalReport(c *Campaign, k *contracts.IFEval, sha string, docs []editions.IFEvalConfig) ifevalReport {
	r := ifevalReport{Edition: c.Edition, Description: c.Description, Contract: k.ID, ContractSHA: sha, Rules: k.Scorer,
		Device: c.Device, Plot: IFEvalPlotFile}
	cats := map[string]bool{}
	for _, d := range docs {
		if d.Checkpoint.Kind == "synthetic" && !slices.Contains(r.Synthetic, checkpointLabel(d.Checkpoint)) {
			r.Synthetic = append(r.Synthetic, checkpointLabel(d.Checkpoint))
		}
		for cat := range d.Strict.ByCategory {
			cats[cat] = true
		}
		r.Configs = append(r.Configs, ifevalRow{ID: d.ID, Checkpoint: checkpointLabel(d.Checkpoint), Format: d.PromptFormat,
			PromptStrict: ratio(d.Strict.PromptLevel), InstStrict: ratio(d.Strict.InstructionLevel),
			PromptLoose: ratio(d.Loose.PromptLevel), InstLoose: ratio(d.Loose.InstructionLevel),
			Ending: fmt.Sprintf("%d eos, %d length", d.Endings[contracts.EndingEOS], d.Endings[contracts.EndingLength]),
			Tokens: d.Tokens, TokS: fmt.Sprintf("%.1f", d.TokS)})
	}
	for cat := range cats {
		r.Categories = append(r.Categories, cat)
	}
	slices.Sort(r.Categories)
	for _, d := range docs {
		var row []string
		for _, cat := range r.Categories {
			s, l := d.Strict.ByCategory[cat], d.Loose.ByCategory[cat]
			row = append(row, fmt.Sprintf("%d/%d / %d/%d", s.Followed, s.Total, l.Followed, l.Total))
		}
		r.Cells = append(r.Cells, row)
	}
	return r
}

// IFEvalMarkdown writes report.md of an IFEval edition.
func IFEvalMarkdown(w io.Writer, c *Campaign, k *contracts.IFEval, sha string, docs []editions.IFEvalConfig) error {
	r := buildIFEvalReport(c, k, sha, docs)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# %s\n\n", r.Edition)
	if len(r.Synthetic) > 0 {
		p("**Read this first.** The checkpoints are synthetic (%s): deterministic random weights with a real model's shapes. Their responses are meaningless text. Whatever instructions they satisfy, they satisfy by chance (random text has no commas to forbid, and meets some length and language limits), so the scores below measure no model's instruction following. This edition proves the pipeline (generation, retained responses, scoring, CPU re-scoring) and records its time.\n\n",
			strings.Join(r.Synthetic, ", "))
	}
	p("%s\n\nContract %s (sha256 %s), scorer rules %s, device %s. Every response is retained in raw/; `horizon-verify` re-scores each one.\n\n",
		strings.TrimSpace(r.Description), r.Contract, r.ContractSHA, r.Rules, r.Device)
	p("| configuration | checkpoint | prompt format | prompt-level strict | instruction-level strict | prompt-level loose | instruction-level loose | endings | tokens | tok/s |\n")
	p("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |\n")
	for _, x := range r.Configs {
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", x.ID, x.Checkpoint, x.Format, x.PromptStrict, x.InstStrict, x.PromptLoose, x.InstLoose, x.Ending, x.Tokens, x.TokS)
	}
	p("\n## By category (instruction level, strict / loose)\n\n| configuration |")
	for _, cat := range r.Categories {
		p(" %s |", cat)
	}
	p("\n| --- |%s\n", strings.Repeat(" ---: |", len(r.Categories)))
	for i, x := range r.Configs {
		p("| %s | %s |\n", x.ID, strings.Join(r.Cells[i], " | "))
	}
	p("\n![instruction-level accuracy by category](%s)\n", r.Plot)
	_, err := io.WriteString(w, b.String())
	return err
}

var ifevalHTML = template.Must(template.New("ifeval").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Edition}}</title>
<style>body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em}td.n{text-align:right}.warn{background:#fff3cd;padding:.8em;border:1px solid #e0c36b}</style>
</head><body>
<h1>{{.Edition}}</h1>
{{if .Synthetic}}<p class="warn"><strong>Read this first.</strong> The checkpoints are synthetic ({{range $i, $s := .Synthetic}}{{if $i}}, {{end}}{{$s}}{{end}}): deterministic random weights with a real model's shapes. Their responses are meaningless text. Whatever instructions they satisfy, they satisfy by chance (random text has no commas to forbid, and meets some length and language limits), so the scores below measure no model's instruction following. This edition proves the pipeline and records its time.</p>{{end}}
<p>{{.Description}}</p>
<p>Contract {{.Contract}} (sha256 <code>{{.ContractSHA}}</code>), scorer rules {{.Rules}}, device {{.Device}}. Every response is retained in raw/; <code>horizon-verify</code> re-scores each one.</p>
<table><tr><th>configuration</th><th>checkpoint</th><th>prompt format</th><th>prompt-level strict</th><th>instruction-level strict</th><th>prompt-level loose</th><th>instruction-level loose</th><th>endings</th><th>tokens</th><th>tok/s</th></tr>
{{range .Configs}}<tr><td>{{.ID}}</td><td>{{.Checkpoint}}</td><td>{{.Format}}</td><td class="n">{{.PromptStrict}}</td><td class="n">{{.InstStrict}}</td><td class="n">{{.PromptLoose}}</td><td class="n">{{.InstLoose}}</td><td>{{.Ending}}</td><td class="n">{{.Tokens}}</td><td class="n">{{.TokS}}</td></tr>
{{end}}</table>
<h2>By category (instruction level, strict / loose)</h2>
<table><tr><th>configuration</th>{{range .Categories}}<th>{{.}}</th>{{end}}</tr>
{{range $i, $x := .Configs}}<tr><td>{{$x.ID}}</td>{{range index $.Cells $i}}<td class="n">{{.}}</td>{{end}}</tr>
{{end}}</table>
<p><img src="{{.Plot}}" alt="instruction-level accuracy by category"></p>
</body></html>
`))

// IFEvalHTML writes report.html of an IFEval edition.
func IFEvalHTML(w io.Writer, c *Campaign, k *contracts.IFEval, sha string, docs []editions.IFEvalConfig) error {
	r := buildIFEvalReport(c, k, sha, docs)
	return ifevalHTML.Execute(w, r)
}

// IFEvalPlot draws instruction-level strict accuracy per category, one bar
// group per configuration (IFEvalPlotFile).
func IFEvalPlot(docs []editions.IFEvalConfig) ([]byte, error) {
	r := buildIFEvalReport(&Campaign{}, &contracts.IFEval{}, "", docs)
	p := plot.New()
	p.Title.Text = "Instruction-level accuracy by category (strict)"
	p.Y.Label.Text = "followed (%)"
	p.Y.Min, p.Y.Max = 0, 100
	w := vg.Points(float64(60) / float64(max(1, len(docs))))
	for i, d := range docs {
		vals := make(plotter.Values, len(r.Categories))
		for j, cat := range r.Categories {
			if x := d.Strict.ByCategory[cat]; x.Total > 0 {
				vals[j] = 100 * float64(x.Followed) / float64(x.Total)
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(i-len(docs)/2)
		p.Add(bars)
		p.Legend.Add(d.ID, bars)
	}
	p.Legend.Top = true
	p.NominalX(r.Categories...)
	p.X.Tick.Label.Rotation = 0.4
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = -1, 0
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
