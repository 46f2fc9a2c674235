package engine

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// attnInCounter counts the QKRoPEKVRows ops a batched prefill issues.
type attnInCounter struct {
	*cpu.Backend
	ops int
}

func (a *attnInCounter) QKRoPEKVRows(qo, q, k, v, kCache, vCache, qNorm, kNorm backend.Tensor, T, pos0, nHeads, nKVHeads, headDim int, theta float64, eps float32) error {
	a.ops++
	return a.Backend.QKRoPEKVRows(qo, q, k, v, kCache, vCache, qNorm, kNorm, T, pos0, nHeads, nKVHeads, headDim, theta, eps)
}

// TestAttnInRowsPrefill: with the backend's fused attn-in on
// (backend.AttnInRows), a batched prefill runs every layer's q/k norms
// (OLMoE), RoPE and KV append as one op, the normalised q in the batch's
// second q buffer, and gives the separate ops' tokens and logits bit for
// bit, over prompts of one and several chunks (the buffers swap every
// layer and carry across chunks) and at partial residency.
func TestAttnInRowsPrefill(t *testing.T) {
	prompts := [][]int{{7}, promptIDs("Hello"), promptIDs(strings.Repeat("Norms, rotations and the cache in one op. ", 2))}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []int{cfg.NumExperts, cfg.TopK + 1} {
			t.Run(fmt.Sprintf("%s/c%d", arch, c), func(t *testing.T) {
				run := func(fused bool, p []int) (Result, int) {
					be := &attnInCounter{Backend: cpu.New(0)}
					be.SetAttnInRows(fused)
					l := loadOnCPU(t, be, be.Backend, art, LoadOptions{Executor: "grouped-v1", Capacity: c, Prefill: PrefillBatched})
					l.chunk = 16
					res, err := l.Generate(Request{Prompt: p, Tokens: 4, SuppressEOS: true, LogitSteps: 4})
					if err != nil {
						t.Fatal(err)
					}
					return res, be.ops
				}
				for _, p := range prompts {
					want, wn := run(false, p)
					got, gn := run(true, p)
					if chunks := (len(p) + 15) / 16; wn != 0 || gn != chunks*cfg.NumLayers {
						t.Fatalf("prompt of %d: %d fused ops off, %d on, want 0 and %d (a layer a chunk)", len(p), wn, gn, chunks*cfg.NumLayers)
					}
					if !reflect.DeepEqual(got.Tokens, want.Tokens) {
						t.Fatalf("prompt of %d: tokens %v, separate ops %v", len(p), got.Tokens, want.Tokens)
					}
					for s := range want.Logits {
						for i := range want.Logits[s] {
							if math.Float32bits(got.Logits[s][i]) != math.Float32bits(want.Logits[s][i]) {
								t.Fatalf("prompt of %d, step %d, logit %d: %g, separate ops %g", len(p), s, i, got.Logits[s][i], want.Logits[s][i])
							}
						}
					}
				}
			})
		}
	}
}

// loadOnCPU loads art on be over a CPU device of the CPU backend c (be
// itself or a wrapper of it); both close when the test ends.
func loadOnCPU(t *testing.T, be backend.Backend, c *cpu.Backend, art *qpack.Artifact, o LoadOptions) *Loaded {
	t.Helper()
	d := cache.NewCPUDevice(c)
	l, err := Load(be, d, art, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}
