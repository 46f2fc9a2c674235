//go:build cuda

package cuda

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/engine/enginetest"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

var artifacts enginetest.Artifacts

// testArtifact is the shared per-binary artifact of arch with scheme (seed
// 1, as runtime/engine's golden streams use).
func testArtifact(t testing.TB, arch string, scheme qpack.Scheme) *qpack.Artifact {
	t.Helper()
	return artifacts.Get(t, arch, scheme)
}

func cleanupArtifacts() { artifacts.Cleanup() }

func promptIDs(s string) []int {
	ids := make([]int, len(s))
	for i := range s {
		ids[i] = int(s[i])
	}
	return ids
}

// generate loads arch on (be, dev) and runs one greedy request.
func generate(t *testing.T, be backend.Backend, dev cache.Device, art *qpack.Artifact, o engine.LoadOptions, req engine.Request) engine.Result {
	t.Helper()
	l, err := engine.Load(be, dev, art, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	res, err := l.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestEngineMatchesCPU runs the tiny models end to end on the GPU and on the
// CPU reference: same greedy tokens, logits within FP32 drift.
func TestEngineMatchesCPU(t *testing.T) {
	req := engine.Request{Prompt: promptIDs("Horizon keeps every expert in host memory."), Tokens: 64, SuppressEOS: true, LogitSteps: 4}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			t.Run(fmt.Sprintf("%s/%s", arch, scheme), func(t *testing.T) {
				art := testArtifact(t, arch, scheme)
				cb := cpu.New(0)
				cdev := cache.NewCPUDevice(cb)
				defer cdev.Close()
				want := generate(t, cb, cdev, art, engine.LoadOptions{}, req)
				got := generate(t, testBE, testBE.ExpertRows(), art, engine.LoadOptions{}, req)
				for s := range want.Logits {
					closeTo(t, fmt.Sprintf("step %d logits", s), got.Logits[s], want.Logits[s], 1e-3, 1e-3)
				}
				if !reflect.DeepEqual(got.Tokens, want.Tokens) {
					t.Fatalf("GPU stream differs from the CPU's:\n got %v\nwant %v", got.Tokens, want.Tokens)
				}
			})
		}
	}
}

// TestEngineExecutorsAndResidency: on the GPU, every executor at full and
// partial residency (misses copied through pinned staging on the copy
// stream) gives bit-identical logits and the same tokens.
func TestEngineExecutorsAndResidency(t *testing.T) {
	req := engine.Request{Prompt: promptIDs("Eviction discards; the authority stays."), Tokens: 24, SuppressEOS: true, LogitSteps: 24}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		t.Run(arch, func(t *testing.T) {
			art := testArtifact(t, arch, qpack.SchemeInt4)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			var ref engine.Result
			for _, ex := range executor.Names() {
				for _, c := range []int{cfg.NumExperts, cfg.TopK, cfg.TopK + 3} {
					res := generate(t, testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: ex, Capacity: c}, req)
					if ref.Tokens == nil {
						ref = res
						continue
					}
					if !reflect.DeepEqual(res.Tokens, ref.Tokens) {
						t.Fatalf("%s capacity %d: tokens %v, scalar-v1 full residency %v", ex, c, res.Tokens, ref.Tokens)
					}
					for s := range res.Logits {
						sameBits(t, fmt.Sprintf("%s capacity %d step %d logits", ex, c, s), res.Logits[s], ref.Logits[s])
					}
				}
			}
		})
	}
}
