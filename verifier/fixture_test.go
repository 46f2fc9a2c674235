package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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
