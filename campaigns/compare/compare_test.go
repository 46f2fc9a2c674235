package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

var update = flag.Bool("update", false, "rewrite the golden comparisons in testdata/")

const committed = "../../editions/"

func load(t *testing.T, dirs ...string) []*Edition {
	t.Helper()
	var eds []*Edition
	for _, d := range dirs {
		e, err := Load(d)
		if err != nil {
			t.Fatal(err)
		}
		eds = append(eds, e)
	}
	return eds
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./campaigns/compare/ -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run go test ./campaigns/compare/ -update after checking the change):\n%s", path, got)
	}
}

// TestCommittedGolden compares the committed editions in every format.
func TestCommittedGolden(t *testing.T) {
	cases := []struct {
		name    string
		dirs    []string
		formats []string
	}{
		{"full-vs-ablation", []string{committed + "full-residency-v1", committed + "residency-ablation"}, []string{"md", "csv", "json"}},
		{"smoke-cpu-self", []string{committed + "smoke-cpu", committed + "smoke-cpu"}, []string{"md"}},
		{"three-editions", []string{committed + "full-residency-v1", committed + "residency-ablation", committed + "smoke-cpu"}, []string{"md"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Compare(load(t, c.dirs...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range c.formats {
				rep, ok := ReporterFor(f)
				if !ok {
					t.Fatalf("no reporter for %q", f)
				}
				var b bytes.Buffer
				if err := rep(&b, res); err != nil {
					t.Fatal(err)
				}
				golden(t, c.name+"."+f, b.Bytes())
			}
		})
	}
}

// TestFullVsAblation holds the numbers the golden shows to what the
// editions say: the ablation holds graph-segmented at full residency, so
// it is slower with the same tokens, and nothing else differs.
func TestFullVsAblation(t *testing.T) {
	res, err := Compare(load(t, committed+"full-residency-v1", committed+"residency-ablation"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || len(res.Unmatched) != 12 {
		t.Fatalf("%d rows, %d unmatched; want 2 and 12", len(res.Rows), len(res.Unmatched))
	}
	for _, r := range res.Rows {
		if r.Verdict != Slower || r.Tokens != TokensIdentical || r.Compared != 36 || r.Differ != 0 {
			t.Errorf("%s: verdict %q, tokens %q (%d/%d); want slower, identical 36/0", r.Config, r.Verdict, r.Tokens, r.Compared, r.Differ)
		}
		if q := Ratio(r.Decode); !q.Ok() || q.Value >= 1 {
			t.Errorf("%s: decode ratio %v, want below 1", r.Config, q)
		}
	}
	var lines []string
	for _, d := range res.Differences {
		lines = append(lines, d.Line())
	}
	// both editions come from one build (3809794): the step mode is the difference
	if len(lines) != 2 {
		t.Errorf("differences %q, want the two step modes only", lines)
	}
	for _, want := range []string{"olmoe-0924-c64-grouped step_mode: graph-full (full-residency-v1) vs graph-segmented (residency-ablation)"} {
		if !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("differences %q lack %q", lines, want)
		}
	}
}

// TestSelf: an edition against itself is within noise everywhere, with
// identical tokens and no differences.
func TestSelf(t *testing.T) {
	for _, name := range []string{"smoke-cpu", "full-residency-v1"} {
		t.Run(name, func(t *testing.T) {
			res, err := Compare(load(t, committed+name, committed+name), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) == 0 || len(res.Differences) != 0 || len(res.Unmatched) != 0 {
				t.Fatalf("%d rows, differences %v, unmatched %v", len(res.Rows), res.Differences, res.Unmatched)
			}
			for _, r := range res.Rows {
				if r.Verdict != WithinNoise || r.Tokens != TokensIdentical || r.Differ != 0 || r.Compared == 0 {
					t.Errorf("%s: verdict %q, tokens %q (%d of %d differ)", r.Config, r.Verdict, r.Tokens, r.Differ, r.Compared)
				}
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	unknown := Range{Status: editions.Unknown}
	cases := []struct {
		name string
		a, b Range
		want string
	}{
		{"above", Range{Min: 10, Max: 12}, Range{Min: 12.5, Max: 13}, Faster},
		{"below", Range{Min: 10, Max: 12}, Range{Min: 8, Max: 9.9}, Slower},
		{"overlap", Range{Min: 10, Max: 12}, Range{Min: 11, Max: 14}, WithinNoise},
		{"touching is noise", Range{Min: 10, Max: 12}, Range{Min: 12, Max: 14}, WithinNoise},
		{"inside", Range{Min: 10, Max: 12}, Range{Min: 10.5, Max: 11}, WithinNoise},
		{"one block points differ", Range{Min: 10, Max: 10}, Range{Min: 10.01, Max: 10.01}, Faster},
		{"unknown range", Range{Min: 10, Max: 12}, unknown, WithinNoise},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Verdict(c.a, c.b); got != c.want {
				t.Errorf("Verdict(%v, %v) = %q, want %q", c.a, c.b, got, c.want)
			}
		})
	}
}

// TestRatio: an observation that was not made stays one; it is never 0.
func TestRatio(t *testing.T) {
	obs := func(v float64) Metric { return Metric{Value: editions.Observed(v)} }
	st := func(s string) Metric { return Metric{Value: editions.Obs[float64]{Status: s}} }
	cases := []struct {
		name string
		a, b Metric
		want string
	}{
		{"numbers", obs(4), obs(5), "1.250"},
		{"unknown B", obs(4), st(editions.Unknown), editions.Unknown},
		{"unknown A", st(editions.Unknown), obs(4), editions.Unknown},
		{"both unsupported", st(editions.Unsupported), st(editions.Unsupported), editions.Unsupported},
		{"one unsupported", st(editions.Unsupported), obs(4), editions.Unknown},
		{"zero baseline", obs(0), obs(4), editions.Unknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := obsText(Ratio([2]Metric{c.a, c.b}), 3); got != c.want {
				t.Errorf("ratio %s, want %s", got, c.want)
			}
		})
	}
}

// fixture copies the documents compare reads of a committed edition into
// a temporary directory, then lets edit rewrite each JSON document (as a
// generic value) by its slash path.
func fixture(t *testing.T, edition string, edit func(path string, doc map[string]any)) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), edition)
	src := committed + edition
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		if rel != editions.ManifestFile && !strings.HasPrefix(rel, "configs/") && !strings.HasPrefix(rel, "raw/") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit != nil {
			var doc map[string]any
			if err := json.Unmarshal(b, &doc); err != nil {
				return err
			}
			edit(rel, doc)
			if b, err = json.Marshal(doc); err != nil {
				return err
			}
		}
		out := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

const otherSHA = "0000000000000000000000000000000000000000000000000000000000000000"

func otherContract(path string, doc map[string]any) {
	if strings.HasPrefix(path, "raw/") {
		doc["contract"].(map[string]any)["sha256"] = otherSHA
	}
}

// TestContracts: editions of different contracts are refused unless
// AnyContract, which lists the contract among the differences.
func TestContracts(t *testing.T) {
	other := fixture(t, "smoke-cpu", otherContract)
	eds := load(t, committed+"smoke-cpu", other)
	_, err := Compare(eds, Options{})
	if !errors.Is(err, ErrContract) || !strings.Contains(err.Error(), otherSHA) || !strings.Contains(err.Error(), "--any-contract") {
		t.Fatalf("err %v, want ErrContract naming both hashes and --any-contract", err)
	}
	res, err := Compare(eds, Options{AnyContract: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Differences) != 1 || res.Differences[0].Field != "contract" || !strings.Contains(res.Differences[0].ValueB, otherSHA) {
		t.Fatalf("differences %+v, want the contract alone", res.Differences)
	}
}

// TestTokensAndUnknownVRAM: a changed token shows as differ, an UNKNOWN
// VRAM observation stays UNKNOWN in value, spread and ratio.
func TestTokensAndUnknownVRAM(t *testing.T) {
	changed := fixture(t, "full-residency-v1", func(path string, doc map[string]any) {
		switch {
		case path == "configs/qwen15-c60-grouped.json":
			doc["metrics"].(map[string]any)["vram_peak_bytes"] = editions.Unknown
		case path == "raw/qwen15-c60-grouped/block-2.json":
			doc["observations"].(map[string]any)["vram_peak_bytes"] = editions.Unknown
		case path == "raw/olmoe-0924-c64-grouped/block-3.json":
			q := doc["requests"].([]any)[4].(map[string]any)
			ids := q["token_ids"].([]any)
			ids[len(ids)-1] = ids[len(ids)-1].(float64) + 1
		}
	})
	res, err := Compare(load(t, committed+"full-residency-v1", changed), Options{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Row{}
	for _, r := range res.Rows {
		byID[r.Config] = r
	}
	if r := byID["olmoe-0924-c64-grouped"]; r.Tokens != TokensDiffer || r.Differ != 1 || r.Compared != 36 {
		t.Errorf("olmoe tokens %q, %d of %d differ; want differ, 1 of 36", r.Tokens, r.Differ, r.Compared)
	}
	r := byID["qwen15-c60-grouped"]
	if r.Tokens != TokensIdentical {
		t.Errorf("qwen tokens %q", r.Tokens)
	}
	got := []string{obsText(r.VRAM[1].Value, 2), rangeText(r.VRAM[1].Blocks, 2), obsText(Ratio(r.VRAM), 3)}
	if strings.Join(got, ",") != "UNKNOWN,UNKNOWN,UNKNOWN" {
		t.Errorf("VRAM B value, spread, ratio = %v; want UNKNOWN throughout", got)
	}
	var b bytes.Buffer
	if err := JSON(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"vram_peak_gib_b": "UNKNOWN"`) || strings.Contains(b.String(), `"vram_peak_gib_b": 0`) {
		t.Errorf("json does not keep the VRAM UNKNOWN:\n%s", b.String())
	}
}

// TestNotEdition: a missing directory, a file and a directory without an
// edition's documents are ErrNotEdition.
func TestNotEdition(t *testing.T) {
	empty := t.TempDir()
	noConfigs := t.TempDir()
	if err := os.WriteFile(filepath.Join(noConfigs, editions.ManifestFile), []byte(`{"schema":"horizon.manifest","version":1,"edition":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dir, want string
	}{
		{"missing", filepath.Join(empty, "nope"), "no such directory"},
		{"a file", committed + "smoke-cpu/manifest.json", "not a directory"},
		{"no manifest", empty, "no manifest.json"},
		{"no configs", noConfigs, "no configs/*.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.dir)
			if !errors.Is(err, ErrNotEdition) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrNotEdition mentioning %q", err, c.want)
			}
		})
	}
	if _, ok := ReporterFor("html"); ok {
		t.Error("ReporterFor(html) answered")
	}
}

// TestKVDType: the KV cache element type is a declared setup field like
// the others: an edition whose records ran FP16 differs from one that ran
// FP32 (a record without kv_dtype reads as FP32).
func TestKVDType(t *testing.T) {
	changed := fixture(t, "full-residency-v1", func(path string, doc map[string]any) {
		if strings.HasPrefix(path, "raw/qwen15-c60-grouped/") {
			doc["artifact"].(map[string]any)["kv_dtype"] = editions.KVFP16
		}
	})
	res, err := Compare(load(t, committed+"full-residency-v1", changed), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range res.Differences {
		lines = append(lines, d.Line())
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "qwen15-c60-grouped kv_dtype: FP32 (full-residency-v1) vs FP16") {
		t.Fatalf("differences %q, want qwen15-c60-grouped's kv_dtype only", lines)
	}
}

// TestExpertActivationDType: the routed experts' activation dtype is a
// declared setup field like kv_dtype: an edition whose records ran FP16
// expert activations differs from one that ran FP32 (a record without
// expert_activation_dtype, as every FP32 record is, reads as FP32).
func TestExpertActivationDType(t *testing.T) {
	changed := fixture(t, "full-residency-v1", func(path string, doc map[string]any) {
		if strings.HasPrefix(path, "raw/qwen15-c60-grouped/") {
			doc["artifact"].(map[string]any)["expert_activation_dtype"] = editions.ExpertActFP16
		}
	})
	res, err := Compare(load(t, committed+"full-residency-v1", changed), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range res.Differences {
		lines = append(lines, d.Line())
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "qwen15-c60-grouped expert_activation_dtype: FP32 (full-residency-v1) vs FP16") {
		t.Fatalf("differences %q, want qwen15-c60-grouped's expert_activation_dtype only", lines)
	}
}

// TestDenseActivationDType: the dense projections' activation dtype is a
// declared setup field like expert_activation_dtype: an edition whose
// records ran FP16 dense activations differs from one that ran FP32 (a
// record without dense_activation_dtype, as every FP32 record is, reads as
// FP32), and only in that field.
func TestDenseActivationDType(t *testing.T) {
	changed := fixture(t, "full-residency-v1", func(path string, doc map[string]any) {
		if strings.HasPrefix(path, "raw/qwen15-c60-grouped/") {
			doc["artifact"].(map[string]any)["dense_activation_dtype"] = editions.ExpertActFP16
		}
	})
	res, err := Compare(load(t, committed+"full-residency-v1", changed), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range res.Differences {
		lines = append(lines, d.Line())
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "qwen15-c60-grouped dense_activation_dtype: FP32 (full-residency-v1) vs FP16") {
		t.Fatalf("differences %q, want qwen15-c60-grouped's dense_activation_dtype only", lines)
	}
}
