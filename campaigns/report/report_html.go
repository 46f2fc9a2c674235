package report

import (
	"html/template"
	"io"
)

var htmlReport = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Edition {{.Edition}}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 62rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; line-height: 1.4; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.82rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.4rem; }
th { background: #f3f3f3; font-weight: 600; vertical-align: bottom; }
td { white-space: nowrap; }
td:first-child { white-space: normal; overflow-wrap: anywhere; max-width: 11rem; }
td.r { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 0.85rem; overflow-wrap: anywhere; }
pre { overflow-x: auto; font-size: 0.78rem; }
.headline { font-size: 1.05rem; }
.headline li { margin: 0.3rem 0; }
.caveat { background: #fff8e1; border-left: 4px solid #f0b400; padding: 0.5rem 1rem; }
figure { display: inline-block; margin: 0.5rem 0; max-width: 100%; }
figure img { max-width: 100%; height: auto; }
</style>
</head>
<body>
<h1>Edition {{.Edition}}</h1>
{{with .Description}}<p>{{.}}</p>{{end}}
{{with .Contract}}<p>Contract <strong>{{.ID}}</strong> (sha256 <code>{{$.ContractSHA}}</code>): {{len .Prompts}} prompts x {{.Blocks}} blocks,
{{.OutputTokens}} output tokens per request, {{.Selection}} selection, EOS {{.EOS}}, {{.Warmup.OutputTokens}}-token warmup excluded,
concurrency {{.Concurrency}}, {{.Cache.InitialPlacement}} initial placement, {{.Cache.Eviction}} evolving through each block.
Device: <strong>{{$.Device}}</strong>. Claims: {{$.Claims}} in <a href="claims.json">claims.json</a>.</p>{{end}}

{{with .Headlines}}<ul class="headline">{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}

<h2>Checkpoints</h2>
<ul>{{range .Checkpoints}}<li>{{.}}</li>{{end}}</ul>

<h2>Read this first</h2>
<div class="caveat"><ul>{{range .Caveats}}<li>{{.}}</li>{{end}}</ul></div>

<h2>Results</h2>
<h3>Speed</h3>
{{template "table" .Speed}}
<h3>Resources</h3>
{{template "table" .Resources}}
{{range .Plots}}{{if .File}}<figure><img src="{{.File}}" alt="{{.Title}}" width="600"><figcaption>{{.Title}}</figcaption></figure>{{else}}<p><em>{{.Title}}: {{.Note}}</em></p>{{end}}
{{end}}

{{if .Prefill.Rows}}<h2>Prefill by prompt length</h2>
<p>Isolated prefill (admission to the prompt's last logits before selection), per configuration and prompt length.</p>
{{template "table" .Prefill}}
{{end}}{{if .Depth.Rows}}<h2>Decode by context depth</h2>
<p>{{$.DepthIntro}}</p>
{{template "table" .Depth}}
{{if .DepthsNotRun}}<p>Not run (where-held depths beyond the model's context): {{range $i, $x := .DepthsNotRun}}{{if $i}}; {{end}}{{$x}}{{end}}.</p>
{{end}}{{end}}<h2>Cache contract invariants</h2>
<p>Summed over the measured requests; the contract requires observed zeros.</p>
{{template "table" .Invariants}}
{{if .Ceilings}}
<h2>Speeds beside their ceilings</h2>
<p>The same sections as report.md, in its Markdown form.</p>
<pre>{{.Ceilings}}</pre>
{{end}}

{{with .Contract}}
<h2>Metric definitions</h2>
<dl>{{range .Metrics}}<dt><strong>{{.ID}}</strong> ({{.Unit}})</dt><dd>{{.Definition}}</dd>{{end}}</dl>

<h2>Timing boundaries</h2>
<dl>
<dt>clock</dt><dd>{{.Timing.Clock}}</dd>
<dt>admission</dt><dd>{{.Timing.Admission}}</dd>
<dt>first token</dt><dd>{{.Timing.FirstToken}}</dd>
<dt>TTFT</dt><dd>{{.Timing.TTFT}}</dd>
<dt>decode</dt><dd>{{.Timing.Decode}}</dd>
<dt>runtime</dt><dd>{{.Timing.Runtime}}</dd>
</dl>

<h2>Observations</h2>
<table><tr><th>observation</th><th>cpu</th><th>cuda</th><th>definition</th></tr>
{{range .Observations}}<tr><td>{{.Name}}</td><td>{{.CPU}}</td><td>{{.CUDA}}</td><td>{{.Definition}}</td></tr>
{{end}}</table>

<h2>Prompts (contract order)</h2>
{{if .PromptRule}}<p>Prompt rule <strong>{{.PromptRule.ID}}</strong> (separator "{{.PromptRule.Separator}}"): {{.PromptRule.Definition}}</p>
<table><tr><th>id</th><th>topic</th><th>tokens</th><th>text</th></tr>
<tr><td>{{.Warmup.Prompt.ID}} (warmup, excluded)</td><td>{{.Warmup.Prompt.Topic}}</td><td class="r">{{.Warmup.Prompt.Tokens}}</td><td>{{.Warmup.Prompt.Text}}</td></tr>
{{range .Prompts}}<tr><td>{{.ID}}</td><td>{{.Topic}}</td><td class="r">{{.Tokens}}</td><td>{{.Text}}</td></tr>
{{end}}</table>{{else}}<table><tr><th>id</th><th>topic</th><th>text</th></tr>
<tr><td>{{.Warmup.Prompt.ID}} (warmup, excluded)</td><td>{{.Warmup.Prompt.Topic}}</td><td>{{.Warmup.Prompt.Text}}</td></tr>
{{range .Prompts}}<tr><td>{{.ID}}</td><td>{{.Topic}}</td><td>{{.Text}}</td></tr>
{{end}}</table>{{end}}
{{end}}

<h2>Environment</h2>
{{with .Env}}<ul>
<li>device {{.Device}}; CPU {{.CPU}} ({{.CPUs}} logical CPUs, {{.Threads}} threads per op); GPU {{.GPU}}; driver {{.Driver}}</li>
<li>host {{.Hostname}}, {{.OS}}</li>
<li>tool {{.Build.Module}} {{.Build.Version}}, {{.Build.GoVersion}}, VCS revision {{.Build.VCSRevision}} (modified {{.Build.VCSModified}})</li>
</ul>{{end}}

<h2>Files</h2>
<p>Every number above is recomputed from the raw worker records:</p>
<ul>{{range .Workers}}<li><a href="{{.}}">{{.}}</a></li>{{end}}</ul>
<p><a href="manifest.json">manifest.json</a> lists every file with its SHA-256.</p>
</body>
</html>
{{define "table"}}<table>
<tr>{{range .Headers}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if index $.Right $i}} class="r"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>{{end}}
`))

// HTML writes report.html; its tables come from the same field lists as
// report.md: the results table split in two (Speed, Resources), each row
// starting with its configuration.
func HTML(w io.Writer, r *Report) error {
	return htmlReport.Execute(w, r)
}

// DepthIntro is the sentence under the depth table's heading (report.md's
// too).
func (*Report) DepthIntro() string { return depthIntro }
