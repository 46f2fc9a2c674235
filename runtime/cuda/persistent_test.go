//go:build cuda

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/plan"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// setTuning sets the backend's tuning for the rest of the test.
func setTuning(t testing.TB, tn tuning) {
	t.Helper()
	set := func(tn tuning) {
		if err := testBE.o.do(func() error { testBE.tune = tn; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	set(tn)
	t.Cleanup(func() { set(tuning{}) })
}

// persistentTunings are the program layouts the tests and the benchmark
// run: regridded with prefetch, without prefetch, and with every launch's
// own grid. (The build follows the expert scheme.)
var persistentTunings = []struct {
	name string
	tn   tuning
}{
	{"persistent", tuning{}},
	{"noprefetch", tuning{noPrefetch: true}},
	{"grids", tuning{keepGrids: true}},
}

// TestPersistentBuilds: each layout of the persistent program
// (persistentTunings), in the build of each expert scheme, gives the op-by-op path's bits: logits at every
// step, tokens and cache counters, on both tiny models, both schemes and
// every executor, with and without EOS suppression.
func TestPersistentBuilds(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			art := testArtifact(t, arch, scheme)
			for _, ex := range executor.Names() {
				for k, pt := range persistentTunings {
					name := fmt.Sprintf("%s/%s/%s/%s", arch, scheme, ex, pt.name)
					t.Run(name, func(t *testing.T) {
						suppress := k%2 == 0
						req := engine.Request{Prompt: promptIDs("One launch per step."), Tokens: 20, SuppressEOS: suppress, LogitSteps: 20}
						o := engine.LoadOptions{Executor: ex, StepMode: engine.StepOps}
						want, wantC := generateMode(t, art, o, req, engine.StepOps)
						setTuning(t, pt.tn)
						o.StepMode = engine.StepPersistent
						got, gotC := generateMode(t, art, o, req, engine.StepPersistent)
						sameResult(t, "op by op", got, want)
						if gotC != wantC {
							t.Fatalf("cache hits/misses/h2d %v, op by op %v", gotC, wantC)
						}
					})
				}
			}
		}
	}
}

// TestPersistentRefusesPartial: persistent steps need full residency.
func TestPersistentRefusesPartial(t *testing.T) {
	art := testArtifact(t, "olmoe-tiny", qpack.SchemeInt4)
	cfg, err := art.Config()
	if err != nil {
		t.Fatal(err)
	}
	_, err = engine.Load(testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", Capacity: cfg.TopK + 2, StepMode: engine.StepPersistent})
	if err == nil || !strings.Contains(err.Error(), "needs full residency") {
		t.Fatalf("err %v, want a refusal naming full residency", err)
	}
}

// BenchmarkDecodeModes times single-request greedy decode at full
// residency in graph-full steps (with programmatic dependent launch, and
// without: graph-full-nopdl; with the L2 prefetch branch: graph-full-l2,
// and its variants: normal eviction priority, other budgets and grids, an
// empty branch) and in each build of the persistent kernel,
// on the artifacts named by HORIZON_BENCH_ARTIFACTS (directories separated
// by ':'; skipped when unset), and checks that every mode gives the tokens
// graph-full gives. It reports decode tok/s (the engine's DecodeTokS) as
// the metric; run it with -benchtime=1x.
func BenchmarkDecodeModes(b *testing.B) {
	dirs := os.Getenv("HORIZON_BENCH_ARTIFACTS")
	if dirs == "" {
		b.Skip("HORIZON_BENCH_ARTIFACTS not set")
	}
	tokens := 256
	for _, dir := range strings.Split(dirs, ":") {
		art, err := qpack.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		req := engine.Request{Prompt: promptIDs("The quick brown fox jumps over the lazy dog."), Tokens: tokens, SuppressEOS: true}
		var ref []int
		modes := decodeModes()
		for _, m := range modes {
			b.Run(filepath.Base(dir)+"/"+m.name, func(b *testing.B) {
				withTuning(b, testBE, m.tn)
				l, err := engine.Load(testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", StepMode: m.step})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				if _, err := l.Generate(req); err != nil { // warm-up
					b.Fatal(err)
				}
				var rate float64
				for range b.N {
					res, err := l.Generate(req)
					if err != nil {
						b.Fatal(err)
					}
					rate = res.DecodeTokS()
					if ref == nil {
						ref = res.Tokens
					} else if m.tn.otherTokens() {
						// other bits (experts_tc.cu) or a diagnostic that
						// changes tokens: say how far the tokens agree
						same := 0
						for same < len(ref) && same < len(res.Tokens) && res.Tokens[same] == ref[same] {
							same++
						}
						b.Logf("%s: the first %d of %d tokens agree with graph-full's", m.name, same, len(ref))
					} else if !reflect.DeepEqual(res.Tokens, ref) {
						b.Fatalf("tokens differ from graph-full's")
					}
				}
				b.ReportMetric(rate, "tok/s")
			})
		}
		// One traced run per layout: the per-instruction table of its last
		// step, written to HORIZON_PROFILE_DIR when set.
		for _, pt := range persistentTunings {
			n := pt.name
			if n == "grids" {
				continue
			}
			b.Run(filepath.Base(dir)+"/"+n+"-traced", func(b *testing.B) {
				tn := pt.tn
				tn.traceUnits = true
				withTuning(b, testBE, tn)
				l, err := engine.Load(testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", StepMode: engine.StepPersistent})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				var res engine.Result
				for range b.N {
					if res, err = l.Generate(req); err != nil {
						b.Fatal(err)
					}
				}
				if !reflect.DeepEqual(res.Tokens, ref) {
					b.Fatalf("traced tokens differ from graph-full's")
				}
				table, err := testBE.persistentProfile(hbmBytesPerSecond)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.DecodeTokS(), "tok/s")
				b.Log("\n" + table)
				if out := os.Getenv("HORIZON_PROFILE_DIR"); out != "" {
					if err := os.WriteFile(filepath.Join(out, filepath.Base(dir)+"-"+n+".md"), []byte(table), 0o644); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// decodeMode is a way to issue decode steps that BenchmarkDecodeModes and
// BenchmarkDecodeDepth time: a step mode and a backend tuning.
type decodeMode struct {
	name string
	step string
	tn   tuning
}

// otherTokens: a tuning whose tokens may differ from graph-full's by
// design (other bits, tcDecode) or as a diagnostic (attWindow,
// attAliasKV), so the benchmarks report agreement instead of failing.
func (t tuning) otherTokens() bool { return t.tcDecode != 0 || t.attWindow != 0 || t.attAliasKV }

// decodeModes lists the modes BenchmarkDecodeModes runs, graph-full (the
// default tuning) first, then graph-full variants and every persistent
// build. Names are unique; BenchmarkDecodeDepth picks from them.
func decodeModes() []decodeMode {
	l2 := func(t tuning) tuning { t.l2Prefetch = true; return t }
	modes := []decodeMode{{"graph-full", engine.StepGraphFull, tuning{}}, {"graph-full-nopdl", engine.StepGraphFull, tuning{noPDL: true}},
		{"graph-full-fused", engine.StepGraphFull, tuning{fusedMoE: true}},
		{"graph-full-fused-nopf", engine.StepGraphFull, tuning{fusedMoE: true, moeFlags: moeNoPrefetch}},
		{"graph-full-route", engine.StepGraphFull, tuning{routeFused: true}},
		{"graph-full-shared3", engine.StepGraphFull, tuning{noSharedDown: true}},
		{"graph-full-nosfork", engine.StepGraphFull, tuning{noSharedFork: true}},
		{"graph-full-sforkgum1", engine.StepGraphFull, tuning{sharedForkGUM: true}},
		{"graph-full-sforkgum2", engine.StepGraphFull, tuning{sharedForkNR: 2, sharedForkGUM: true}},
		{"graph-full-sfork2", engine.StepGraphFull, tuning{sharedForkNR: 2}},
		{"graph-full-nosfork-nopdl", engine.StepGraphFull, tuning{noSharedFork: true, noPDL: true}},
		// With a timeline of the last step's instructions (BenchmarkDecodeDepth reports it).
		{"graph-full-nopdl-tl", engine.StepGraphFull, tuning{noPDL: true, timeline: true}},
		{"graph-full-nosfork-nopdl-tl", engine.StepGraphFull, tuning{noSharedFork: true, noPDL: true, timeline: true}},
		{"graph-full-ropeqkv", engine.StepGraphFull, tuning{ropeInQKV: true}},
		{"graph-full-attpf32", engine.StepGraphFull, tuning{attPrefetch: 32}},
		{"graph-full-attpf64", engine.StepGraphFull, tuning{attPrefetch: 64}},
		{"graph-full-attpf128", engine.StepGraphFull, tuning{attPrefetch: 128}},
		{"graph-full-attpf256", engine.StepGraphFull, tuning{attPrefetch: 256}},
		{"graph-full-nosfork-attpf128", engine.StepGraphFull, tuning{noSharedFork: true, attPrefetch: 128}},
		{"graph-full-attpipe", engine.StepGraphFull, tuning{attPipe: true}},
		{"graph-full-attpipe-pf128", engine.StepGraphFull, tuning{attPipe: true, attPrefetch: 128}},
		{"graph-full-nosfork-attpipe", engine.StepGraphFull, tuning{noSharedFork: true, attPipe: true}},
		{"graph-full-attring", engine.StepGraphFull, tuning{attRing: true}},
		// Diagnostics that change tokens (attention over the first 64
		// positions at any depth; BenchmarkDecodeDepth skips their token check).
		{"graph-full-attw64", engine.StepGraphFull, tuning{attWindow: 64}},
		{"graph-full-nosfork-attw64", engine.StepGraphFull, tuning{noSharedFork: true, attWindow: 64}},
		// With the attention trace (BenchmarkDecodeDepth reports it).
		{"graph-full-atr", engine.StepGraphFull, tuning{attTrace: true}},
		{"graph-full-nosfork-atr", engine.StepGraphFull, tuning{noSharedFork: true, attTrace: true}},
		{"graph-full-nopdl-atr", engine.StepGraphFull, tuning{noPDL: true, attTrace: true}},
		{"graph-full-nosfork-nopdl-atr", engine.StepGraphFull, tuning{noSharedFork: true, noPDL: true, attTrace: true}},
		// The attention's preferred shared-memory carveout at 100% and 50%.
		{"graph-full-co100", engine.StepGraphFull, tuning{attCarveout: 100}},
		{"graph-full-co50", engine.StepGraphFull, tuning{attCarveout: 50}},
		{"graph-full-atr-co100", engine.StepGraphFull, tuning{attCarveout: 100, attTrace: true}},
		{"graph-full-b3", engine.StepGraphFull, tuning{attB3: true}},
		{"graph-full-nosfork-b3", engine.StepGraphFull, tuning{noSharedFork: true, attB3: true}},
		// The attention's K/V loads at the normal L2 priority (the default
		// streams them since session 29; session 29's call 2 ran the
		// streaming build as -attcs modes over this one), and the
		// diagnostic that aliases every layer's attention reads to layer 0's
		// cache.
		{"graph-full-noattcs", engine.StepGraphFull, tuning{noAttStream: true}},
		{"graph-full-nosfork-noattcs", engine.StepGraphFull, tuning{noSharedFork: true, noAttStream: true}},
		{"graph-full-alias", engine.StepGraphFull, tuning{attAliasKV: true}},
		{"graph-full-nosfork-alias", engine.StepGraphFull, tuning{noSharedFork: true, attAliasKV: true}},
		{"graph-full-attw2048", engine.StepGraphFull, tuning{attWindow: 2048}},
		{"graph-full-nosfork-attw2048", engine.StepGraphFull, tuning{noSharedFork: true, attWindow: 2048}},
		{"graph-full-attw4096", engine.StepGraphFull, tuning{attWindow: 4096}},
		{"graph-full-nosfork-attw4096", engine.StepGraphFull, tuning{noSharedFork: true, attWindow: 4096}},
		{"graph-full-sfempty", engine.StepGraphFull, tuning{sharedForkEmpty: true}},
		{"graph-full-sfempty-atr", engine.StepGraphFull, tuning{sharedForkEmpty: true, attTrace: true}},
		{"graph-full-fence1", engine.StepGraphFull, tuning{attFence: 1}},
		{"graph-full-fence2", engine.StepGraphFull, tuning{attFence: 2}},
		{"graph-full-nosfork-fence1", engine.StepGraphFull, tuning{noSharedFork: true, attFence: 1}},
		{"graph-full-nosfork-attring", engine.StepGraphFull, tuning{noSharedFork: true, attRing: true}},
		{"graph-full-routein", engine.StepGraphFull, tuning{routeIn: true}},
		{"graph-full-routein-wait", engine.StepGraphFull, tuning{routeIn: true, routeInWait: true}},
		{"graph-full-late", engine.StepGraphFull, tuning{downLate: true}},
		{"graph-full-attnin", engine.StepGraphFull, tuning{attnIn: true}},
		{"graph-full-downg", engine.StepGraphFull, tuning{downGlobal: true}},
		{"graph-full-f16r1", engine.StepGraphFull, tuning{f16NR: 1}},
		{"graph-full-f16r4", engine.StepGraphFull, tuning{f16NR: 4}},
		{"graph-full-downg-f16r1", engine.StepGraphFull, tuning{downGlobal: true, f16NR: 1}},
		{"graph-full-l2", engine.StepGraphFull, l2(tuning{})},
		{"graph-full-l2normal", engine.StepGraphFull, l2(tuning{l2Normal: true})},
		{"graph-full-l2-12m", engine.StepGraphFull, l2(tuning{l2Budget: 12 << 20})},
		{"graph-full-l2-40m", engine.StepGraphFull, l2(tuning{l2Budget: 40 << 20})},
		{"graph-full-l2-grid4", engine.StepGraphFull, l2(tuning{l2Grid: 4})},
		{"graph-full-l2-grid132", engine.StepGraphFull, l2(tuning{l2Grid: 132})},
		{"graph-full-l2-empty", engine.StepGraphFull, l2(tuning{l2Empty: true})},
		{"graph-full-wpf8k", engine.StepGraphFull, tuning{waitPrefetch: 8 << 10}},
		{"graph-full-wpf32k", engine.StepGraphFull, tuning{waitPrefetch: 32 << 10}},
		{"graph-full-wpf128k", engine.StepGraphFull, tuning{waitPrefetch: 128 << 10}},
		{"graph-full-tc4", engine.StepGraphFull, tuning{tcDecode: 1}},
		{"graph-full-tc8", engine.StepGraphFull, tuning{tcDecode: 2}},
		{"graph-full-tca4", engine.StepGraphFull, tuning{tcDecode: 3}}}
	for _, pt := range persistentTunings {
		modes = append(modes, decodeMode{pt.name, engine.StepPersistent, pt.tn})
	}
	return modes
}

// hbmBytesPerSecond is the H200's measured HBM bandwidth the issues use
// (../shared/GPU-NOTES.md): 4.26 TB/s.
const hbmBytesPerSecond = 4.26e12

// BenchmarkDecodeDepth times single-request greedy decode (128 tokens)
// after prompts of the depths in HORIZON_BENCH_DEPTHS (comma-separated,
// default 32,512,1900), in the decode modes HORIZON_BENCH_MODES names
// (comma-separated names from decodeModes, BenchmarkDecodeModes' list;
// default graph-full,persistent), on the artifacts of
// HORIZON_BENCH_ARTIFACTS (skipped when unset), and checks that every mode
// gives the same tokens at each depth (but the tcDecode modes, whose bits
// differ). The KV cache is sized to the deepest request when that is
// beyond the default. HORIZON_BENCH_KV names the KV-cache element types to
// run (comma-separated, default fp32); the persistent kernel takes only
// fp32, so fp16 skips persistent modes. HORIZON_BENCH_PREFILL (token,
// batched; default auto) picks the depth prompt's prefill. The prompt is
// the bytes of a fixed sentence repeated to the depth; its prefill is not
// in the decode rate (the engine's DecodeTokS). HORIZON_BENCH_TOKENS is how
// many tokens each request decodes (default 128); with -test.v each
// request logs its decode window on the host's clock (the format of
// nvidia-smi's timestamps), so that clock and power samples taken beside
// it can be cut to the decode. Run it with -benchtime=1x, for example:
//
//	HORIZON_BENCH_ARTIFACTS=/dev/shm/qwen HORIZON_BENCH_DEPTHS=1,2048,8064 HORIZON_BENCH_KV=fp16 \
//	  HORIZON_BENCH_PREFILL=batched HORIZON_BENCH_MODES=graph-full,graph-full-nosfork \
//	  ./cuda.test -test.run '^$' -test.bench BenchmarkDecodeDepth -test.benchtime 1x
func BenchmarkDecodeDepth(b *testing.B) {
	dirs := os.Getenv("HORIZON_BENCH_ARTIFACTS")
	if dirs == "" {
		b.Skip("HORIZON_BENCH_ARTIFACTS not set")
	}
	depths := benchDepths(b, []int{32, 512, 1900})
	kvs := []string{"fp32"}
	if s := os.Getenv("HORIZON_BENCH_KV"); s != "" {
		kvs = strings.Split(s, ",")
	}
	modes, err := pickDecodeModes(os.Getenv("HORIZON_BENCH_MODES"), "graph-full,persistent")
	if err != nil {
		b.Fatalf("HORIZON_BENCH_MODES: %v", err)
	}
	prefill := os.Getenv("HORIZON_BENCH_PREFILL")
	tokens := 128
	if s := os.Getenv("HORIZON_BENCH_TOKENS"); s != "" {
		if tokens, err = strconv.Atoi(s); err != nil || tokens < 1 {
			b.Fatalf("HORIZON_BENCH_TOKENS: %q is not a positive token count", s)
		}
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 1+slices.Max(depths)/45)
	for _, dir := range strings.Split(dirs, ":") {
		art, err := qpack.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		for _, kv := range kvs {
			for _, m := range modes {
				if kv != "fp32" && m.step == engine.StepPersistent {
					continue // the persistent kernel reads an FP32 cache only
				}
				b.Run(fmt.Sprintf("%s/%s/kv-%s", filepath.Base(dir), m.name, kv), func(b *testing.B) {
					withTuning(b, testBE, m.tn)
					// The KV cache holds the deepest request (beyond the default
					// when asked; the model's context still bounds it).
					maxSeq := max(engine.DefaultMaxSeq, slices.Max(depths)+tokens)
					l, err := engine.Load(testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", StepMode: m.step, MaxSeq: maxSeq, KV: kv, Prefill: prefill})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					warm := engine.Request{Prompt: promptIDs(text[:32]), Tokens: 16, SuppressEOS: true}
					if _, err := l.Generate(warm); err != nil {
						b.Fatal(err)
					}
					for _, d := range depths {
						b.Run(fmt.Sprintf("depth-%d", d), func(b *testing.B) {
							req := engine.Request{Prompt: promptIDs(text[:d]), Tokens: tokens, SuppressEOS: true}
							var res engine.Result
							for range b.N {
								if res, err = l.Generate(req); err != nil {
									b.Fatal(err)
								}
								end := time.Now()
								const stamp = "2006/01/02 15:04:05.000"
								b.Logf("decode window %s .. %s (%d tokens)", end.Add(-time.Duration(res.DecodeSeconds*float64(time.Second))).Format(stamp), end.Format(stamp), len(res.Tokens))
							}
							key := fmt.Sprintf("%s/%s/%d", filepath.Base(dir), kv, d)
							if !m.tn.otherTokens() {
								if ref, ok := depthTokens[key]; ok && !reflect.DeepEqual(ref, res.Tokens) {
									b.Fatalf("%s tokens differ from %s's at depth %d (kv %s)", m.name, depthModeOf[key], d, kv)
								}
								if _, ok := depthTokens[key]; !ok {
									depthTokens[key] = res.Tokens
									depthModeOf[key] = m.name
								}
							}
							if m.tn.timeline {
								reportTimeline(b)
							}
							if m.tn.attTrace {
								reportAttTrace(b)
							}
							b.ReportMetric(res.DecodeTokS(), "tok/s")
							b.ReportMetric(float64(d)/res.TTFTSeconds, "ttft-prompt-tok/s")
						})
					}
				})
			}
		}
	}
}

// pickDecodeModes returns the decodeModes named in the comma-separated list
// (def when list is empty), in the list's order.
func pickDecodeModes(list, def string) ([]decodeMode, error) {
	if list == "" {
		list = def
	}
	all := decodeModes()
	var out []decodeMode
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(m decodeMode) bool { return m.name == name })
		if i < 0 {
			names := make([]string, len(all))
			for k, m := range all {
				names[k] = m.name
			}
			return nil, fmt.Errorf("%q is not a decode mode (one of %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// depthTokens holds BenchmarkDecodeDepth's first tokens by artifact, KV
// type and depth, and depthModeOf the mode that gave them.
var (
	depthTokens = map[string][]int{}
	depthModeOf = map[string]string{}
)

// benchDepths is HORIZON_BENCH_DEPTHS (comma-separated positive depths), or
// def when it is not set.
func benchDepths(b *testing.B, def []int) []int {
	s := os.Getenv("HORIZON_BENCH_DEPTHS")
	if s == "" {
		return def
	}
	var depths []int
	for _, f := range strings.Split(s, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 1 {
			b.Fatalf("HORIZON_BENCH_DEPTHS: %q is not a positive depth", f)
		}
		depths = append(depths, d)
	}
	return depths
}

// reportAttTrace reports the attention trace of the last decode step
// (tuning.attTrace), summed over its layers: the launches' spans from the
// first block's residency to the last block's end (att-span-us) and from
// the first start to the last end (att-run-us), and the mean block's run
// (att-block-us); the spread of the blocks' starts (att-start-spread-us:
// a second wave starts late) and of their ends (att-end-spread-us); the
// blocks that became resident only after another block of their launch had
// ended (att-late), the most blocks of one launch on one SM (att-max-sm)
// and the mean count of SMs a launch ran on (att-sms); and the µs between
// one layer's attention and the next's, summed (att-between-us: the rest of
// the layers).
func reportAttTrace(b *testing.B) {
	b.Helper()
	launches, _ := readAttTraceNow(b)
	var span, run, blk, ss, es, sms float64
	late, maxSM := 0, 0
	for _, a := range launches {
		span, run, blk = span+a.span, run+a.run, blk+a.blockMean
		ss, es, sms = ss+a.startSpread, es+a.endSpread, sms+float64(a.sms)
		late, maxSM = late+a.late, max(maxSM, a.maxPerSM)
	}
	b.ReportMetric(span, "att-span-us")
	b.ReportMetric(run, "att-run-us")
	b.ReportMetric(blk, "att-block-us")
	b.ReportMetric(ss, "att-start-spread-us")
	b.ReportMetric(es, "att-end-spread-us")
	b.ReportMetric(float64(late), "att-late")
	b.ReportMetric(float64(maxSM), "att-max-sm")
	b.ReportMetric(attBetween(launches), "att-between-us")
	if len(launches) > 0 {
		b.ReportMetric(sms/float64(len(launches)), "att-sms")
	}
}

// reportTimeline reports the instruction timeline of the last decode step
// (tuning.timeline): per instruction kind, the µs its instructions took
// (from the end of the one before), and for the layers whose shared expert
// ran on the branch, the mean µs from attn-out's end to the branch's end
// (branch-us), to the routed experts' end (main-us), and by how much the
// branch ended after them (join-wait-us).
func reportTimeline(b *testing.B) {
	spans := readTimeline(b)
	sums := map[plan.Op]float64{}
	var order []plan.Op
	attnOut, experts := map[int]float64{}, map[int]float64{}
	var branch, main, wait float64
	forks := 0
	for _, sp := range spans {
		if _, ok := sums[sp.op]; !ok {
			order = append(order, sp.op)
		}
		sums[sp.op] += sp.took
		switch sp.op {
		case plan.OpAttnOut:
			attnOut[sp.layer] = sp.end
		case plan.OpRoutedExperts:
			experts[sp.layer] = sp.end
		case plan.OpSharedExpert:
			if sp.branchFork {
				a, e := attnOut[sp.layer], experts[sp.layer]
				branch += sp.branchEnd - a
				main += e - a
				wait += max(0, sp.branchEnd-e)
				forks++
			}
		}
	}
	for _, op := range order {
		b.ReportMetric(sums[op], op.String()+"-us")
	}
	b.ReportMetric(spans[len(spans)-1].end, "body-us")
	if forks > 0 {
		b.ReportMetric(branch/float64(forks), "branch-us")
		b.ReportMetric(main/float64(forks), "main-us")
		b.ReportMetric(wait/float64(forks), "join-wait-us")
	}
}

// readTimeline reads the one live stepper's timeline (tuning.timeline)
// after its last step.
func readTimeline(tb testing.TB) []instrSpan {
	tb.Helper()
	be := testBE
	var spans []instrSpan
	err := be.o.do(func() error {
		if len(be.timelines) != 1 {
			return fmt.Errorf("%d live timelines, want 1", len(be.timelines))
		}
		if err := be.compute.Synchronize(); err != nil {
			return err
		}
		var err error
		spans, err = be.timelines[0].read()
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return spans
}
