//go:build cuda

package cuda

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/plan"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestStepperMatchesOps: captured steps (graph-full and persistent at full
// residency, graph-wait and graph-segmented at partial) give the op-by-op path's bits: the same
// logits at every step and the same tokens, for every executor, both
// schemes, with and without EOS suppression, and the same cache counters.
func TestStepperMatchesOps(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			art := testArtifact(t, arch, scheme)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			for _, ex := range executor.Names() {
				for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
					for _, suppress := range []bool{true, false} {
						name := fmt.Sprintf("%s/%s/%s/c%d/suppress=%v", arch, scheme, ex, c, suppress)
						t.Run(name, func(t *testing.T) {
							req := engine.Request{Prompt: promptIDs("Graphs replay; the cache decides."), Tokens: 20,
								SuppressEOS: suppress, LogitSteps: 20}
							o := engine.LoadOptions{Executor: ex, Capacity: c}
							o.StepMode = engine.StepOps
							want, wantC := generateMode(t, art, o, req, engine.StepOps)
							modes := []string{engine.StepGraphFull, engine.StepPersistent}
							if c < cfg.NumExperts {
								modes = []string{engine.StepGraphSegmented, engine.StepGraphWait}
							}
							for i, mode := range modes {
								o.StepMode = mode
								if i == 0 {
									o.StepMode = "" // auto picks the first
								}
								got, gotC := generateMode(t, art, o, req, mode)
								if !reflect.DeepEqual(got.Tokens, want.Tokens) {
									t.Fatalf("%s: tokens %v, op by op %v", mode, got.Tokens, want.Tokens)
								}
								for s := range want.Logits {
									sameBits(t, fmt.Sprintf("%s step %d logits", mode, s), got.Logits[s], want.Logits[s])
								}
								if gotC != wantC {
									t.Fatalf("%s: cache hits/misses/h2d %v, op by op %v", mode, gotC, wantC)
								}
							}
						})
					}
				}
			}
		}
	}
}

// TestStepperTunings: the captured modes under each launch tuning that
// must not change a bit (all off by default) give op by op's bits, tokens
// and cache counters for both schemes, at full and partial residency, on
// both tiny models: the L2 prefetch branch (step_prefetch.go); the fused
// routed-experts kernel (fp16 records keep the two launches), with and
// without its L2 prefetch; router and route_step in one launch; the down
// kernel waiting before its first weight loads (the default loads them
// ahead of its dependency wait); the q/k norm, RoPE and KV append inside
// the attention launch (attention_in_step); the routing inside the
// routed experts' gate/up and down launches (experts_routed.cu), the down
// kernel routing itself or reading the table gate/up's block 0 wrote; a
// shared expert's SiLU·up, down and gated residual as three launches (the
// default is one shared_down_f16, which f16-r1 runs at 1 row a task); its
// gate|up|mix on a graph-full side branch (shared-fork), with either; and
// all of them together.
func TestStepperTunings(t *testing.T) {
	tunings := []struct {
		name string
		tn   tuning
	}{
		{"l2-prefetch", tuning{l2Prefetch: true}},
		{"fused", tuning{fusedMoE: true}},
		{"fused-nopf", tuning{fusedMoE: true, moeFlags: moeNoPrefetch}},
		{"route-fused", tuning{routeFused: true}},
		{"down-late", tuning{downLate: true}},
		{"attn-in", tuning{attnIn: true}},
		{"down-global", tuning{downGlobal: true}},
		{"f16-r1", tuning{f16NR: 1}},
		{"route-in", tuning{routeIn: true}},
		{"route-in-wait", tuning{routeIn: true, routeInWait: true}},
		{"route-in-p4", tuning{routeIn: true, gateUpNRP: 4}},
		{"wait-prefetch", tuning{waitPrefetch: 64 << 10}},
		{"shared-three", tuning{noSharedDown: true}},
		{"no-shared-fork", tuning{noSharedFork: true}},
		{"no-shared-fork-three", tuning{noSharedFork: true, noSharedDown: true}},
		{"shared-fork-gum", tuning{sharedForkGUM: true}},
		{"shared-fork-gum-three", tuning{sharedForkNR: 2, sharedForkGUM: true, noSharedDown: true}},
		{"rope-in-qkv", tuning{ropeInQKV: true}},
		{"att-prefetch", tuning{attPrefetch: 64}},
		{"att-pipe", tuning{attPipe: true}},
		{"att-pipe-prefetch", tuning{attPipe: true, attPrefetch: 16}},
		{"att-ring", tuning{attRing: true}},
		{"timeline", tuning{timeline: true}},
		{"timeline-nopdl", tuning{timeline: true, noPDL: true}},
		{"att-trace", tuning{attTrace: true}},
		{"att-carveout", tuning{attCarveout: 100}},
		{"att-b3", tuning{attB3: true}},
		{"no-att-stream", tuning{noAttStream: true}},
		{"att-fence", tuning{attFence: 3}},
		{"shared-fork-empty", tuning{sharedForkEmpty: true}},
		{"all", tuning{fusedMoE: true, routeFused: true, downLate: true, attnIn: true}},
	}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			art := testArtifact(t, arch, scheme)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
				req := engine.Request{Prompt: promptIDs("Fewer launches, the same bits."), Tokens: 16, SuppressEOS: true, LogitSteps: 16}
				o := engine.LoadOptions{Executor: "grouped-v1", Capacity: c, StepMode: engine.StepOps}
				var want engine.Result
				var wantC [3]int64
				for _, tc := range tunings {
					t.Run(fmt.Sprintf("%s/%s/c%d/%s", arch, scheme, c, tc.name), func(t *testing.T) {
						if want.Tokens == nil {
							o.StepMode = engine.StepOps
							want, wantC = generateMode(t, art, o, req, engine.StepOps)
						}
						withTuning(t, testBE, tc.tn)
						modes := []string{engine.StepGraphFull}
						if c < cfg.NumExperts {
							modes = []string{engine.StepGraphSegmented, engine.StepGraphWait}
						}
						for _, mode := range modes {
							o.StepMode = mode
							got, gotC := generateMode(t, art, o, req, mode)
							sameResult(t, mode+" with "+tc.name, got, want)
							if gotC != wantC {
								t.Fatalf("%s: cache hits/misses/h2d %v, op by op %v", mode, gotC, wantC)
							}
						}
					})
				}
			}
		}
	}
}

// generateMode loads with o, checks the step mode and runs req; it returns
// the result and the request's cache hits, misses and H2D bytes.
func generateMode(t *testing.T, art *qpack.Artifact, o engine.LoadOptions, req engine.Request, mode string) (engine.Result, [3]int64) {
	t.Helper()
	pdl0, op0, pf0, moe0, ri0, sf0, rq0, ap0, pp0 := pdlLaunches(t), pdlOpLaunches(t), prefetchLaunches(t), moeLaunches(t), routeInLaunches(t), sharedForks(t), ropeInQKVLaunches(t), attPrefetchLaunches(t), attPipeLaunches(t)
	ar0 := attRingLaunches(t)
	atr0, ab30, af0 := backendCount(t, func(b *Backend) int { return b.attTraceLaunches }),
		backendCount(t, func(b *Backend) int { return b.attB3Launches }), backendCount(t, func(b *Backend) int { return b.attFences })
	acs0 := backendCount(t, func(b *Backend) int { return b.attCsLaunches })
	l := loadEngine(t, art, o)
	if l.StepMode() != mode {
		t.Fatalf("step mode %s, want %s", l.StepMode(), mode)
	}
	res, err := l.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	// A batched prefill launches its kernels as programmatic dependent
	// launches (all but its first; tuning.noPrefillPDL: none), token at a
	// time never.
	var noPrefillPDL bool
	if err := testBE.o.do(func() error { noPrefillPDL = testBE.tune.noPrefillPDL; return nil }); err != nil {
		t.Fatal(err)
	}
	switch n := pdlOpLaunches(t) - op0; {
	case l.PrefillMode() == engine.PrefillBatched && !noPrefillPDL && len(req.Prompt) > 1:
		if n == 0 {
			t.Fatalf("%s: no programmatic dependent launch in its batched prefill", mode)
		}
	case l.PrefillMode() == engine.PrefillToken || noPrefillPDL:
		if n != 0 {
			t.Fatalf("%s, prefill %s (noPrefillPDL %v): %d programmatic dependent launches op by op", mode, l.PrefillMode(), noPrefillPDL, n)
		}
	}
	// The graph modes' captures launch their kernels as programmatic
	// dependent launches (all but each graph's first; tuning.noPDL: none);
	// op by op and the persistent kernel's one launch never do.
	var noPDL bool
	if err := testBE.o.do(func() error { noPDL = testBE.tune.noPDL; return nil }); err != nil {
		t.Fatal(err)
	}
	switch n := pdlLaunches(t) - pdl0; mode {
	case engine.StepGraphFull, engine.StepGraphSegmented, engine.StepGraphWait:
		if noPDL && n != 0 {
			t.Fatalf("%s with noPDL: %d programmatic dependent launches in its captured graphs", mode, n)
		}
		if !noPDL && n == 0 {
			t.Fatalf("%s: no programmatic dependent launch in its captured graphs", mode)
		}
	default:
		if n != 0 {
			t.Fatalf("%s: %d programmatic dependent launches", mode, n)
		}
	}
	// With tuning.l2Prefetch the same captures have an L2 prefetch branch
	// (step_prefetch.go); op by op and persistent steps never have one.
	var on bool
	if err := testBE.o.do(func() error { on = testBE.tune.l2Prefetch; return nil }); err != nil {
		t.Fatal(err)
	}
	switch n := prefetchLaunches(t) - pf0; {
	case on && (mode == engine.StepGraphFull || mode == engine.StepGraphSegmented || mode == engine.StepGraphWait):
		if n == 0 {
			t.Fatalf("%s: no L2 prefetch captured", mode)
		}
	case n != 0:
		t.Fatalf("%s: %d L2 prefetch launches (l2Prefetch %v)", mode, n, on)
	}
	// With tuning.fusedMoE the graph modes run a grouped-v1 int4 group as
	// one fused launch (fusedExperts); nothing else ever does.
	var fusedOn bool
	if err := testBE.o.do(func() error { fusedOn = testBE.tune.fusedMoE; return nil }); err != nil {
		t.Fatal(err)
	}
	graph := mode == engine.StepGraphFull || mode == engine.StepGraphSegmented || mode == engine.StepGraphWait
	fused := graph && fusedOn && o.Executor == "grouped-v1" && art.Scheme() == qpack.SchemeInt4
	switch n := moeLaunches(t) - moe0; {
	case fused && n == 0:
		t.Fatalf("%s: no fused routed-experts launch", mode)
	case !fused && n != 0:
		t.Fatalf("%s (%s, %s, fusedMoE %v): %d fused routed-experts launches", mode, o.Executor, art.Scheme(), fusedOn, n)
	}
	// With tuning.routeIn (and no other fusion of route or experts)
	// graph-full steps of grouped-v1 route inside the routed experts'
	// kernels; nothing else ever does.
	var tn tuning
	if err := testBE.o.do(func() error { tn = testBE.tune; return nil }); err != nil {
		t.Fatal(err)
	}
	routed := mode == engine.StepGraphFull && tn.routeIn && !tn.routeFused && !fused && o.Executor == "grouped-v1"
	switch n := routeInLaunches(t) - ri0; {
	case routed && n == 0:
		t.Fatalf("%s: no route-in expert launch", mode)
	case !routed && n != 0:
		t.Fatalf("%s (%s, routeIn %v): %d route-in expert launches", mode, o.Executor, tn.routeIn, n)
	}
	// Graph-full steps of a model with a shared expert fork it onto the
	// side branch unless tuning.noSharedFork; nothing else ever does.
	cfg, err := art.Config()
	if err != nil {
		t.Fatal(err)
	}
	forks := mode == engine.StepGraphFull && !tn.noSharedFork && cfg.HasSharedExpert()
	switch n := sharedForks(t) - sf0; {
	case forks && n == 0:
		t.Fatalf("%s: no shared-expert fork", mode)
	case !forks && n != 0:
		t.Fatalf("%s (noSharedFork %v): %d shared-expert forks", mode, tn.noSharedFork, n)
	}
	// With tuning.ropeInQKV the captured modes of a model without q/k norms
	// rotate in the q|k|v matvec (unless attention_in_step does it).
	ropes := graph && tn.ropeInQKV && !tn.attnIn && !cfg.HasQKNorm()
	switch n := ropeInQKVLaunches(t) - rq0; {
	case ropes && n == 0:
		t.Fatalf("%s: no q|k|v matvec with RoPE in its epilogue", mode)
	case !ropes && n != 0:
		t.Fatalf("%s (ropeInQKV %v, attnIn %v): %d q|k|v matvecs with RoPE", mode, tn.ropeInQKV, tn.attnIn, n)
	}
	// With tuning.attPrefetch the captured modes' attention prefetches
	// (attention_pf_step), unless attention_in_step runs instead; op by op
	// and persistent steps never do.
	apf := graph && tn.attPrefetch > 0 && !tn.attPipe && !tn.attRing && !tn.attnIn
	switch n := attPrefetchLaunches(t) - ap0; {
	case apf && n == 0:
		t.Fatalf("%s: no attention launch prefetched its K/V rows", mode)
	case (!graph || tn.attPrefetch == 0 || tn.attPipe || tn.attRing) && n != 0:
		t.Fatalf("%s (attPrefetch %d, attPipe %v): %d attention_pf_step launches", mode, tn.attPrefetch, tn.attPipe, n)
	}
	// With tuning.attPipe the same modes launch the pipelined attention,
	// with tuning.attRing (first) the ring.
	app := graph && tn.attPipe && !tn.attRing && !tn.attnIn
	switch n := attPipeLaunches(t) - pp0; {
	case app && n == 0:
		t.Fatalf("%s: no pipelined attention launch", mode)
	case (!graph || !tn.attPipe || tn.attRing) && n != 0:
		t.Fatalf("%s (attPipe %v, attRing %v): %d pipelined attention launches", mode, tn.attPipe, tn.attRing, n)
	}
	ring := graph && tn.attRing && !tn.attnIn
	switch n := attRingLaunches(t) - ar0; {
	case ring && n == 0:
		t.Fatalf("%s: no ring attention launch", mode)
	case !ring && n != 0:
		t.Fatalf("%s (attRing %v): %d ring attention launches", mode, tn.attRing, n)
	}
	// tuning.attTrace (before every other attention build), attB3,
	// the streaming default (unless noAttStream or another build) and
	// attFence act in the captured modes only.
	for _, c := range []struct {
		what string
		want bool
		n    int
		skip bool // attnIn: a layer whose norms attention_in cannot hold runs the separate launches
	}{
		{"traced attention launches", graph && tn.attTrace && !tn.attnIn, backendCount(t, func(b *Backend) int { return b.attTraceLaunches }) - atr0, false},
		{"three-blocks-an-SM attention launches", graph && tn.attB3 && !tn.attTrace && !tn.attnIn, backendCount(t, func(b *Backend) int { return b.attB3Launches }) - ab30, false},
		{"streaming attention launches", graph && !tn.noAttStream && !tn.attB3 && !tn.attTrace && !tn.attRing && !tn.attPipe && tn.attPrefetch == 0,
			backendCount(t, func(b *Backend) int { return b.attCsLaunches }) - acs0, tn.attnIn},
		{"attention fences", graph && tn.attFence != 0, backendCount(t, func(b *Backend) int { return b.attFences }) - af0, false},
	} {
		if !c.skip && c.want != (c.n > 0) {
			t.Fatalf("%s (attTrace %v, attB3 %v, attFence %d): %d %s", mode, tn.attTrace, tn.attB3, tn.attFence, c.n, c.what)
		}
	}
	c := l.Cache.Counters()
	return res, [3]int64{c.Hits, c.Misses, c.H2DBytes}
}

// attRingLaunches reads the test backend's count of ring attention
// launches (tuning.attRing).
func attRingLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.attRingLaunches })
}

// attPipeLaunches reads the test backend's count of pipelined attention
// launches (tuning.attPipe).
func attPipeLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.attPipeLaunches })
}

// attPrefetchLaunches reads the test backend's count of attention launches
// that prefetch their first K/V rows (tuning.attPrefetch).
func attPrefetchLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.attPrefetchLaunches })
}

// ropeInQKVLaunches reads the test backend's count of q|k|v matvecs with
// RoPE and the KV append in their epilogue.
func ropeInQKVLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.ropeInQKVLaunches })
}

// sharedForks reads the test backend's count of shared-expert matvecs
// captured on a side branch.
func sharedForks(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.sharedForks })
}

// routeInLaunches reads the test backend's count of route-in gate/up
// kernels captured.
func routeInLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.routeInLaunches })
}

// moeLaunches reads the test backend's count of fused routed-experts
// launches.
func moeLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.moeLaunches })
}

// pdlLaunches reads the test backend's count of programmatic dependent
// launches.
func pdlLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.pdlLaunches })
}

// pdlOpLaunches reads the test backend's count of programmatic dependent
// launches issued op by op (a batched prefill's).
func pdlOpLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.pdlOpLaunches })
}

// prefetchLaunches reads the test backend's count of captured L2
// prefetch kernels.
func prefetchLaunches(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.prefetchLaunches })
}

// loadEngine loads art with o on the test backend; the engine is closed
// when the test ends.
func loadEngine(t *testing.T, art *qpack.Artifact, o engine.LoadOptions) *engine.Loaded {
	t.Helper()
	l, err := engine.Load(testBE, testBE.ExpertRows(), art, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// sameResult fails unless got has want's tokens and the bits of its logits.
func sameResult(t *testing.T, what string, got, want engine.Result) {
	t.Helper()
	if !reflect.DeepEqual(got.Tokens, want.Tokens) {
		t.Fatalf("tokens %v, %s %v", got.Tokens, what, want.Tokens)
	}
	for s := range want.Logits {
		sameBits(t, fmt.Sprintf("step %d logits", s), got.Logits[s], want.Logits[s])
	}
}

// TestStepperLookahead: with lookahead (no logits read), graph-full and
// persistent steps launch the next decode step before the host has the
// token; tokens and cache counters stay those of the op-by-op path, and a
// second request on the same engine (which discards the step launched ahead
// at the end of the first) gives the tokens of a fresh engine.
func TestStepperLookahead(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, mode := range []string{engine.StepGraphFull, engine.StepPersistent} {
			t.Run(arch+"/"+mode, func(t *testing.T) {
				art := testArtifact(t, arch, qpack.SchemeInt4)
				reqA := engine.Request{Prompt: promptIDs("Lookahead keeps the GPU busy."), Tokens: 24, SuppressEOS: true}
				reqB := engine.Request{Prompt: promptIDs("A second request starts over."), Tokens: 16, SuppressEOS: true}
				o := engine.LoadOptions{Executor: "grouped-v1", StepMode: engine.StepOps}
				wantA, wantC := generateMode(t, art, o, reqA, engine.StepOps)
				wantB, _ := generateMode(t, art, o, reqB, engine.StepOps)
				o.StepMode = mode
				l := loadEngine(t, art, o)
				gotA, err := l.Generate(reqA)
				if err != nil {
					t.Fatal(err)
				}
				c := l.Cache.Counters()
				if got := [3]int64{c.Hits, c.Misses, c.H2DBytes}; got != wantC {
					t.Fatalf("cache hits/misses/h2d %v, op by op %v (a step launched ahead was accounted?)", got, wantC)
				}
				gotB, err := l.Generate(reqB)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(gotA.Tokens, wantA.Tokens) || !reflect.DeepEqual(gotB.Tokens, wantB.Tokens) {
					t.Fatalf("tokens %v / %v, op by op %v / %v", gotA.Tokens, gotB.Tokens, wantA.Tokens, wantB.Tokens)
				}
			})
		}
	}
}

// TestStepperOverlap: graph-segmented steps with overlap (hits' gate/up
// launched while the misses copy) give the op-by-op path's bits, tokens and
// cache counters, for every executor of the PerGroup strategy (overlap
// splits the group's gate/up launch; PerExpert has none to split), both
// schemes and both transports, and overlap really split groups.
func TestStepperOverlap(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			art := testArtifact(t, arch, scheme)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			for _, ex := range perGroupExecutors(t) {
				for _, tr := range []string{"staged", "registered"} {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", arch, scheme, ex, tr), func(t *testing.T) {
						req := engine.Request{Prompt: promptIDs("Hits compute while misses copy."), Tokens: 20,
							SuppressEOS: true, LogitSteps: 20}
						o := engine.LoadOptions{Executor: ex, Capacity: cfg.TopK + 2, Transport: tr, StepMode: engine.StepOps}
						want, wantC := generateMode(t, art, o, req, engine.StepOps)
						o.StepMode, o.Overlap = "", engine.OverlapHitCompute
						l := loadEngine(t, art, o)
						if l.StepMode() != engine.StepGraphSegmented || l.OverlapMode() != engine.OverlapHitCompute {
							t.Fatalf("step mode %s, overlap %s", l.StepMode(), l.OverlapMode())
						}
						got, err := l.Generate(req)
						if err != nil {
							t.Fatal(err)
						}
						sameResult(t, "op by op", got, want)
						c := l.Cache.Counters()
						if gotC := [3]int64{c.Hits, c.Misses, c.H2DBytes}; gotC != wantC {
							t.Fatalf("cache hits/misses/h2d %v, op by op %v", gotC, wantC)
						}
						split, early, ok := l.OverlapCounts()
						if !ok || split == 0 || early < split {
							t.Fatalf("overlap counts: %d split layers, %d early experts (ok=%v): no group was split", split, early, ok)
						}
					})
				}
			}
		}
	}
	t.Run("refusals", func(t *testing.T) {
		art := testArtifact(t, "olmoe-tiny", qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []engine.LoadOptions{
			{Executor: "grouped-v1", Overlap: engine.OverlapHitCompute}, // full residency: graph-full
			{Executor: "grouped-v1", Capacity: cfg.TopK + 2, Overlap: engine.OverlapHitCompute, StepMode: engine.StepGraphWait},
			{Executor: "scalar-v1", Capacity: cfg.TopK + 2, Overlap: engine.OverlapHitCompute},
		} {
			if l, err := engine.Load(testBE, testBE.ExpertRows(), art, o); err == nil {
				l.Close()
				t.Errorf("Load(%+v) succeeded", o)
			}
		}
	})
}

// TestPrefetchOnDevice: next-layer prefetch on the CUDA backend (op by op)
// keeps the tokens and logits of prefetch off, and it predicted and loaded
// something.
func TestPrefetchOnDevice(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, tr := range []string{"staged", "registered"} {
			t.Run(arch+"/"+tr, func(t *testing.T) {
				art := testArtifact(t, arch, qpack.SchemeInt4)
				cfg, err := art.Config()
				if err != nil {
					t.Fatal(err)
				}
				req := engine.Request{Prompt: promptIDs("Guess the next layer."), Tokens: 20, SuppressEOS: true, LogitSteps: 20}
				// Token-at-a-time prefill in both: next-layer prefetch runs no
				// batched prefill, so auto (batched on CUDA) would differ
				// from it.
				o := engine.LoadOptions{Executor: "grouped-v1", Capacity: cfg.TopK + 2, Transport: tr, StepMode: engine.StepOps, Prefill: engine.PrefillToken}
				want, _ := generateMode(t, art, o, req, engine.StepOps)
				o.StepMode, o.Prefetch = "", engine.PrefetchNextLayer
				l := loadEngine(t, art, o)
				got, err := l.Generate(req)
				if err != nil {
					t.Fatal(err)
				}
				sameResult(t, "prefetch off", got, want)
				if c := l.Cache.Counters(); c.PrefetchGroups == 0 || c.PrefetchIssued == 0 {
					t.Fatalf("prefetch counters: %d groups predicted, %d experts issued", c.PrefetchGroups, c.PrefetchIssued)
				}
			})
		}
	}
}

// perGroupExecutors lists the executors whose Strategy is
// executor.PerGroup, asking each executor rather than naming them.
func perGroupExecutors(t *testing.T) []string {
	t.Helper()
	l, err := qpack.NewRecordLayout(qpack.SchemeInt4, 256, 256)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range executor.Names() {
		ex, err := executor.New(name, cpu.New(1), l, 4)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Strategy() == executor.PerGroup {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		t.Fatal("no executor has the per-group strategy")
	}
	return out
}

// TestStepperPrefillTimer: the captured modes but persistent time the
// prefill on the device (device.PrefillTimer), within the request's TTFT,
// for one-token and longer prompts and on a second request after a
// lookahead step; persistent steps leave it untimed; and timing changes no
// token.
func TestStepperPrefillTimer(t *testing.T) {
	art := testArtifact(t, "olmoe-tiny", qpack.SchemeInt4)
	cfg, err := art.Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode  string
		c     int
		timed bool
	}{
		{engine.StepGraphFull, cfg.NumExperts, true},
		{engine.StepPersistent, cfg.NumExperts, false},
		{engine.StepGraphSegmented, cfg.TopK + 2, true},
		{engine.StepGraphWait, cfg.TopK + 2, true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			// The steppers' own prefill timing: token-at-a-time prefill (a
			// batched one is timed on the host in every step mode).
			o := engine.LoadOptions{Executor: "grouped-v1", Capacity: tc.c, StepMode: engine.StepOps, Prefill: engine.PrefillToken}
			l := loadEngine(t, art, o)
			o.StepMode = tc.mode
			ls := loadEngine(t, art, o)
			for _, prompt := range []string{"A", "The prefill ends at the last logits.", "And again, after a lookahead step."} {
				req := engine.Request{Prompt: promptIDs(prompt), Tokens: 8, SuppressEOS: true}
				want, err := l.Generate(req)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ls.Generate(req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.Tokens, want.Tokens) {
					t.Fatalf("%q: tokens %v, op by op %v", prompt, got.Tokens, want.Tokens)
				}
				if got.PrefillTimed != tc.timed {
					t.Fatalf("%q: prefill timed %v, want %v", prompt, got.PrefillTimed, tc.timed)
				}
				if tc.timed && (got.PrefillSeconds <= 0 || got.PrefillSeconds > got.TTFTSeconds) {
					t.Fatalf("%q: prefill %.6f s, TTFT %.6f s: want 0 < prefill <= TTFT", prompt, got.PrefillSeconds, got.TTFTSeconds)
				}
			}
		})
	}
}

// backendCount reads one of the test backend's launch counters on its owner
// thread.
func backendCount(t *testing.T, read func(*Backend) int) int {
	t.Helper()
	var n int
	if err := testBE.o.do(func() error { n = read(testBE); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStepTimeline: a graph-full step with tuning.timeline records every
// body instruction's end in order, after the step's start, and on the Qwen
// shape every layer's shared-expert branch, which ends after its layer's
// attn-out and before the layer's shared-expert instruction (the join)
// ends. The bits are TestStepperTunings' concern.
func TestStepTimeline(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		t.Run(arch, func(t *testing.T) {
			art := testArtifact(t, arch, qpack.SchemeInt4)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			withTuning(t, testBE, tuning{timeline: true, noPDL: true})
			l := loadEngine(t, art, engine.LoadOptions{Executor: "grouped-v1", StepMode: engine.StepGraphFull})
			if _, err := l.Generate(engine.Request{Prompt: promptIDs("A timeline."), Tokens: 8, SuppressEOS: true}); err != nil {
				t.Fatal(err)
			}
			spans := readTimeline(t)
			prev, forks := 0.0, 0
			attnOut := map[int]float64{}
			for i, sp := range spans {
				if sp.end < prev || sp.took < 0 {
					t.Fatalf("instruction %d (%s L%d) ends at %.3f µs, before the one ahead of it (%.3f)", i, sp.op, sp.layer, sp.end, prev)
				}
				prev = sp.end
				switch sp.op {
				case plan.OpAttnOut:
					attnOut[sp.layer] = sp.end
				case plan.OpSharedExpert:
					if !sp.branchFork {
						continue
					}
					forks++
					if sp.branchEnd < attnOut[sp.layer] || sp.branchEnd > sp.end {
						t.Fatalf("layer %d's branch ends at %.3f µs, outside attn-out's end %.3f .. the join's %.3f", sp.layer, sp.branchEnd, attnOut[sp.layer], sp.end)
					}
				}
			}
			if prev <= 0 {
				t.Fatalf("the body took %.3f µs", prev)
			}
			if want := 0; cfg.HasSharedExpert() {
				want = cfg.NumLayers
				if forks != want {
					t.Fatalf("%d branches timed, want %d (one a layer)", forks, want)
				}
			} else if forks != want {
				t.Fatalf("%d branches timed on a model without a shared expert", forks)
			}
		})
	}
}

// TestAttTrace: with tuning.attTrace every captured attention launch of a
// graph-full step records its blocks: each layer has heads x attSplit of
// them, each became resident before it started and started before it
// ended, on an SM id below twice the SM count (ids need not be
// contiguous), layer after layer; and the tokens are those without the
// trace.
func TestAttTrace(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		t.Run(arch, func(t *testing.T) {
			art := testArtifact(t, arch, qpack.SchemeInt4)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			req := engine.Request{Prompt: promptIDs("An attention trace."), Tokens: 8, SuppressEOS: true}
			o := engine.LoadOptions{Executor: "grouped-v1", StepMode: engine.StepGraphFull}
			want, err := loadEngine(t, art, o).Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			n0 := backendCount(t, func(b *Backend) int { return b.attTraceLaunches })
			withTuning(t, testBE, tuning{attTrace: true})
			got, err := loadEngine(t, art, o).Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Tokens, want.Tokens) {
				t.Fatalf("tokens with the trace %v, without %v", got.Tokens, want.Tokens)
			}
			if n := backendCount(t, func(b *Backend) int { return b.attTraceLaunches }) - n0; n < cfg.NumLayers {
				t.Fatalf("%d traced attention launches captured, want at least %d", n, cfg.NumLayers)
			}
			launches, sms := readAttTraceNow(t)
			if len(launches) != cfg.NumLayers {
				t.Fatalf("%d traced launches, want %d (one a layer)", len(launches), cfg.NumLayers)
			}
			for l, a := range launches {
				if len(a.blocks) != cfg.NumHeads*attSplit {
					t.Fatalf("layer %d: %d blocks, want %d", l, len(a.blocks), cfg.NumHeads*attSplit)
				}
				for i, bl := range a.blocks {
					// %smid need not be contiguous: bounded loosely by the SM count.
					if bl.entry == 0 || bl.entry > bl.start || bl.start > bl.end || bl.sm < 0 || bl.sm >= 2*sms {
						t.Fatalf("layer %d block %d: entry %d, start %d, end %d (ns), SM %d (%d SMs)", l, i, bl.entry, bl.start, bl.end, bl.sm, sms)
					}
				}
				if a.span <= 0 || a.run > a.span || a.maxPerSM < 1 || a.sms < 1 {
					t.Fatalf("layer %d: span %.3f µs, run %.3f, %d blocks at most an SM on %d SMs", l, a.span, a.run, a.maxPerSM, a.sms)
				}
				if l > 0 && a.blocks[0].entry < launches[l-1].blocks[0].entry {
					t.Fatalf("layer %d's attention was resident before layer %d's", l, l-1)
				}
			}
		})
	}
}

// readAttTraceNow waits for the compute stream and reads the registered
// attention trace (tuning.attTrace); it also returns the GPU's SM count.
func readAttTraceNow(tb testing.TB) ([]attLaunch, int) {
	tb.Helper()
	var launches []attLaunch
	var sms int
	if err := testBE.o.do(func() error {
		if err := testBE.compute.Synchronize(); err != nil {
			return err
		}
		sms = testBE.sms
		var err error
		launches, err = testBE.readAttTrace()
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return launches, sms
}
