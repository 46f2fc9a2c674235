package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

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
	writeFile(t, dir, editions.ReportMD, "# fixture edition\n\nTwo tiny configurations on the CPU.\n")
	writeFile(t, dir, editions.ReportHTML, "<!doctype html><title>fixture</title><p>Two tiny configurations.</p>\n")
	reaggregate(t, dir)
	rehash(t, dir)
	// Everything written must satisfy the writer's own schema check.
	for _, id := range configIDs(t, dir) {
		mustValidate(t, dir, editions.ConfigPath(id))
	}
	mustValidate(t, dir, editions.ClaimsFile)
	mustValidate(t, dir, editions.ManifestFile)
	return dir
}

// fixRaw builds one worker's raw record with deterministic tokens, timings
// and counters.
func fixRaw(k *contracts.Contract, ci int, id string, capacity int, executor string, block int, contractHash string) *editions.RawRecord {
	seed := int64(924)
	regime := "partial"
	if capacity == fixModel.ExpertsPerLayer {
		regime = "full"
	}
	model := fixModel
	model.EOSTokenIDs = []int{fixEOS}
	r := &editions.RawRecord{
		Schema: editions.SchemaRaw, Version: editions.Version, Edition: fixEdition,
		ConfigID: id, Block: block,
		Contract:   editions.ContractRef{ID: k.ID, SHA256: contractHash},
		StartedAt:  "2026-01-01T00:00:00Z",
		FinishedAt: "2026-01-01T00:00:01Z",
		Environment: editions.Environment{Device: "cpu", Hostname: "fixture", OS: "linux/amd64 6.8", CPU: "UNKNOWN", CPUs: 2, Threads: 2,
			GPU: editions.Unsupported, Driver: editions.Unsupported, Build: fixBuild},
		Checkpoint: editions.Checkpoint{Kind: "synthetic", Arch: "olmoe-tiny", Seed: &seed,
			SHA256: strings.Repeat("ab", 32)},
		Artifact: editions.ArtifactRef{SHA256: strings.Repeat("cd", 32), ExpertFormat: "qpack-int4-b256-v1", RecordBytes: fixRecord,
			OriginalDType: "BF16", ScaleDType: "FP16", NonRoutedDType: "FP16", ActivationDType: "FP32", AccumulationDType: "FP32"},
		Setup: editions.Setup{Model: model, Capacity: capacity, Spares: 2, Staging: 2, Executor: executor,
			Placement: "canonical", Policy: "lru", Regime: regime},
		Preparation: editions.Preparation{Seconds: 0.25 + float64(block)/64, AuthorityBytes: int64(fixModel.Layers * fixModel.ExpertsPerLayer * fixRecord),
			H2DBytes: int64(fixModel.Layers * capacity * fixRecord), H2DCopies: int64(fixModel.Layers * capacity)},
		Warmup: editions.Warmup{Excluded: true, PromptID: k.Warmup.Prompt.ID, N: fixWarmupN, TokenIDs: fixTokens(7, fixWarmupN), Seconds: 0.0125},
		Observations: editions.WorkerObservations{
			VRAMPeakBytes:         editions.UnsupportedObs[int64](),
			VRAMProcessPeakBytes:  editions.UnsupportedObs[int64](),
			RSSPeakBytes:          editions.Observed(int64(50_000_000 + ci*1_000_000 + block*12_345)),
			H2DBandwidthBytesPerS: editions.UnsupportedObs[float64](),
		},
	}
	for i, p := range k.Prompts {
		ns := make([]int64, fixN)
		ns[0] = 40_000_000 + int64(ci+1)*1_234_567 + int64(block)*777_777 + int64(i)*333_331
		for j := 1; j < fixN; j++ {
			ns[j] = ns[j-1] + 9_000_000 + int64((j*7919+i*104729+block*1299709+ci*15485863)%3_000_000)
		}
		layerMisses := make([]int64, fixModel.Layers)
		var misses int64
		if capacity < fixModel.ExpertsPerLayer {
			for l := range layerMisses {
				layerMisses[l] = int64(3 + i + l + block)
				misses += layerMisses[l]
			}
		}
		lookups := int64(fixModel.Layers * fixModel.TopK * (fixN + 2))
		promptIDs := fixTokens(20+i, 5-3*i)
		r.Requests = append(r.Requests, editions.Request{
			Index: i, PromptID: p.ID, PromptTokens: len(promptIDs), PromptTokenIDs: promptIDs, N: fixN,
			TokenIDs: fixTokens(i, fixN), TokenNs: ns,
			TTFTSeconds:    float64(ns[0]) / 1e9,
			DecodeSeconds:  float64(ns[fixN-1]-ns[0]) / 1e9,
			RuntimeSeconds: float64(ns[fixN-1]) / 1e9,
			Cache: editions.RequestCache{
				Hits: lookups - misses, Misses: misses, Evictions: misses,
				H2DBytes: misses * fixRecord, H2DCopies: misses,
				D2HExpertBytes:   editions.Observed[int64](0),
				Writebacks:       editions.Observed[int64](0),
				AuthorityWrites:  editions.Observed[int64](0),
				RequestHashBytes: editions.Observed[int64](0),
				// This build has no artifact-read counter: UNKNOWN, never 0.
				RequestArtifactReads: editions.UnknownObs[int64](),
				LayerMisses:          layerMisses,
			},
		})
	}
	return r
}

// fixTokens is a deterministic greedy stream for prompt i; it never holds
// the EOS id.
func fixTokens(i, n int) []int {
	out := make([]int, n)
	for j := range out {
		out[j] = (i*97 + j*31 + 5) % 500
	}
	return out
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

// reaggregate rewrites each configuration document's aggregates from the
// raw records present (creating the document from the first raw record when
// it does not exist yet), then every claim from its sources. It is the
// fixture's own writer: the formulas of DESIGN section 8, written again.
func reaggregate(t testing.TB, dir string) {
	t.Helper()
	for _, id := range configIDs(t, dir) {
		paths := rawPathsOf(t, dir, id)
		if len(paths) == 0 {
			continue
		}
		var raws []*editions.RawRecord
		for _, p := range paths {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
			if err != nil {
				t.Fatal(err)
			}
			r, err := LoadRaw(b)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			raws = append(raws, r)
		}
		agg := fixAggregate(id, raws, paths)
		cp := editions.ConfigPath(id)
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(cp))); err != nil {
			writeDoc(t, dir, cp, agg)
			continue
		}
		// Keep whatever else the document holds; replace what is derived.
		edit(t, dir, cp, func(doc map[string]any) {
			fresh := toTree(t, agg).(map[string]any)
			for _, k := range []string{"metrics", "invariants", "requests", "blocks", "workers"} {
				doc[k] = fresh[k]
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, editions.ClaimsFile)); err != nil {
		writeDoc(t, dir, editions.ClaimsFile, fixClaims(t, dir))
		return
	}
	edit(t, dir, editions.ClaimsFile, func(doc map[string]any) {
		claims, _ := doc["claims"].([]any)
		for _, c := range claims {
			c := c.(map[string]any)
			src := obj(t, c, "source")
			v := sourceValue(t, dir, src)
			src["value"] = v
			dec := numInt(t, c["decimals"])
			c["value"] = fixRound(v, int(dec))
			for _, k := range []string{"numerator", "denominator"} {
				if ref, ok := c[k].(map[string]any); ok {
					ref["value"] = sourceValue(t, dir, ref)
				}
			}
		}
	})
}

func sourceValue(t testing.TB, dir string, ref map[string]any) float64 {
	t.Helper()
	tree := readTree(t, dir, ref["file"].(string))
	x, err := resolve(tree, ref["pointer"].(string))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := x.(json.Number)
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fixRound rounds half away from zero through the shortest decimal digits,
// with big-number-free arithmetic of its own.
func fixRound(x float64, d int) float64 {
	s := strconv.FormatFloat(math.Abs(x), 'f', -1, 64)
	ip, fp, _ := strings.Cut(s, ".")
	if len(fp) <= d {
		return x
	}
	n, _ := strconv.ParseUint(ip+fp[:d], 10, 64)
	if fp[d] >= '5' {
		n++
	}
	r, _ := strconv.ParseFloat(strconv.FormatUint(n, 10)+"e-"+strconv.Itoa(d), 64)
	return math.Copysign(r, x)
}

func fixAggregate(id string, raws []*editions.RawRecord, paths []string) *editions.ConfigDoc {
	r0 := raws[0]
	d := &editions.ConfigDoc{
		Schema: editions.SchemaConfig, Version: editions.Version, ID: id,
		Device: r0.Environment.Device, Model: r0.Setup.Model, Checkpoint: r0.Checkpoint, Artifact: r0.Artifact,
		ExpertFormat: r0.Artifact.ExpertFormat, Capacity: r0.Setup.Capacity, ExpertsPerLayer: r0.Setup.Model.ExpertsPerLayer,
		Executor: r0.Setup.Executor, Placement: r0.Setup.Placement, Policy: r0.Setup.Policy, Regime: r0.Setup.Regime,
		Blocks: len(raws), Workers: paths,
	}
	mx := &d.Metrics
	var ttft float64
	var spread []float64
	obsMax := func(get func(*editions.RawRecord) editions.Obs[int64]) editions.Obs[int64] {
		out := editions.Observed[int64](math.MinInt64)
		for _, r := range raws {
			o := get(r)
			switch {
			case o.Status == editions.Unknown || out.Status == editions.Unknown:
				out = editions.UnknownObs[int64]()
			case o.Status == editions.Unsupported || out.Status == editions.Unsupported:
				out = editions.UnsupportedObs[int64]()
			case o.Value > out.Value:
				out = o
			}
		}
		return out
	}
	inv := map[string]editions.Obs[int64]{}
	for _, r := range raws {
		var bt int64
		var bs float64
		for _, q := range r.Requests {
			d.Requests++
			mx.DecodeTokens += int64(q.N - 1)
			mx.DecodeSeconds += q.DecodeSeconds
			mx.OutputTokens += int64(q.N)
			mx.RuntimeSeconds += q.RuntimeSeconds
			ttft += q.TTFTSeconds
			mx.H2DBytes += q.Cache.H2DBytes
			mx.Hits += q.Cache.Hits
			mx.Misses += q.Cache.Misses
			bt += int64(q.N - 1)
			bs += q.DecodeSeconds
			for name, o := range map[string]editions.Obs[int64]{
				"d2h": q.Cache.D2HExpertBytes, "wb": q.Cache.Writebacks, "aw": q.Cache.AuthorityWrites,
				"hash": q.Cache.RequestHashBytes, "reads": q.Cache.RequestArtifactReads,
			} {
				cur, seen := inv[name]
				switch {
				case !seen:
					inv[name] = o
				case cur.Status == editions.Unknown || o.Status == editions.Unknown:
					inv[name] = editions.UnknownObs[int64]()
				case cur.Status != "" || o.Status != "":
					inv[name] = editions.UnsupportedObs[int64]()
				default:
					inv[name] = editions.Observed(cur.Value + o.Value)
				}
			}
		}
		spread = append(spread, float64(bt)/bs)
	}
	mx.PooledDecodeTokS = float64(mx.DecodeTokens) / mx.DecodeSeconds
	mx.OverallOutputTokS = float64(mx.OutputTokens) / mx.RuntimeSeconds
	mx.TTFTMeanS = ttft / float64(d.Requests)
	mx.ResponseMeanS = mx.RuntimeSeconds / float64(d.Requests)
	mx.VRAMPeakBytes = obsMax(func(r *editions.RawRecord) editions.Obs[int64] { return r.Observations.VRAMPeakBytes })
	mx.VRAMProcessPeakBytes = obsMax(func(r *editions.RawRecord) editions.Obs[int64] { return r.Observations.VRAMProcessPeakBytes })
	mx.RSSPeakBytes = obsMax(func(r *editions.RawRecord) editions.Obs[int64] { return r.Observations.RSSPeakBytes })
	sort.Float64s(spread)
	mx.BlockSpread = editions.Spread{Min: spread[0], Max: spread[len(spread)-1]}
	d.Invariants = editions.Invariants{D2HExpertBytes: inv["d2h"], Writebacks: inv["wb"], AuthorityWrites: inv["aw"],
		RequestHashBytes: inv["hash"], RequestArtifactReads: inv["reads"]}
	return d
}

// fixClaims writes four claims per configuration from the configuration
// documents on disk.
func fixClaims(t testing.TB, dir string) *editions.ClaimsDoc {
	t.Helper()
	doc := &editions.ClaimsDoc{Schema: editions.SchemaClaims, Version: editions.Version, Edition: fixEdition}
	for _, id := range configIDs(t, dir) {
		f := editions.ConfigPath(id)
		ref := func(p string) *editions.SourceRef {
			r := &editions.SourceRef{File: f, Pointer: p}
			r.Value = sourceValue(t, dir, map[string]any{"file": f, "pointer": p})
			return r
		}
		add := func(name, statement, unit, p string, dec int, num, den string) {
			c := editions.Claim{ID: id + "." + name, Statement: statement, Unit: unit, Decimals: dec,
				Source: *ref(p), Evidence: "E1", Validation: "valid", Publication: "internal", Reproduction: "not_attempted"}
			c.Value = fixRound(c.Source.Value, dec)
			if num != "" {
				c.Numerator, c.Denominator = ref(num), ref(den)
			}
			doc.Claims = append(doc.Claims, c)
		}
		add("pooled_decode_tok_s", "Pooled decode rate of "+id, "tokens/s", "/metrics/pooled_decode_tok_s", 2, "/metrics/decode_tokens", "/metrics/decode_seconds")
		add("overall_output_tok_s", "Overall output rate of "+id, "tokens/s", "/metrics/overall_output_tok_s", 2, "/metrics/output_tokens", "/metrics/runtime_seconds")
		add("ttft_mean_s", "Mean time to first token of "+id, "s", "/metrics/ttft_mean_s", 4, "", "")
		add("rss_peak_bytes", "Peak worker RSS of "+id, "bytes", "/metrics/rss_peak_bytes", 0, "", "")
		add("d2h_expert_bytes", "Expert D2H bytes during measured requests of "+id, "bytes", "/invariants/d2h_expert_bytes", 0, "", "")
	}
	return doc
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
