package report

import (
	"fmt"
	"io"
	"strings"
)

// Reporter writes one format of a report. Each format is one small
// function of the one Report value (vegeta style), so adding a format adds
// a function and changes nothing else.
type Reporter func(w io.Writer, r *Report) error

var (
	_ Reporter = Markdown
	_ Reporter = HTML
)

// mdCell escapes a Markdown table cell.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// The headings of report.md's per-prompt tables, which the md export
// repeats.
const (
	prefillHeading = "## Prefill by prompt length"
	depthHeading   = "## Decode by context depth"
)

func writeMDTable(b *strings.Builder, t Table) {
	b.WriteString("|")
	for _, h := range t.Headers {
		b.WriteString(" " + mdCell(h) + " |")
	}
	b.WriteString("\n|")
	for _, r := range t.Right {
		if r {
			b.WriteString(" ---: |")
		} else {
			b.WriteString(" --- |")
		}
	}
	b.WriteString("\n")
	for _, row := range t.Rows {
		b.WriteString("|")
		for _, c := range row {
			b.WriteString(" " + mdCell(c) + " |")
		}
		b.WriteString("\n")
	}
}

// Markdown writes report.md.
// depthIntro is the sentence under the depth table's heading in both
// reports.
const depthIntro = "Decode of the output tokens after each context depth (first token to last: the depth's prefill excluded), and the depth's isolated prefill, per configuration and depth."

func Markdown(w io.Writer, r *Report) error {
	var b strings.Builder
	k := r.Contract
	fmt.Fprintf(&b, "# Edition %s\n\n", r.Edition)
	if r.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", r.Description)
	}
	fmt.Fprintf(&b, "Contract **%s** (sha256 `%s`): %d prompts x %d blocks, %d output tokens per request, %s selection, EOS %s, %d-token warmup excluded, concurrency %d, %s initial placement, %s evolving through each block. Device: **%s**. Claims: %d in claims.json.\n\n",
		k.ID, r.ContractSHA, len(k.Prompts), k.Blocks, k.OutputTokens, k.Selection, k.EOS, k.Warmup.OutputTokens,
		k.Concurrency, k.Cache.InitialPlacement, k.Cache.Eviction(), r.Device, r.Claims)

	b.WriteString("## Checkpoints\n\n")
	for _, c := range r.Checkpoints {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	b.WriteString("\n## Read this first\n\n")
	for _, c := range r.Caveats {
		fmt.Fprintf(&b, "- %s\n", c)
	}

	b.WriteString("\n## Results\n\n")
	writeMDTable(&b, r.Results)
	b.WriteString("\n")
	for _, p := range r.Plots {
		if p.File != "" {
			fmt.Fprintf(&b, "![%s](%s)\n\n", p.Title, p.File)
		} else {
			fmt.Fprintf(&b, "*%s: %s*\n\n", p.Title, p.Note)
		}
	}

	if len(r.Prefill.Rows) > 0 {
		b.WriteString(prefillHeading + "\n\nIsolated prefill (admission to the prompt's last logits before selection), per configuration and prompt length.\n\n")
		writeMDTable(&b, r.Prefill)
		b.WriteString("\n")
	}

	if len(r.Depth.Rows) > 0 {
		b.WriteString(depthHeading + "\n\n" + depthIntro + "\n\n")
		writeMDTable(&b, r.Depth)
		if len(r.DepthsNotRun) > 0 {
			b.WriteString("\nNot run (where-held depths beyond the model's context): " + strings.Join(r.DepthsNotRun, "; ") + ".\n")
		}
		b.WriteString("\n")
	}

	b.WriteString("## Cache contract invariants\n\nSummed over the measured requests; the contract requires observed zeros.\n\n")
	writeMDTable(&b, r.Invariants)
	if r.Ceilings != "" {
		b.WriteString("\n## Speeds beside their ceilings\n\n")
		b.WriteString(r.Ceilings)
	}

	b.WriteString("\n## Metric definitions\n\n")
	for _, m := range k.Metrics {
		fmt.Fprintf(&b, "- **%s** (%s): %s\n", m.ID, m.Unit, m.Definition)
	}
	b.WriteString("\n## Timing boundaries\n\n")
	t := k.Timing
	for _, kv := range [][2]string{{"clock", t.Clock}, {"admission", t.Admission}, {"first token", t.FirstToken},
		{"TTFT", t.TTFT}, {"decode", t.Decode}, {"runtime", t.Runtime}} {
		fmt.Fprintf(&b, "- **%s**: %s\n", kv[0], kv[1])
	}
	b.WriteString("\n## Observations\n\n| observation | cpu | cuda | definition |\n| --- | --- | --- | --- |\n")
	for _, o := range k.Observations {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", o.Name, o.CPU, o.CUDA, mdCell(o.Definition))
	}
	if rule := k.PromptRule; rule != nil {
		// Declared lengths: every prompt is its text made to its length
		// in tokens by the rule.
		fmt.Fprintf(&b, "\n## Prompts (contract order)\n\nPrompt rule **%s** (separator %q): %s\n\n| id | topic | tokens | text bytes |\n| --- | --- | ---: | ---: |\n", rule.ID, rule.Separator, rule.Definition)
		fmt.Fprintf(&b, "| %s (warmup, excluded) | %s | %d | %d |\n", k.Warmup.Prompt.ID, k.Warmup.Prompt.Topic, k.Warmup.Prompt.Tokens, promptBytes(k.Warmup.Prompt))
		for _, p := range k.Prompts {
			fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", p.ID, p.Topic, p.Tokens, promptBytes(p))
		}
	} else {
		b.WriteString("\n## Prompts (contract order)\n\n| id | topic | bytes |\n| --- | --- | ---: |\n")
		fmt.Fprintf(&b, "| %s (warmup, excluded) | %s | %d |\n", k.Warmup.Prompt.ID, k.Warmup.Prompt.Topic, promptBytes(k.Warmup.Prompt))
		for _, p := range k.Prompts {
			fmt.Fprintf(&b, "| %s | %s | %d |\n", p.ID, p.Topic, promptBytes(p))
		}
	}

	e := r.Env
	b.WriteString("\n## Environment\n\n")
	fmt.Fprintf(&b, "- device %s; CPU %s (%d logical CPUs, %d threads per op); GPU %s; driver %s\n", e.Device, e.CPU, e.CPUs, e.Threads, e.GPU, e.Driver)
	fmt.Fprintf(&b, "- host %s, %s\n", e.Hostname, e.OS)
	fmt.Fprintf(&b, "- tool %s %s, %s, VCS revision %s (modified %s)\n", e.Build.Module, e.Build.Version, e.Build.GoVersion, e.Build.VCSRevision, e.Build.VCSModified)

	b.WriteString("\n## Files\n\nEvery number above is recomputed from the raw worker records:\n\n")
	for _, w := range r.Workers {
		fmt.Fprintf(&b, "- [%s](%s)\n", w, w)
	}
	b.WriteString("\nmanifest.json lists every file with its SHA-256; claims.json gives each claim's source, evidence level and status.\n")
	_, err := io.WriteString(w, b.String())
	return err
}
