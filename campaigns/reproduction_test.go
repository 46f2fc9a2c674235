package campaigns_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/verifier"
)

// handRecord is a small raw record: two requests of three tokens.
func handRecord() *editions.RawRecord {
	req := func(i int, id string) editions.Request {
		return editions.Request{
			Index: i, PromptID: id, PromptTokens: 2, PromptTokenIDs: []int{5, 6 + i}, N: 3,
			TokenIDs: []int{10 + i, 11, 12}, TokenNs: []int64{100, 200, 300}, DecodeSeconds: 0.5,
			Cache: editions.RequestCache{Hits: 7, Misses: 3, Evictions: 1, H2DBytes: 300, H2DCopies: 3, LayerMisses: []int64{1, 2}},
		}
	}
	return &editions.RawRecord{
		ConfigID: "tiny-c6", Block: 1,
		Warmup:   editions.Warmup{Excluded: true, PromptID: "w", N: 2, TokenIDs: []int{1, 2}},
		Requests: []editions.Request{req(0, "p1"), req(1, "p2")},
	}
}

func TestCompareWorker(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(r *editions.RawRecord)
		warmup bool
		// want per request: prompt, tokens, counters identical, first token difference, counter names
		want [][5]any
	}{
		{"identical", func(*editions.RawRecord) {}, true,
			[][5]any{{true, true, true, -1, ""}, {true, true, true, -1, ""}}},
		{"token differs", func(r *editions.RawRecord) { r.Requests[1].TokenIDs[2] = 99 }, true,
			[][5]any{{true, true, true, -1, ""}, {true, false, true, 2, ""}}},
		{"token stream shorter", func(r *editions.RawRecord) { r.Requests[0].TokenIDs = r.Requests[0].TokenIDs[:2] }, true,
			[][5]any{{true, false, true, 2, ""}, {true, true, true, -1, ""}}},
		{"counter differs", func(r *editions.RawRecord) { r.Requests[0].Cache.Misses++; r.Requests[0].Cache.LayerMisses[1]++ }, true,
			[][5]any{{true, true, false, -1, "misses,layer_misses"}, {true, true, true, -1, ""}}},
		{"prefetch appears", func(r *editions.RawRecord) { r.Requests[1].Cache.Prefetch = &editions.RequestPrefetch{Issued: 1} }, true,
			[][5]any{{true, true, true, -1, ""}, {true, true, false, -1, "prefetch"}}},
		{"prompt differs", func(r *editions.RawRecord) { r.Requests[0].PromptTokenIDs = []int{5, 7} }, true,
			[][5]any{{false, true, true, -1, ""}, {true, true, true, -1, ""}}},
		{"warmup differs", func(r *editions.RawRecord) { r.Warmup.TokenIDs = []int{1, 3} }, false,
			[][5]any{{true, true, true, -1, ""}, {true, true, true, -1, ""}}},
		{"request missing", func(r *editions.RawRecord) { r.Requests = r.Requests[:1] }, true,
			[][5]any{{true, true, true, -1, ""}, {false, false, false, 0, strings.Join(editions.ReproCounters, ",")}}},
		{"timing differs (not compared)", func(r *editions.RawRecord) { r.Requests[0].DecodeSeconds = 9; r.Requests[0].TokenNs[2] = 9e9 }, true,
			[][5]any{{true, true, true, -1, ""}, {true, true, true, -1, ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig, rerun := handRecord(), handRecord()
			tc.edit(rerun)
			w := CompareWorker(orig, rerun)
			identical := tc.warmup
			if w.WarmupIdentical != tc.warmup {
				t.Errorf("warmup identical %v, want %v", w.WarmupIdentical, tc.warmup)
			}
			if len(w.Requests) != len(tc.want) {
				t.Fatalf("%d requests compared, want %d", len(w.Requests), len(tc.want))
			}
			for i, q := range w.Requests {
				got := [5]any{q.PromptIdentical, q.TokensIdentical, q.CountersIdentical, q.FirstTokenDifference, strings.Join(q.CounterDifferences, ",")}
				if got != tc.want[i] {
					t.Errorf("request %d: %v, want %v", i, got, tc.want[i])
				}
				identical = identical && q.PromptIdentical && q.TokensIdentical && q.CountersIdentical
			}
			if w.Identical != identical {
				t.Errorf("worker identical %v, want %v", w.Identical, identical)
			}
		})
	}
}

// The document pools decode over the rerun blocks only and states the
// ratio against the declared tolerance.
func TestReproductionDocument(t *testing.T) {
	o1, r1 := handRecord(), handRecord()
	o2, r2 := handRecord(), handRecord()
	o2.Block, r2.Block = 2, 2
	for i := range r1.Requests {
		r1.Requests[i].DecodeSeconds = 0.4 // 4 tokens / 0.8 s = 5 tok/s vs the edition's 4 tok/s
	}
	r2.Requests[0].TokenIDs[0] = 0
	other, otherRerun := handRecord(), handRecord()
	other.ConfigID, otherRerun.ConfigID = "tiny-c16", "tiny-c16"
	pairs := []ReproPair{{Original: o1, Rerun: r1}, {Original: o2, Rerun: r2}, {Original: other, Rerun: otherRerun}}
	for i := range pairs {
		p := &pairs[i]
		p.OriginalFile = editions.ReproFile{Path: editions.ReproOriginalPath(p.Original.ConfigID, p.Original.Block), SHA256: strings.Repeat("b", 64)}
		p.RerunFile = editions.ReproFile{Path: editions.ReproRerunPath(p.Rerun.ConfigID, p.Rerun.Block), SHA256: strings.Repeat("c", 64)}
	}
	r1.Environment = editions.Environment{Device: "cpu", CPUs: 1, Build: editions.ReadBuildInfo()}
	d, err := Reproduction("e", strings.Repeat("a", 64), "2026-01-01T00:00:00Z", 0.1, nil, pairs)
	if err != nil {
		t.Fatal(err)
	}
	if d.Identical || len(d.Workers) != 3 || len(d.Configurations) != 2 {
		t.Fatalf("identical %v, %d workers, %d configurations", d.Identical, len(d.Workers), len(d.Configurations))
	}
	c := d.Configurations[0]
	if c.ConfigID != "tiny-c6" || !slices.Equal(c.Blocks, []int{1, 2}) || c.Identical {
		t.Errorf("configuration 0: %+v", c)
	}
	// Edition: 8 tokens / 2 s = 4; rerun: 8 tokens / 1.8 s.
	if c.OriginalPooledDecodeTokS != 4 || c.RerunPooledDecodeTokS != 8/1.8 || c.SpeedRatio != (8/1.8)/4 || c.WithinTolerance {
		t.Errorf("speed: %+v", c)
	}
	if c2 := d.Configurations[1]; !c2.Identical || c2.SpeedRatio != 1 || !c2.WithinTolerance {
		t.Errorf("configuration 1: %+v", c2)
	}
	if diffs := Differences(d, 10); len(diffs) != 1 || !strings.Contains(diffs[0], "tiny-c6 block 2 request 0 (p1): tokens differ from index 0") {
		t.Errorf("differences %q", diffs)
	}
	if d.Environment.Device != "cpu" {
		t.Errorf("environment %+v, want the first rerun worker's", d.Environment)
	}
	if _, err := editions.Marshal(&d); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
}

func reproduceMini(t *testing.T, edition, out string, configs []string, blocks []int, force bool) (ReproduceResult, error) {
	t.Helper()
	return Reproduce(context.Background(), ReproduceOptions{Runtime: rt,
		Edition: edition, Configs: configs, Blocks: blocks, Out: out, Force: force, Launch: testLauncher,
		RunDir: newRunDir(t), Progress: &countingProgress{},
	})
}

// A mini edition reproduced on the same machine: identical tokens and
// counters, the directory laid out as documented, the verifier agreeing;
// a tampered record fails it.
func TestReproduceMiniEdition(t *testing.T) {
	tmp := t.TempDir()
	ed := filepath.Join(tmp, "editions", "mini")
	if _, _, err := runMini(t, ed, newRunDir(t), false, nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "repro")
	res, err := reproduceMini(t, ed, out, []string{"qwen2moe-tiny-c8"}, []int{2}, false)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Doc
	if !d.Identical || len(d.Workers) != 1 || d.Workers[0].ConfigID != "qwen2moe-tiny-c8" || d.Workers[0].Block != 2 {
		t.Fatalf("reproduction: identical %v, workers %+v", d.Identical, d.Workers)
	}
	for _, p := range []string{editions.ReproductionFile, editions.ReproOriginalPath("qwen2moe-tiny-c8", 2), editions.ReproRerunPath("qwen2moe-tiny-c8", 2)} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Error(err)
		}
	}
	orig, _ := os.ReadFile(filepath.Join(ed, editions.RawPath("qwen2moe-tiny-c8", 2)))
	cp, _ := os.ReadFile(filepath.Join(out, editions.ReproOriginalPath("qwen2moe-tiny-c8", 2)))
	if string(orig) != string(cp) {
		t.Error("the original copy is not the edition's record byte for byte")
	}

	rep, err := verifier.Verify(ed, verifier.Options{Reproduction: out, ContractFile: miniContract})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed() || !rep.Has(verifier.IDReproClaimReproduced) || !rep.Has(verifier.IDReproClaimNotRerun) {
		t.Fatalf("verify with the reproduction: %v", rep.Findings)
	}
	for _, f := range rep.Findings {
		if f.ID == verifier.IDReproClaimReproduced && !strings.HasPrefix(f.Pointer, "/claims/") {
			t.Errorf("claim verdict without a claim pointer: %+v", f)
		}
	}

	// A previous reproduction is replaced only with --force; anything else
	// is never replaced.
	if _, err := reproduceMini(t, ed, out, []string{"olmoe-tiny-c16"}, []int{1}, false); !errors.Is(err, ErrReproduceUsage) {
		t.Fatalf("over a previous reproduction without force: %v", err)
	}
	other := filepath.Join(tmp, "work")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("keep"), 0o644)
	if _, err := reproduceMini(t, ed, other, nil, []int{1}, true); !errors.Is(err, ErrReproduceUsage) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("over a directory of other work with force: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(other, "notes.txt")); string(b) != "keep" {
		t.Fatal("a refused reproduction touched the directory")
	}
	for name, tc := range map[string]struct {
		configs []string
		blocks  []int
	}{"unknown configuration": {[]string{"nope"}, nil}, "block out of range": {nil, []int{3}}} {
		if _, err := reproduceMini(t, ed, filepath.Join(tmp, "x"), tc.configs, tc.blocks, false); !errors.Is(err, ErrReproduceUsage) {
			t.Errorf("%s: %v, want ErrReproduceUsage", name, err)
		}
	}
	if _, err := reproduceMini(t, ed, filepath.Join(ed, "repro"), nil, []int{1}, false); !errors.Is(err, ErrReproduceUsage) {
		t.Errorf("--out inside the edition: %v", err)
	}

	// Tampering: a flipped verdict, and an original copy that is not the
	// edition's.
	tamper := func(t *testing.T, edit func(dir string)) *verifier.Report {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "repro")
		if err := os.CopyFS(dir, os.DirFS(out)); err != nil {
			t.Fatal(err)
		}
		edit(dir)
		rep, err := verifier.Verify(ed, verifier.Options{Reproduction: dir, ContractFile: miniContract})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	editDoc := func(dir string, f func(d *editions.ReproductionDoc)) {
		p := filepath.Join(dir, editions.ReproductionFile)
		b, _ := os.ReadFile(p)
		var d editions.ReproductionDoc
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		f(&d)
		if err := editions.WriteDoc(p, &d); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("flipped tokens_identical", func(t *testing.T) {
		rep := tamper(t, func(dir string) {
			editDoc(dir, func(d *editions.ReproductionDoc) { d.Workers[0].Requests[1].TokensIdentical = false })
		})
		if rep.Passed() || !rep.Has(verifier.IDReproComparison) {
			t.Fatalf("findings %v", rep.Findings)
		}
	})
	t.Run("original copy not the edition's", func(t *testing.T) {
		rep := tamper(t, func(dir string) {
			p := filepath.Join(dir, editions.ReproOriginalPath("qwen2moe-tiny-c8", 2))
			other, _ := os.ReadFile(filepath.Join(ed, editions.RawPath("qwen2moe-tiny-c8", 1)))
			os.WriteFile(p, other, 0o644)
			editDoc(dir, func(d *editions.ReproductionDoc) {
				d.Workers[0].Original.SHA256, d.Workers[0].Original.Bytes, _ = editions.HashFile(p)
			})
		})
		if rep.Passed() || !rep.Has(verifier.IDReproOriginal) {
			t.Fatalf("findings %v", rep.Findings)
		}
	})
}

// readEditionRecords reads an edition's raw records of one configuration,
// by block.
func readEditionRecords(t *testing.T, edition, config string, blocks ...int) []*editions.RawRecord {
	t.Helper()
	var out []*editions.RawRecord
	for _, b := range blocks {
		raw, err := os.ReadFile(filepath.Join(edition, editions.RawPath(config, b)))
		if err != nil {
			t.Fatal(err)
		}
		var r editions.RawRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, &r)
	}
	return out
}

// The per-prompt comparisons of a reproduction, on the committed prefill
// and depth smoke editions' records: a ratio per metric against the
// tolerance, UNKNOWN (never within) where a run did not observe it, and
// nothing under a contract without declared prompt lengths.
func TestPromptComparisons(t *testing.T) {
	type want struct {
		prefill, depths int     // prompts compared
		ratio           float64 // every observed ratio of the group edited; 1 elsewhere
		unknown         string  // "prefill": the prefill ratios are UNKNOWN
	}
	cases := []struct {
		name, edition string
		edit          func(r *editions.RawRecord)
		group         string // the metrics the edit changes: prefill_lengths or decode_depths
		want          want
	}{
		{"prefill identical", "../editions/prefill-smoke-cpu", func(*editions.RawRecord) {}, "", want{prefill: 3, ratio: 1}},
		{"prefill twice as slow", "../editions/prefill-smoke-cpu", func(r *editions.RawRecord) {
			for i := range r.Requests {
				r.Requests[i].PrefillSeconds.Value *= 2
			}
		}, "prefill_lengths", want{prefill: 3, ratio: 0.5}},
		{"prefill untimed", "../editions/prefill-smoke-cpu", func(r *editions.RawRecord) {
			for i := range r.Requests {
				u := editions.UnknownObs[float64]()
				r.Requests[i].PrefillSeconds = &u
			}
		}, "prefill_lengths", want{prefill: 3, unknown: "prefill"}},
		{"depth identical", "../editions/depth-smoke-cpu", func(*editions.RawRecord) {}, "", want{prefill: 3, depths: 3, ratio: 1}},
		{"depth decode twice as slow", "../editions/depth-smoke-cpu", func(r *editions.RawRecord) {
			for i := range r.Requests {
				r.Requests[i].DecodeSeconds *= 2
			}
		}, "decode_depths", want{prefill: 3, depths: 3, ratio: 0.5}},
		{"no declared lengths", "../editions/smoke-cpu", func(*editions.RawRecord) {}, "", want{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, k, _, err := LoadFrozen(filepath.Join(tc.edition, editions.CampaignFile), filepath.Join(tc.edition, editions.ContractFile))
			if err != nil {
				t.Fatal(err)
			}
			orig := readEditionRecords(t, tc.edition, "olmoe-tiny-c6", 1, 2)
			rerun := readEditionRecords(t, tc.edition, "olmoe-tiny-c6", 1, 2)
			for _, r := range rerun {
				tc.edit(r)
			}
			prefill, depths, err := PromptComparisons("olmoe-tiny-c6", k, 0.1, orig, rerun)
			if err != nil {
				t.Fatal(err)
			}
			if len(prefill) != tc.want.prefill || len(depths) != tc.want.depths {
				t.Fatalf("%d prefill and %d depth comparisons, want %d and %d", len(prefill), len(depths), tc.want.prefill, tc.want.depths)
			}
			for _, g := range []struct {
				group   string
				prompts []editions.ReproPrompt
				names   []string
			}{{"prefill_lengths", prefill, editions.ReproPrefillMetrics}, {"decode_depths", depths, editions.ReproDepthMetrics}} {
				for _, q := range g.prompts {
					if len(q.Metrics) != len(g.names) {
						t.Fatalf("%s %s: %d metrics, want %v", g.group, q.PromptID, len(q.Metrics), g.names)
					}
					for i, m := range q.Metrics {
						if m.Metric != g.names[i] {
							t.Errorf("%s %s metric %d is %s, want %s", g.group, q.PromptID, i, m.Metric, g.names[i])
						}
						if tc.want.unknown == "prefill" && g.group == "prefill_lengths" {
							if m.Ratio.Ok() || m.WithinTolerance || m.Rerun.Ok() {
								t.Errorf("%s %s %s: %+v, want an UNKNOWN rerun and ratio, not within", g.group, q.PromptID, m.Metric, m)
							}
							continue
						}
						ratio := 1.0
						if g.group == tc.group {
							ratio = tc.want.ratio
							if m.Metric == "tpot_s" {
								ratio = 1 / tc.want.ratio // seconds per token: the inverse
							}
						}
						if !m.Ratio.Ok() || math.Abs(m.Ratio.Value-ratio) > 1e-12 || m.WithinTolerance != editions.WithinTolerance(m.Ratio.Value, 0.1) {
							t.Errorf("%s %s %s: %+v, want ratio %g", g.group, q.PromptID, m.Metric, m, ratio)
						}
					}
				}
			}
		})
	}
}
