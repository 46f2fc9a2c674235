//go:build cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestBatchedPrefillOnDevice: on the GPU a batched prefill on the row
// kernels (tuning.noMatmulTC; the tensor cores are TestBatchedPrefillTensorCores')
// (the prompt's projections as MatMuls, the routed experts expert by expert through
// ExpertMatMul) gives token-at-a-time prefill's tokens and the bits of its
// logits, op by op and before every captured step mode (which then start
// from the KV cache the batches filled), at full and partial capacity, for
// both tiny models and expert formats; a prompt longer than PrefillChunk
// runs as two batches; and the batched prefill is timed on the host, within
// the TTFT. Auto runs batched on this backend (BatchedDefault; token at a
// time under HORIZON_TEST_BATCHED_DEFAULT=0).
func TestBatchedPrefillOnDevice(t *testing.T) {
	withTuning(t, testBE, tuning{noMatmulTC: true}) // the row kernels: token at a time's bits
	long := strings.Repeat("Batches carry the KV cache from one to the next. ", 13)[:engine.PrefillChunk+40]
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			art := testArtifact(t, arch, scheme)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
				modes := []string{engine.StepOps, engine.StepGraphFull, engine.StepPersistent}
				if c < cfg.NumExperts {
					modes = []string{engine.StepOps, engine.StepGraphSegmented, engine.StepGraphWait}
				}
				for _, mode := range modes {
					t.Run(fmt.Sprintf("%s/%s/c%d/%s", arch, scheme, c, mode), func(t *testing.T) {
						o := engine.LoadOptions{Executor: "grouped-v1", Capacity: c, StepMode: mode, Prefill: engine.PrefillToken}
						tok := loadEngine(t, art, o)
						if got := tok.PrefillMode(); got != engine.PrefillToken {
							t.Fatalf("prefill token runs %s", got)
						}
						o.Prefill = engine.PrefillAuto
						wantAuto := engine.PrefillToken
						if batchedDefault { // unless HORIZON_TEST_BATCHED_DEFAULT=0
							wantAuto = engine.PrefillBatched
						}
						if got := loadEngine(t, art, o).PrefillMode(); got != wantAuto {
							t.Fatalf("auto prefill on cuda is %s, want %s", got, wantAuto)
						}
						o.Prefill = engine.PrefillBatched
						bat := loadEngine(t, art, o)
						if got := bat.PrefillMode(); got != engine.PrefillBatched {
							t.Fatalf("prefill batched runs %s", got)
						}
						if !bat.TimesPrefill() {
							t.Fatal("a batched prefill on cuda is not timed")
						}
						prompts := []string{"A", "Batched prefill, the same bits.", "A second request after a lookahead step."}
						if c == cfg.NumExperts && mode == engine.StepGraphFull && scheme == qpack.SchemeInt4 {
							prompts = append(prompts, long)
						}
						for _, p := range prompts {
							req := engine.Request{Prompt: promptIDs(p), Tokens: 12, SuppressEOS: true, LogitSteps: 4}
							want, err := tok.Generate(req)
							if err != nil {
								t.Fatal(err)
							}
							got, err := bat.Generate(req)
							if err != nil {
								t.Fatalf("%d-token prompt: %v", len(req.Prompt), err)
							}
							sameResult(t, fmt.Sprintf("%d-token prompt, token at a time", len(req.Prompt)), got, want)
							if !got.PrefillTimed || got.PrefillSeconds <= 0 || got.PrefillSeconds > got.TTFTSeconds {
								t.Fatalf("%d-token prompt: prefill %v s (timed %v), TTFT %v s", len(req.Prompt), got.PrefillSeconds, got.PrefillTimed, got.TTFTSeconds)
							}
							// Lookahead (no logits read) on the same engine.
							req.LogitSteps = 0
							if got, err = bat.Generate(req); err != nil {
								t.Fatal(err)
							}
							sameResult(t, "with lookahead", engine.Result{Tokens: got.Tokens}, engine.Result{Tokens: want.Tokens})
						}
					})
				}
			}
		}
	}
}
