//go:build cuda

package cuda

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestStepperMatchesOps: captured steps (graph-full at full residency,
// graph-segmented at partial) give the op-by-op path's bits: the same
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
							o.StepMode = ""
							wantMode := engine.StepGraphSegmented
							if c == cfg.NumExperts {
								wantMode = engine.StepGraphFull
							}
							got, gotC := generateMode(t, art, o, req, wantMode)
							if !reflect.DeepEqual(got.Tokens, want.Tokens) {
								t.Fatalf("tokens %v, op by op %v", got.Tokens, want.Tokens)
							}
							for s := range want.Logits {
								sameBits(t, fmt.Sprintf("step %d logits", s), got.Logits[s], want.Logits[s])
							}
							if gotC != wantC {
								t.Fatalf("cache hits/misses/h2d %v, op by op %v", gotC, wantC)
							}
						})
					}
				}
			}
		}
	}
}

// generateMode loads with o, checks the step mode and runs req; it returns
// the result and the request's cache hits, misses and H2D bytes.
func generateMode(t *testing.T, art *qpack.Artifact, o engine.LoadOptions, req engine.Request, mode string) (engine.Result, [3]int64) {
	t.Helper()
	l, err := engine.Load(testBE, testBE.Rows(), art, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	if l.StepMode() != mode {
		t.Fatalf("step mode %s, want %s", l.StepMode(), mode)
	}
	res, err := l.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	c := l.Cache.Counters()
	return res, [3]int64{c.Hits, c.Misses, c.H2DBytes}
}
