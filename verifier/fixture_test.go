package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/schemas"
)

// The fixture edition: a tiny but complete edition written the way
// editions/format.go describes, without the campaign runner: 2
// configurations (capacity 4 of 8, partial, and 8 of 8, full) x 2 blocks x 2
// prompts of N = 8 tokens, a 4-token warmup, on the CPU device.
//
// The helpers below work on any edition directory, so the mutation suite
// also runs on committed editions: edit changes a JSON document in place,
// reaggregate rewrites every configuration's aggregates from its raw records
// (with this file's own aggregator, not the verifier's) and every claim from
// its sources, and rehash rewrites the manifest to match the files.

const (
	fixEdition = "fixture-cpu"
	fixN       = 8
	fixWarmupN = 4
	fixVocab   = 512
	fixEOS     = 511
	fixBlocks  = 2
	fixRecord  = 4096 // bytes of one expert record
)

var (
	fixConfigs = []struct {
		id       string
		capacity int
		executor string
	}{
		{"tiny-c4", 4, "scalar-v1"},
		{"tiny-c8", 8, "scalar-v1"},
	}
	fixModel = editions.Model{ModelType: "olmoe", Layers: 2, Hidden: 64, ExpertsPerLayer: 8, TopK: 2, ExpertFFN: 32, SharedFFN: 0, Vocab: fixVocab}
	fixBuild = editions.BuildInfo{Module: "github.com/horizon-runmap/horizon", Version: "(devel)", GoVersion: "go1.26.0",
		VCSRevision: "UNKNOWN", VCSModified: "UNKNOWN", VCSTime: "UNKNOWN", Deps: []string{}}
)

// fixContract is PERF-REAL-v1 cut down to the fixture's size: its first two
// prompts, two blocks, N = 8, a 4-token warmup.
func fixContract(t testing.TB) *contracts.Contract {
	t.Helper()
	k, err := contracts.Embedded(contracts.PerfRealV1)
	if err != nil {
		t.Fatal(err)
	}
	k.Blocks, k.OutputTokens, k.Warmup.OutputTokens = fixBlocks, fixN, fixWarmupN
	k.Prompts = k.Prompts[:2]
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	return k
}

// newFixture writes the valid fixture edition into a fresh directory. The
// writer side (hashes of the frozen contract and campaign, schema
// validation) uses packages contracts and editions, so the verifier's own
// implementations are checked against them.
func newFixture(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fixEdition)
	k := fixContract(t)
	body, err := k.JSON()
	if err != nil {
		t.Fatal(err)
	}
	contractHash, err := k.SHA256()
	if err != nil {
		t.Fatal(err)
	}
	writeDoc(t, dir, editions.ContractFile, editions.ContractDoc{Schema: editions.SchemaContract, Version: editions.Version,
		ID: k.ID, SHA256: contractHash, Contract: body})

	var cfgs []any
	for _, c := range fixConfigs {
		cfgs = append(cfgs, map[string]any{"id": c.id, "checkpoint": map[string]any{"synthetic": map[string]any{"arch": "olmoe-tiny", "seed": 924}},
			"expert_format": "int4", "capacity": c.capacity, "executor": c.executor, "seed_executor": "",
			"placement": "canonical", "policy": "lru", "spares": 2, "staging": 2})
	}
	campaign, err := json.Marshal(map[string]any{
		"edition": fixEdition, "description": "verifier fixture", "contract": map[string]any{"id": k.ID, "sha256": contractHash},
		"device": "cpu", "threads": 2, "evidence": "E1", "publication": "internal", "configurations": cfgs,
	})
	if err != nil {
		t.Fatal(err)
	}
	canon, err := contracts.CanonicalJSON(campaign)
	if err != nil {
		t.Fatal(err)
	}
	writeDoc(t, dir, editions.CampaignFile, editions.CampaignDoc{Schema: editions.SchemaCampaign, Version: editions.Version,
		Edition: fixEdition, SHA256: contracts.HashCanonical(canon), Campaign: canon})

	for ci, c := range fixConfigs {
		for b := 1; b <= fixBlocks; b++ {
			writeDoc(t, dir, editions.RawPath(c.id, b), fixRaw(k, ci, c.id, c.capacity, c.executor, b, contractHash))
		}
	}
	// The fixture's contract is not a released one: the verifier accepts
	// it only when told to (Options.ContractFile, --contract), so the
	// fixture writes its YAML beside the edition (fixtureOptions).
	writeContractYAML(t, k, fixtureContractFile(dir))
	writePlot(t, dir, fixPlot)
	reaggregate(t, dir) // configs, claims and the reports' tables
	rehash(t, dir)
	// Everything written must satisfy the writer's own schema check.
	for _, id := range configIDs(t, dir) {
		mustValidate(t, dir, editions.ConfigPath(id))
	}
	mustValidate(t, dir, editions.ClaimsFile)
	mustValidate(t, dir, editions.ManifestFile)
	return dir
}

// ---------------------------------------------------------------------------
// Generic edition editing.

func writeFile(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeDoc writes an edition document the way the runner does:
// editions.Marshal validates it against its schema first.
func writeDoc(t testing.TB, dir, rel string, v any) {
	t.Helper()
	b, err := editions.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	writeFile(t, dir, rel, string(b))
}

func mustValidate(t testing.TB, dir, rel string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.Validate(b); err != nil {
		t.Fatalf("fixture %s: %v", rel, err)
	}
}

func writeJSON(t testing.TB, dir, rel string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, rel, string(b)+"\n")
}

func toTree(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := parseTree(b)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func readTree(t testing.TB, dir, rel string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := parseTree(b)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return tree.(map[string]any)
}

// edit changes one JSON document in place (numbers stay json.Number).
func edit(t testing.TB, dir, rel string, f func(doc map[string]any)) {
	t.Helper()
	doc := readTree(t, dir, rel)
	f(doc)
	writeJSON(t, dir, rel, doc)
}

// at walks a generic tree by pointer tokens and returns the container.
func at(t testing.TB, v any, tokens ...any) any {
	t.Helper()
	for _, tok := range tokens {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok.(string)]
		case []any:
			v = x[tok.(int)]
		default:
			t.Fatalf("at %v: not a container", tokens)
		}
	}
	return v
}

func obj(t testing.TB, v any, tokens ...any) map[string]any {
	t.Helper()
	m, ok := at(t, v, tokens...).(map[string]any)
	if !ok {
		t.Fatalf("at %v: not an object", tokens)
	}
	return m
}

func arr(t testing.TB, v any, tokens ...any) []any {
	t.Helper()
	a, ok := at(t, v, tokens...).([]any)
	if !ok {
		t.Fatalf("at %v: not an array", tokens)
	}
	return a
}

func numInt(t testing.TB, v any) int64 {
	t.Helper()
	i, err := strconv.ParseInt(string(v.(json.Number)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// rehash rewrites manifest.json so that it lists every other file with its
// size and SHA-256, sorted by path, keeping the other manifest members.
func rehash(t testing.TB, dir string) {
	t.Helper()
	m := &editions.Manifest{Schema: editions.SchemaManifest, Version: editions.Version, Edition: fixEdition,
		CreatedAt: "2026-01-01T00:00:00Z", Tool: fixBuild}
	if b, err := os.ReadFile(filepath.Join(dir, editions.ManifestFile)); err == nil {
		if old, err := LoadManifest(b); err == nil {
			m = old
		}
	}
	m.Files = []editions.FileEntry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == editions.ManifestFile || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m.Files = append(m.Files, editions.FileEntry{Path: rel, Bytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	writeJSON(t, dir, editions.ManifestFile, m)
}

// refreeze recomputes the canonical hash a frozen document (contract.json
// with member "contract", campaign.json with "campaign") carries, the way
// the writer does (package contracts).
func refreeze(t testing.TB, dir, rel, member string) {
	t.Helper()
	edit(t, dir, rel, func(d map[string]any) {
		b, err := json.Marshal(d[member])
		if err != nil {
			t.Fatal(err)
		}
		canon, err := contracts.CanonicalJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		d["sha256"] = contracts.HashCanonical(canon)
	})
}

// rawPathsOf lists raw/<id>/block-<k>.json files present, by block.
func rawPathsOf(t testing.TB, dir, id string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(dir, "raw", id))
	type pk struct {
		p string
		k int
	}
	var ps []pk
	for _, e := range ents {
		p := "raw/" + id + "/" + e.Name()
		if _, k, ok := parseRawPath(p); ok {
			ps = append(ps, pk{p, k})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].k < ps[j].k })
	var out []string
	for _, x := range ps {
		out = append(out, x.p)
	}
	return out
}

// configIDs lists the configuration ids of the campaign.
func configIDs(t testing.TB, dir string) []string {
	t.Helper()
	var ids []string
	for _, c := range arr(t, readTree(t, dir, editions.CampaignFile), "campaign", "configurations") {
		ids = append(ids, c.(map[string]any)["id"].(string))
	}
	return ids
}

// fixtureSchemas are the schemas embedded in package schemas.
func fixtureSchemas(t testing.TB) SchemaSet {
	t.Helper()
	s, err := EmbeddedSchemas()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// findingsText renders findings for failure messages.
func findingsText(fs []Finding) string {
	var b bytes.Buffer
	for _, f := range fs {
		b.WriteString("  " + string(f.Severity) + " " + f.ID + " " + f.Where() + ": " + f.Message + "\n")
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// The fixture's contract file, plot and reports.

// fixPlot is the one plot the fixture's reports show.
const fixPlot = "plots/decode_tok_s.png"

// fixtureContractFile is where newFixture writes the YAML of the fixture's
// contract: beside the edition, never inside it.
func fixtureContractFile(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r // an edition named through a symlink (editions/latest)
	}
	return filepath.Join(filepath.Dir(dir), fixEdition+"-contract.yaml")
}

// writeContractYAML writes contract k as YAML (its yaml tags: the form
// contracts.LoadFile reads).
func writeContractYAML(t testing.TB, k *contracts.Contract, path string) {
	t.Helper()
	b, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writePlot writes a small valid PNG at rel.
func writePlot(t testing.TB, dir, rel string) {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 4, 4))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 16)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, rel, b.String())
}

// fixField is one report column, written the way campaigns/report/fields.go
// writes it: the fixture's own report writer (the verifier has a third,
// independent copy).
type fixField struct {
	header string
	right  bool
	value  func(d *editions.ConfigDoc) string
}

func fixObs(o editions.Obs[int64], scale float64, decimals int) string {
	if !o.Ok() {
		return o.Status
	}
	return fmt.Sprintf("%.*f", decimals, float64(o.Value)/scale)
}

var fixResultFields = []fixField{
	{"configuration", false, func(d *editions.ConfigDoc) string { return d.ID }},
	{"checkpoint", false, func(d *editions.ConfigDoc) string { return editions.CheckpointLabel(d.Checkpoint) }},
	{"executor", false, func(d *editions.ConfigDoc) string {
		if d.SeedExecutor != "" {
			return d.Executor + " (seed: " + d.SeedExecutor + ")"
		}
		return d.Executor
	}},
	{"capacity (experts/layer)", true, func(d *editions.ConfigDoc) string { return fmt.Sprintf("%d/%d", d.Capacity, d.ExpertsPerLayer) }},
	{"regime", false, func(d *editions.ConfigDoc) string { return d.Regime }},
	{"pooled decode (tok/s)", true, func(d *editions.ConfigDoc) string { return fixObsFloat(d.Metrics.PooledDecodeTokS, 2) }},
	{"block spread (tok/s)", true, func(d *editions.ConfigDoc) string {
		if sp := d.Metrics.BlockSpread; !sp.Min.Ok() || !sp.Max.Ok() {
			return editions.Unknown
		}
		return fmt.Sprintf("%.2f-%.2f", d.Metrics.BlockSpread.Min.Value, d.Metrics.BlockSpread.Max.Value)
	}},
	{"overall output (tok/s)", true, func(d *editions.ConfigDoc) string { return fmt.Sprintf("%.2f", d.Metrics.OverallOutputTokS) }},
	{"TTFT mean (ms)", true, func(d *editions.ConfigDoc) string { return fmt.Sprintf("%.1f", d.Metrics.TTFTMeanS*1e3) }},
	{"response mean (s)", true, func(d *editions.ConfigDoc) string { return fmt.Sprintf("%.3f", d.Metrics.ResponseMeanS) }},
	{"H2D (MiB)", true, func(d *editions.ConfigDoc) string { return fmt.Sprintf("%.1f", float64(d.Metrics.H2DBytes)/(1<<20)) }},
	{"misses", true, func(d *editions.ConfigDoc) string { return fmt.Sprint(d.Metrics.Misses) }},
	{"RSS peak (MiB)", true, func(d *editions.ConfigDoc) string { return fixObs(d.Metrics.RSSPeakBytes, 1<<20, 1) }},
	{"VRAM peak (GiB)", true, func(d *editions.ConfigDoc) string { return fixObs(d.Metrics.VRAMPeakBytes, 1<<30, 2) }},
	{"requests", true, func(d *editions.ConfigDoc) string { return fmt.Sprintf("%d (%d blocks)", d.Requests, d.Blocks) }},
}

// fixResultsFor is fixResultFields with the bootstrap interval columns,
// each after its point value's, when every document carries an
// uncertainty (as the runner's results table does).
// A KV cache column follows the executor's when every document records
// artifact.kv_dtype, an expert activations column (after it) when some
// document records artifact.expert_activation_dtype, and a dense
// activations column (after that) when some document records
// artifact.dense_activation_dtype.
func fixResultsFor(docs []*editions.ConfigDoc) []fixField {
	fields := fixResultsNoKV(docs)
	kv, act, dense := true, false, false
	for _, d := range docs {
		kv = kv && d.Artifact.KVDType != ""
		act = act || d.Artifact.ExpertActivationDType != ""
		dense = dense || d.Artifact.DenseActivationDType != ""
	}
	if !kv && !act && !dense {
		return fields
	}
	var out []fixField
	for _, f := range fields {
		out = append(out, f)
		if f.header == "executor" && kv {
			out = append(out, fixField{"KV cache", false, func(d *editions.ConfigDoc) string { return d.Artifact.KVDTypeOf() }})
		}
		if f.header == "executor" && act {
			out = append(out, fixField{"expert activations", false, func(d *editions.ConfigDoc) string { return d.Artifact.ExpertActivationDTypeOf() }})
		}
		if f.header == "executor" && dense {
			out = append(out, fixField{"dense activations", false, func(d *editions.ConfigDoc) string { return d.Artifact.DenseActivationDTypeOf() }})
		}
	}
	return out
}

func fixResultsNoKV(docs []*editions.ConfigDoc) []fixField {
	intervals, prefill := len(docs) > 0, len(docs) > 0
	for _, d := range docs {
		intervals = intervals && d.Uncertainty != nil
		prefill = prefill && d.Metrics.Prefill != nil
	}
	pf := fixField{"prefill (tok/s)", true, func(d *editions.ConfigDoc) string {
		if o := d.Metrics.Prefill.TokS; !o.Ok() {
			return o.Status
		}
		return fmt.Sprintf("%.1f", d.Metrics.Prefill.TokS.Value)
	}}
	if !intervals {
		if !prefill {
			return fixResultFields
		}
		var out []fixField
		for _, f := range fixResultFields {
			out = append(out, f)
			if f.header == "TTFT mean (ms)" {
				out = append(out, pf)
			}
		}
		return out
	}
	ci := map[string]fixField{
		"pooled decode (tok/s)": {"pooled decode 95% CI (tok/s)", true, func(d *editions.ConfigDoc) string {
			u := d.Uncertainty.PooledDecodeTokS
			return fmt.Sprintf("%.2f-%.2f", u.Lo, u.Hi)
		}},
		"TTFT mean (ms)": {"TTFT mean 95% CI (ms)", true, func(d *editions.ConfigDoc) string {
			u := d.Uncertainty.TTFTMeanS
			return fmt.Sprintf("%.1f-%.1f", u.Lo*1e3, u.Hi*1e3)
		}},
	}
	var out []fixField
	for _, f := range fixResultFields {
		out = append(out, f)
		if c, ok := ci[f.header]; ok {
			out = append(out, c)
		}
		if prefill && f.header == "TTFT mean (ms)" {
			out = append(out, pf)
		}
	}
	return out
}

var fixInvariantFields = []fixField{
	{"configuration", false, func(d *editions.ConfigDoc) string { return d.ID }},
	{"expert D2H (bytes)", true, func(d *editions.ConfigDoc) string { return fixObs(d.Invariants.D2HExpertBytes, 1, 0) }},
	{"writebacks", true, func(d *editions.ConfigDoc) string { return fixObs(d.Invariants.Writebacks, 1, 0) }},
	{"authority writes", true, func(d *editions.ConfigDoc) string { return fixObs(d.Invariants.AuthorityWrites, 1, 0) }},
	{"request SHA work (bytes)", true, func(d *editions.ConfigDoc) string { return fixObs(d.Invariants.RequestHashBytes, 1, 0) }},
	{"request artifact reads", true, func(d *editions.ConfigDoc) string { return fixObs(d.Invariants.RequestArtifactReads, 1, 0) }},
}

func fixMDTable(fields []fixField, docs []*editions.ConfigDoc) string {
	var b strings.Builder
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	b.WriteString("|")
	for _, f := range fields {
		b.WriteString(" " + cell(f.header) + " |")
	}
	b.WriteString("\n|")
	for _, f := range fields {
		if f.right {
			b.WriteString(" ---: |")
		} else {
			b.WriteString(" --- |")
		}
	}
	b.WriteString("\n")
	for _, d := range docs {
		b.WriteString("|")
		for _, f := range fields {
			b.WriteString(" " + cell(f.value(d)) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func fixHTMLTable(fields []fixField, docs []*editions.ConfigDoc) string {
	var b strings.Builder
	b.WriteString("<table>\n<tr>")
	for _, f := range fields {
		b.WriteString("<th>" + html.EscapeString(f.header) + "</th>")
	}
	b.WriteString("</tr>\n")
	for _, d := range docs {
		b.WriteString("<tr>")
		for _, f := range fields {
			if f.right {
				b.WriteString(`<td class="r">`)
			} else {
				b.WriteString("<td>")
			}
			b.WriteString(html.EscapeString(f.value(d)) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>")
	return b.String()
}

// reportInputs reads what the reports show from the edition's JSON: the
// configuration documents in campaign order, the contract's id and hash
// and the claim count.
func reportInputs(t testing.TB, dir string) (docs []*editions.ConfigDoc, contractID, contractSHA string, claims int) {
	t.Helper()
	for _, id := range configIDs(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(id))))
		if err != nil {
			continue
		}
		d, err := LoadConfig(b)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		docs = append(docs, d)
	}
	k := readTree(t, dir, editions.ContractFile)
	contractID, _ = k["id"].(string)
	contractSHA, _ = k["sha256"].(string)
	if cl, err := os.ReadFile(filepath.Join(dir, editions.ClaimsFile)); err == nil {
		if c, err := LoadClaims(cl); err == nil {
			claims = len(c.Claims)
		}
	}
	return docs, contractID, contractSHA, claims
}

// writeFixtureReports writes the fixture's report.md and report.html: the
// contract line, the claim count, the results table, the plot and the
// cache-invariants table, in the runner's formats.
func writeFixtureReports(t testing.TB, dir string) {
	t.Helper()
	docs, id, sha, claims := reportInputs(t, dir)
	var md strings.Builder
	fmt.Fprintf(&md, "# Edition %s\n\nverifier fixture\n\n", fixEdition)
	fmt.Fprintf(&md, "Contract **%s** (sha256 `%s`): %d prompts x %d blocks, %d output tokens per request. Device: **cpu**. Claims: %d in claims.json.\n\n",
		id, sha, 2, fixBlocks, fixN, claims)
	md.WriteString("## Results\n\n" + fixMDTable(fixResultsFor(docs), docs) + "\n")
	fmt.Fprintf(&md, "![Pooled decode rate against capacity](%s)\n\n", fixPlot)
	md.WriteString("## Cache contract invariants\n\nSummed over the measured requests; the contract requires observed zeros.\n\n")
	md.WriteString(fixMDTable(fixInvariantFields, docs))
	writeFile(t, dir, editions.ReportMD, md.String())

	var h strings.Builder
	fmt.Fprintf(&h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Edition %s</title>\n</head>\n<body>\n<h1>Edition %s</h1>\n<p>verifier fixture</p>\n", fixEdition, fixEdition)
	fmt.Fprintf(&h, "<p>Contract <strong>%s</strong> (sha256 <code>%s</code>): %d prompts x %d blocks, %d output tokens per request.\nDevice: <strong>cpu</strong>. Claims: %d in <a href=\"claims.json\">claims.json</a>.</p>\n",
		html.EscapeString(id), sha, 2, fixBlocks, fixN, claims)
	vals := make([]editions.ConfigDoc, len(docs))
	for i, d := range docs {
		vals[i] = *d
	}
	h.WriteString(`<ul class="headline">`)
	for _, s := range editions.Headlines(vals, nil) {
		h.WriteString("<li>" + html.EscapeString(s) + "</li>")
	}
	h.WriteString("</ul>\n")
	h.WriteString("\n<h2>Results</h2>\n" + fixHTMLTable(fixResultsFor(docs), docs) + "\n")
	fmt.Fprintf(&h, "<figure><img src=\"%s\" alt=\"Pooled decode rate against capacity\" width=\"600\"><figcaption>Pooled decode rate against capacity</figcaption></figure>\n", fixPlot)
	h.WriteString("\n<h2>Cache contract invariants</h2>\n<p>Summed over the measured requests; the contract requires observed zeros.</p>\n")
	h.WriteString(fixHTMLTable(fixInvariantFields, docs) + "\n</body>\n</html>\n")
	writeFile(t, dir, editions.ReportHTML, h.String())
}

var (
	mdClaimCount   = regexp.MustCompile(`Claims: \d+ in claims\.json\.`)
	htmlClaimCount = regexp.MustCompile(`Claims: \d+ in <a href="claims\.json">`)
	htmlTableRe    = regexp.MustCompile(`(?s)<table>.*?</table>`)
)

// rerenderReports brings the reports of any edition in line with its JSON,
// as a careful forger would: a fixture without reports gets them written;
// otherwise the results and cache-invariants tables of report.md and
// report.html are rewritten from the configuration documents and the claim
// count from claims.json, everything else left as it is.
func rerenderReports(t testing.TB, dir string) {
	t.Helper()
	mdPath := filepath.Join(dir, editions.ReportMD)
	if _, err := os.Stat(mdPath); err != nil {
		writeFixtureReports(t, dir)
		return
	}
	docs, _, _, claims := reportInputs(t, dir)
	if b, err := os.ReadFile(mdPath); err == nil {
		s := string(b)
		for _, x := range []struct {
			title  string
			fields []fixField
		}{{"Results", fixResultsFor(docs)}, {"Cache contract invariants", fixInvariantFields}} {
			s = replaceMDTable(s, x.title, fixMDTable(x.fields, docs))
		}
		s = mdClaimCount.ReplaceAllString(s, fmt.Sprintf("Claims: %d in claims.json.", claims))
		writeFile(t, dir, editions.ReportMD, s)
	}
	hp := filepath.Join(dir, editions.ReportHTML)
	if b, err := os.ReadFile(hp); err == nil {
		s := string(b)
		for _, x := range []struct {
			title  string
			fields []fixField
		}{{"Results", fixResultsFor(docs)}, {"Cache contract invariants", fixInvariantFields}} {
			head := "<h2>" + x.title + "</h2>"
			i := strings.Index(s, head)
			if i < 0 {
				continue
			}
			loc := htmlTableRe.FindStringIndex(s[i:])
			if loc == nil {
				continue
			}
			s = s[:i+loc[0]] + fixHTMLTable(x.fields, docs) + s[i+loc[1]:]
		}
		s = htmlClaimCount.ReplaceAllString(s, fmt.Sprintf(`Claims: %d in <a href="claims.json">`, claims))
		writeFile(t, dir, editions.ReportHTML, s)
	}
	rerenderProse(t, dir, docs)
}

// rerenderProse brings report.html's headline sentences in line with the
// configuration documents, as a careful forger would with this repository's
// function (editions.Headlines), keeping each configuration's stated HBM
// ceiling (the verifier cannot recompute it). A report without the list is
// left as it is.
func rerenderProse(t testing.TB, dir string, docs []*editions.ConfigDoc) {
	t.Helper()
	rerenderHeadlines(t, dir, docs, func(list string) map[string]float64 {
		hbm := map[string]float64{}
		for _, c := range headlineHBM.FindAllStringSubmatch(html.UnescapeString(list), -1) {
			if y, err := strconv.ParseFloat(c[4], 64); err == nil {
				hbm[c[1]] = y
			}
		}
		return hbm
	})
}

// rerenderHeadlines writes report.html's headline sentences from the
// configuration documents with the HBM ceilings (tok/s by configuration)
// that hbm gives for the list's current text. A report without the list
// is left as it is.
func rerenderHeadlines(t testing.TB, dir string, docs []*editions.ConfigDoc, hbm func(list string) map[string]float64) {
	t.Helper()
	p := filepath.Join(dir, editions.ReportHTML)
	b, err := os.ReadFile(p)
	if err != nil {
		return
	}
	s := string(b)
	loc := htmlHeadlineList.FindStringSubmatchIndex(s)
	if loc == nil {
		return
	}
	vals := make([]editions.ConfigDoc, len(docs))
	for i, d := range docs {
		vals[i] = *d
	}
	var items strings.Builder
	for _, h := range editions.Headlines(vals, hbm(s[loc[2]:loc[3]])) {
		items.WriteString("<li>" + html.EscapeString(h) + "</li>")
	}
	writeFile(t, dir, editions.ReportHTML, s[:loc[2]]+items.String()+s[loc[3]:])
}

// replaceMDTable replaces the first table under "## <title>" with table.
func replaceMDTable(s, title, table string) string {
	lines := strings.SplitAfter(s, "\n")
	i := 0
	for ; i < len(lines) && strings.TrimSpace(lines[i]) != "## "+title; i++ {
	}
	for ; i < len(lines) && !strings.HasPrefix(lines[i], "|"); i++ {
	}
	j := i
	for ; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
	}
	if i >= len(lines) {
		return s
	}
	return strings.Join(lines[:i], "") + table + strings.Join(lines[j:], "")
}

// fixObsFloat formats an observation with decimals places, or its status.
func fixObsFloat(o editions.Obs[float64], decimals int) string {
	if !o.Ok() {
		return o.Status
	}
	return fmt.Sprintf("%.*f", decimals, o.Value)
}
