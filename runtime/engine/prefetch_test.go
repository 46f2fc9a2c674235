package engine

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// prefetchRun is what one load produced over the test's prompts.
type prefetchRun struct {
	tokens [][]int
	logits [][][]float32
	total  cache.Counters // since Load, after the last request
}

// TestPrefetchNeverChangesTokens: next-layer prefetch is speculation on the
// side: with it on, every token and every logit of every step is
// bit-identical to the run with it off, at full and partial residency,
// for both tiny models and all three executors. The counters hold
// together: precision and recall in [0,1], used <= loaded <= issued,
// every copied record in h2d_bytes (misses plus prefetches), hits plus
// misses still the routed lookups, and one scored prediction per routed
// layer after the first per step.
func TestPrefetchNeverChangesTokens(t *testing.T) {
	const tokens = 16
	prompts := [][]int{promptIDs("Every expert stays in host memory."), promptIDs("Prefetch guesses.")}
	var loadedPartial, usedPartial int64
	// The counters are a function of the token stream (the Lease of a
	// routed group waits for the layer's prefetch): every executor gets
	// the same ones.
	counters := map[string]cache.Counters{}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		size := int64(art.Layout().Size)
		run := func(t *testing.T, o LoadOptions) prefetchRun {
			l := loadEngine(t, arch, qpack.SchemeInt4, o)
			want := o.Prefetch
			if want == "" {
				want = PrefetchOff
			}
			if got := l.PrefetchMode(); got != want {
				t.Fatalf("prefetch mode %q, asked for %q", got, o.Prefetch)
			}
			if l.StepMode() != StepOps {
				t.Fatalf("step mode %s on the CPU", l.StepMode())
			}
			var r prefetchRun
			for _, p := range prompts {
				l.Cache.BeginRequest()
				res, err := l.Generate(Request{Prompt: p, Tokens: tokens, SuppressEOS: true, LogitSteps: tokens})
				if err != nil {
					t.Fatal(err)
				}
				c, err := l.Cache.EndRequest()
				if err != nil {
					t.Fatal(err)
				}
				steps := int64(len(p) + tokens - 1)
				if got, want := c.Hits+c.Misses, steps*int64(cfg.NumLayers*cfg.TopK); got != want {
					t.Fatalf("hits %d + misses %d != %d routed lookups", c.Hits, c.Misses, want)
				}
				if c.H2DBytes != (c.Misses+c.PrefetchLoaded)*size || c.H2DCopies != c.Misses+c.PrefetchLoaded {
					t.Fatalf("h2d %d bytes / %d copies for %d misses + %d prefetched %d-byte records", c.H2DBytes, c.H2DCopies, c.Misses, c.PrefetchLoaded, size)
				}
				if c.PrefetchH2DBytes != c.PrefetchLoaded*size || c.PrefetchLoaded > c.PrefetchIssued {
					t.Fatalf("prefetch: %d issued, %d loaded, %d bytes", c.PrefetchIssued, c.PrefetchLoaded, c.PrefetchH2DBytes)
				}
				if c.D2HExpertBytes != 0 || c.Writebacks != 0 || c.AuthorityWrites != 0 || c.RequestHashBytes != 0 || c.RequestArtifactReads != 0 {
					t.Fatalf("contract counters not zero: %+v", c)
				}
				if o.Prefetch == PrefetchNextLayer {
					// Layer 0 has no previous layer to predict it from.
					groups := steps * int64(cfg.NumLayers-1)
					if c.PrefetchGroups != groups || c.PrefetchPredicted != groups*int64(cfg.TopK) || c.PrefetchRouted != groups*int64(cfg.TopK) {
						t.Fatalf("%d scored groups (%d predicted, %d routed experts), want %d groups of %d", c.PrefetchGroups, c.PrefetchPredicted, c.PrefetchRouted, groups, cfg.TopK)
					}
					for name, f := range map[string]func() (float64, bool){"precision": c.PrefetchPrecision, "recall": c.PrefetchRecall} {
						if v, ok := f(); !ok || v < 0 || v > 1 {
							t.Fatalf("%s %v (ok %v) outside [0,1]", name, v, ok)
						}
					}
				} else if c.PrefetchIssued != 0 || c.PrefetchGroups != 0 || c.PrefetchH2DBytes != 0 {
					t.Fatalf("prefetch off, yet prefetch counters moved: %+v", c)
				}
				r.tokens = append(r.tokens, res.Tokens)
				r.logits = append(r.logits, res.Logits)
			}
			r.total = l.Cache.Counters().Sub(l.Cache.Preparation())
			if k := r.total; k.PrefetchUsed > k.PrefetchLoaded || k.PrefetchLoaded > k.PrefetchIssued {
				t.Fatalf("since admission: %d used > %d loaded > %d issued", k.PrefetchUsed, k.PrefetchLoaded, k.PrefetchIssued)
			}
			return r
		}
		for _, ex := range executor.Names() {
			for _, c := range []int{cfg.TopK, cfg.TopK + 2, cfg.NumExperts / 2, cfg.NumExperts} {
				name := fmt.Sprintf("%s/%s/c%d", arch, ex, c)
				t.Run(name, func(t *testing.T) {
					off := run(t, LoadOptions{Capacity: c, Executor: ex})
					on := run(t, LoadOptions{Capacity: c, Executor: ex, Prefetch: PrefetchNextLayer})
					if !reflect.DeepEqual(on.tokens, off.tokens) {
						t.Fatalf("tokens differ with prefetch:\n  on %v\n off %v", on.tokens, off.tokens)
					}
					if !reflect.DeepEqual(on.logits, off.logits) {
						t.Fatal("logits differ with prefetch")
					}
					k := on.total
					p, _ := k.PrefetchPrecision()
					r, _ := k.PrefetchRecall()
					t.Logf("%s: prediction precision %.3f recall %.3f; prefetch issued %d loaded %d used %d; misses %d (off: %d)",
						name, p, r, k.PrefetchIssued, k.PrefetchLoaded, k.PrefetchUsed, k.Misses, off.total.Misses)
					if c == cfg.NumExperts && (k.PrefetchIssued != 0 || k.Misses != 0) {
						t.Fatalf("full residency: %d prefetches issued, %d misses", k.PrefetchIssued, k.Misses)
					}
					key := fmt.Sprintf("%s/c%d", arch, c)
					if first, ok := counters[key]; !ok {
						counters[key] = k
					} else if !reflect.DeepEqual(k, first) {
						t.Fatalf("counters differ from another executor's at the same capacity:\n%+v\n%+v", k, first)
					}
					if c == cfg.TopK {
						loadedPartial += k.PrefetchLoaded
						usedPartial += k.PrefetchUsed
					}
				})
			}
		}
		// Both transports and the other policy and placement.
		for _, o := range []LoadOptions{
			{Capacity: cfg.TopK + 1, Policy: "fifo"},
			{Capacity: cfg.TopK + 3, Placement: "strided"},
			{Capacity: cfg.TopK, Transport: cache.TransportRegistered},
		} {
			t.Run(fmt.Sprintf("%s/%s-%s-%s/c%d", arch, o.Policy, o.Placement, o.Transport, o.Capacity), func(t *testing.T) {
				off := run(t, o)
				o.Prefetch = PrefetchNextLayer
				on := run(t, o)
				if !reflect.DeepEqual(on.tokens, off.tokens) || !reflect.DeepEqual(on.logits, off.logits) {
					t.Fatalf("%+v: tokens or logits differ with prefetch", o)
				}
			})
		}
	}
	// Not vacuous: at capacity top-k the prefetches load experts and the
	// routing uses some of them.
	if loadedPartial == 0 || usedPartial == 0 {
		t.Fatalf("at capacity top-k prefetch loaded %d and used %d experts: the test exercised nothing", loadedPartial, usedPartial)
	}
}

// TestPrefetchOptions: prefetch runs op by op (auto gives StepOps); a
// graph step mode with prefetch and an unknown prefetch mode are clear
// errors.
func TestPrefetchOptions(t *testing.T) {
	for _, mode := range []string{"", "auto", StepOps} {
		l := loadEngine(t, "olmoe-tiny", qpack.SchemeInt4, LoadOptions{Capacity: 6, Prefetch: PrefetchNextLayer, StepMode: mode})
		if l.StepMode() != StepOps || l.PrefetchMode() != PrefetchNextLayer {
			t.Errorf("step mode %q: runs %s with prefetch %s", mode, l.StepMode(), l.PrefetchMode())
		}
	}
	if l := loadEngine(t, "olmoe-tiny", qpack.SchemeInt4, LoadOptions{Prefetch: PrefetchOff}); l.PrefetchMode() != PrefetchOff {
		t.Errorf("prefetch off runs %s", l.PrefetchMode())
	}
	cases := []struct {
		name string
		o    LoadOptions
		want string
	}{
		{"graph-full", LoadOptions{Prefetch: PrefetchNextLayer, StepMode: StepGraphFull}, "prefetch next-layer needs op-by-op steps"},
		{"graph-segmented", LoadOptions{Capacity: 6, Prefetch: PrefetchNextLayer, StepMode: StepGraphSegmented}, "captured device steps route on the device"},
		{"graph-wait", LoadOptions{Capacity: 6, Prefetch: PrefetchNextLayer, StepMode: StepGraphWait}, "step mode graph-wait was asked for"},
		{"unknown", LoadOptions{Prefetch: "previous-layer"}, `prefetch "previous-layer": want one of [off next-layer]`},
	}
	be := cpu.New(1)
	dev := cache.NewCPUDevice(be)
	defer dev.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Load(be, dev, testArtifact(t, "olmoe-tiny", qpack.SchemeInt4), c.o)
			if err == nil {
				l.Close()
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to mention %q", err, c.want)
			}
		})
	}
}
