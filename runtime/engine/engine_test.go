package engine

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/engine/enginetest"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

var update = flag.Bool("update", false, "rewrite the golden token streams in testdata/golden")

// goldenPrompt is byte-level tokenised (synthetic tokenizer: id = byte).
const goldenPrompt = "Horizon keeps every expert in host memory."

func promptIDs(s string) []int {
	ids := make([]int, len(s))
	for i := range s {
		ids[i] = int(s[i])
	}
	return ids
}

var artifacts enginetest.Artifacts

// testArtifact is the shared per-binary artifact of arch with scheme.
func testArtifact(t testing.TB, arch string, scheme qpack.Scheme) *qpack.Artifact {
	t.Helper()
	return artifacts.Get(t, arch, scheme)
}

func TestMain(m *testing.M) {
	code := m.Run()
	artifacts.Cleanup()
	os.Exit(code)
}

func newEngine(t testing.TB, arch string, scheme qpack.Scheme) *Engine {
	t.Helper()
	return loadEngine(t, arch, scheme, LoadOptions{}).Engine
}

func loadEngine(t testing.TB, arch string, scheme qpack.Scheme, o LoadOptions) *Loaded {
	t.Helper()
	be := cpu.New(0)
	dev := cache.NewCPUDevice(be)
	l, err := Load(be, dev, testArtifact(t, arch, scheme), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

type golden struct {
	Arch   string `json:"arch"`
	Seed   int    `json:"seed"`
	Scheme string `json:"scheme"`
	Prompt string `json:"prompt"`
	Tokens []int  `json:"tokens"`
}

// TestGoldenStreams pins the greedy token streams of the tiny models. A
// change here is a numerics change: refresh with -update only on purpose.
func TestGoldenStreams(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			t.Run(fmt.Sprintf("%s/%s", arch, scheme), func(t *testing.T) {
				e := newEngine(t, arch, scheme)
				res, err := e.Generate(Request{Prompt: promptIDs(goldenPrompt), Tokens: 32, SuppressEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				got := golden{Arch: arch, Seed: 1, Scheme: string(scheme), Prompt: goldenPrompt, Tokens: res.Tokens}
				path := filepath.Join("testdata", "golden", fmt.Sprintf("%s-%s.json", arch, scheme))
				if *update {
					b, _ := json.MarshalIndent(got, "", "  ")
					if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				var want golden
				if err := json.Unmarshal(b, &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("greedy stream changed:\n got %v\nwant %v", got.Tokens, want.Tokens)
				}
			})
		}
	}
}

// TestRequestsAreIndependent: the KV cache is reused from position 0, so the
// same request twice (with another in between) gives the same stream.
func TestRequestsAreIndependent(t *testing.T) {
	e := newEngine(t, "qwen2moe-tiny", qpack.SchemeInt4)
	req := Request{Prompt: promptIDs("abc"), Tokens: 16, SuppressEOS: true}
	a, err := e.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Generate(Request{Prompt: promptIDs("something else entirely"), Tokens: 8, SuppressEOS: true}); err != nil {
		t.Fatal(err)
	}
	b, err := e.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Tokens, b.Tokens) {
		t.Fatalf("same request, different streams: %v vs %v", a.Tokens, b.Tokens)
	}
}

// TestEOSSuppression makes the model's natural first token an EOS id, then
// checks suppression masks it and stop-at-EOS stops on it.
func TestEOSSuppression(t *testing.T) {
	e := newEngine(t, "olmoe-tiny", qpack.SchemeInt4)
	prompt := promptIDs("The quick brown fox")
	free, err := e.Generate(Request{Prompt: prompt, Tokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	natural := free.Tokens[0]
	e.cfg.EOSTokenIDs = []int{natural}

	sup, err := e.Generate(Request{Prompt: prompt, Tokens: 8, SuppressEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sup.Tokens) != 8 {
		t.Fatalf("suppressed run produced %d tokens, want 8", len(sup.Tokens))
	}
	for i, tok := range sup.Tokens {
		if tok == natural {
			t.Fatalf("token %d is the suppressed EOS id %d", i, natural)
		}
	}
	stop, err := e.Generate(Request{Prompt: prompt, Tokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stop.Tokens, []int{natural}) {
		t.Fatalf("stop-at-EOS run produced %v, want just [%d]", stop.Tokens, natural)
	}
}

func TestTimingPoints(t *testing.T) {
	e := newEngine(t, "olmoe-tiny", qpack.SchemeInt4)
	res, err := e.Generate(Request{Prompt: promptIDs("timing"), Tokens: 12, SuppressEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TokenNs) != 12 {
		t.Fatalf("%d timestamps for 12 tokens", len(res.TokenNs))
	}
	for i := 1; i < len(res.TokenNs); i++ {
		if res.TokenNs[i] < res.TokenNs[i-1] {
			t.Fatalf("timestamps not monotonic at %d: %v", i, res.TokenNs)
		}
	}
	first, last := res.TokenNs[0], res.TokenNs[11]
	if res.TTFTSeconds != float64(first)/1e9 || res.RuntimeSeconds != float64(last)/1e9 || res.DecodeSeconds != float64(last-first)/1e9 {
		t.Fatalf("timings %+v disagree with the timestamps %v", res, res.TokenNs)
	}
	if res.TTFTSeconds <= 0 || res.DecodeSeconds <= 0 {
		t.Fatalf("non-positive timings: %+v", res)
	}
	// The CPU backend is synchronous: prefill is timed, and it ends before
	// the first token (which adds its selection).
	if !res.PrefillTimed || res.PrefillSeconds <= 0 || res.PrefillSeconds > res.TTFTSeconds {
		t.Fatalf("prefill %v s (timed %v), TTFT %v s: want 0 < prefill <= TTFT", res.PrefillSeconds, res.PrefillTimed, res.TTFTSeconds)
	}
}

func TestGenerateErrors(t *testing.T) {
	e := newEngine(t, "olmoe-tiny", qpack.SchemeInt4)
	cases := []struct {
		name string
		req  Request
	}{
		{"empty prompt", Request{Tokens: 4}},
		{"zero tokens", Request{Prompt: []int{1}}},
		{"token outside vocab", Request{Prompt: []int{512}, Tokens: 1}},
		{"negative token", Request{Prompt: []int{-1}, Tokens: 1}},
		{"too long", Request{Prompt: make([]int, e.MaxSeq()), Tokens: 2}},
		{"forced length differs", Request{Prompt: []int{1}, Tokens: 3, Forced: []int{1, 2}}},
		{"forced token outside vocab", Request{Prompt: []int{1}, Tokens: 2, Forced: []int{1, 512}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := e.Generate(c.req); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestFP16AndInt4AreClose: the INT4 path's first-step logits stay near the
// unquantised path's.
func TestFP16AndInt4AreClose(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		t.Run(arch, func(t *testing.T) {
			req := Request{Prompt: promptIDs(goldenPrompt), Tokens: 1, SuppressEOS: true, LogitSteps: 1}
			a, err := newEngine(t, arch, qpack.SchemeFP16).Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := newEngine(t, arch, qpack.SchemeInt4).Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			var worst, scale float64
			for i := range a.Logits[0] {
				worst = max(worst, abs(float64(a.Logits[0][i]-b.Logits[0][i])))
				scale = max(scale, abs(float64(a.Logits[0][i])))
			}
			t.Logf("%s: max |fp16 - int4| first-step logit %.4g (logit scale %.3g)", arch, worst, scale)
			if worst > 0.1*scale {
				t.Fatalf("INT4 logits differ from FP16 by %.4g, more than 10%% of the logit scale %.3g", worst, scale)
			}
		})
	}
}

// TestTeacherForcing: a request forced with the engine's own greedy
// tokens reproduces them, its logits and its greedy choices exactly; a
// request forced with other ids emits those, continues past an EOS id, and
// its step-i logits equal a free run's first-step logits on the prompt
// extended by the forced ids before i.
func TestTeacherForcing(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		t.Run(arch, func(t *testing.T) {
			e := newEngine(t, arch, qpack.SchemeInt4)
			p := promptIDs(goldenPrompt)
			free, err := e.Generate(Request{Prompt: p, Tokens: 6, SuppressEOS: true, LogitSteps: 6})
			if err != nil {
				t.Fatal(err)
			}
			same, err := e.Generate(Request{Prompt: p, Tokens: 6, SuppressEOS: true, LogitSteps: 6, Forced: free.Tokens})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(same.Tokens, free.Tokens) || !slices.Equal(same.Greedy, free.Tokens) {
				t.Fatalf("forced with its own tokens %v: emitted %v, greedy %v", free.Tokens, same.Tokens, same.Greedy)
			}
			for i := range free.Logits {
				if !slices.Equal(free.Logits[i], same.Logits[i]) {
					t.Fatalf("step %d: forced logits differ from the free run's", i)
				}
			}
			eos := e.Config().EOSTokenIDs[0]
			forced := []int{eos, 7, 11, 13}
			got, err := e.Generate(Request{Prompt: p, Tokens: len(forced), LogitSteps: len(forced), Forced: forced})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Tokens, forced) || len(got.Greedy) != len(forced) || len(got.Logits) != len(forced) {
				t.Fatalf("forced %v: emitted %v, %d greedy, %d logit rows", forced, got.Tokens, len(got.Greedy), len(got.Logits))
			}
			for i := range forced {
				ctx := append(slices.Clone(p), forced[:i]...)
				one, err := e.Generate(Request{Prompt: ctx, Tokens: 1, LogitSteps: 1})
				if err != nil {
					t.Fatal(err)
				}
				if got.Greedy[i] != one.Tokens[0] {
					t.Errorf("step %d: greedy %d, a free run on the extended prompt picks %d", i, got.Greedy[i], one.Tokens[0])
				}
				var worst float64
				for v := range one.Logits[0] {
					worst = max(worst, abs(float64(one.Logits[0][v]-got.Logits[i][v])))
				}
				if worst > 1e-4 {
					t.Errorf("step %d: forced logits differ from the extended prompt's by %.3g", i, worst)
				}
			}
		})
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// BenchmarkDecodeTiny measures tiny-model decode on the CPU backend.
func BenchmarkDecodeTiny(b *testing.B) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		b.Run(arch, func(b *testing.B) {
			e := newEngine(b, arch, qpack.SchemeInt4)
			req := Request{Prompt: promptIDs(goldenPrompt), Tokens: 64, SuppressEOS: true}
			var decoded, secs float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := e.Generate(req)
				if err != nil {
					b.Fatal(err)
				}
				decoded += float64(len(res.Tokens) - 1)
				secs += res.DecodeSeconds
			}
			b.ReportMetric(decoded/secs, "decode_tok/s")
		})
	}
}

// TestResidencyNeverChangesTokens: for every capacity from top-k to all
// experts and every executor, the greedy streams equal the full-residency
// stream; H2D bytes equal misses times the record size and no expert bytes
// ever go device-to-host.
func TestResidencyNeverChangesTokens(t *testing.T) {
	prompts := [][]int{promptIDs("Every expert stays in host memory."), promptIDs("Eviction discards.")}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		run := func(t *testing.T, o LoadOptions) [][]int {
			l := loadEngine(t, arch, qpack.SchemeInt4, o)
			var streams [][]int
			for _, p := range prompts {
				l.Cache.BeginRequest()
				res, err := l.Generate(Request{Prompt: p, Tokens: 24, SuppressEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				c, err := l.Cache.EndRequest()
				if err != nil {
					t.Fatal(err)
				}
				if c.H2DBytes != c.Misses*int64(art.Layout().Size) || c.H2DCopies != c.Misses {
					t.Fatalf("h2d %d bytes / %d copies for %d misses of %d-byte records", c.H2DBytes, c.H2DCopies, c.Misses, art.Layout().Size)
				}
				if c.D2HExpertBytes != 0 || c.Writebacks != 0 || c.AuthorityWrites != 0 || c.RequestHashBytes != 0 || c.RequestArtifactReads != 0 {
					t.Fatalf("contract counters not zero: %+v", c)
				}
				wantLookups := int64((len(p) + 23) * cfg.NumLayers * cfg.TopK)
				if c.Hits+c.Misses != wantLookups {
					t.Fatalf("hits %d + misses %d != %d routed lookups", c.Hits, c.Misses, wantLookups)
				}
				if o.Capacity == cfg.NumExperts && c.Misses != 0 {
					t.Fatalf("full residency missed %d times", c.Misses)
				}
				if o.Transport == cache.TransportRegistered && (c.StagingBytes != 0 || c.Misses == 0 || l.Cache.Options().Staging != 0) {
					t.Fatalf("registered transport: %d staging bytes for %d misses, %d staging buffers", c.StagingBytes, c.Misses, l.Cache.Options().Staging)
				}
				streams = append(streams, res.Tokens)
			}
			return streams
		}
		var full [][]int
		t.Run(arch+"/full", func(t *testing.T) { full = run(t, LoadOptions{Capacity: cfg.NumExperts}) })
		for _, ex := range executor.Names() {
			for c := cfg.TopK; c <= cfg.NumExperts; c++ {
				t.Run(fmt.Sprintf("%s/%s/c%d", arch, ex, c), func(t *testing.T) {
					t.Parallel()
					got := run(t, LoadOptions{Capacity: c, Executor: ex})
					if !reflect.DeepEqual(got, full) {
						t.Fatalf("capacity %d, %s: streams differ from full residency:\n got %v\nwant %v", c, ex, got, full)
					}
				})
			}
		}
		for _, o := range []LoadOptions{{Capacity: cfg.TopK + 1, Policy: "fifo"}, {Capacity: cfg.TopK + 3, Placement: "strided"},
			// The registered transport (misses copied from the page-locked
			// authority, no staging ring) at two capacities.
			{Capacity: cfg.TopK, Transport: cache.TransportRegistered},
			{Capacity: cfg.TopK + 2, Executor: "grouped-v1", Transport: cache.TransportRegistered},
		} {
			t.Run(fmt.Sprintf("%s/%s-%s-%s/c%d", arch, o.Policy, o.Placement, o.Transport, o.Capacity), func(t *testing.T) {
				if got := run(t, o); !reflect.DeepEqual(got, full) {
					t.Fatalf("%+v: streams differ from full residency", o)
				}
			})
		}
	}
}

func TestLoadRejectsCapacity(t *testing.T) {
	be := cpu.New(1)
	dev := cache.NewCPUDevice(be)
	defer dev.Close()
	for _, c := range []int{3, 17, -1} {
		if l, err := Load(be, dev, testArtifact(t, "olmoe-tiny", qpack.SchemeInt4), LoadOptions{Capacity: c}); err == nil {
			l.Close()
			t.Errorf("capacity %d accepted", c)
		}
	}
}
