//go:build cuda

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestKV16OnDevice: with an FP16 KV cache every captured step mode gives
// op by op's bits, tokens and cache counters on both tiny models (OLMoE's
// q/k norms run qk_norm_rope_kv_step_kv16, Qwen's rope_kv_step_kv16; the
// attn-in tuning attention_in_step_kv16), at full and partial residency;
// a batched prefill on the row kernels gives token at a time's bits; the GPU's tokens are the
// CPU's FP16-cache tokens; and the persistent kernel refuses the cache.
func TestKV16OnDevice(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		req := engine.Request{Prompt: promptIDs("Sixteen bits a cached value, the same bits every mode."), Tokens: 20, SuppressEOS: true, LogitSteps: 20}
		for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
			for _, tc := range []struct {
				name string
				tn   tuning
			}{{"rows", tuning{noMatmulTC: true}}, {"attn-in", tuning{attnIn: true, noMatmulTC: true}},
				{"rope-in-qkv", tuning{ropeInQKV: true, noMatmulTC: true}}, {"att-prefetch", tuning{attPrefetch: 8, noMatmulTC: true}},
				{"att-pipe", tuning{attPipe: true, attPrefetch: 8, noMatmulTC: true}}, {"att-ring", tuning{attRing: true, noMatmulTC: true}}} {
				t.Run(fmt.Sprintf("%s/c%d/%s", arch, c, tc.name), func(t *testing.T) {
					o := engine.LoadOptions{Executor: "grouped-v1", Capacity: c, StepMode: engine.StepOps, KV: "fp16", Prefill: engine.PrefillToken}
					want, wantC := generateMode(t, art, o, req, engine.StepOps)
					withTuning(t, testBE, tc.tn)
					modes := []string{engine.StepGraphFull}
					if c < cfg.NumExperts {
						modes = []string{engine.StepGraphSegmented, engine.StepGraphWait}
					}
					for _, mode := range modes {
						o.StepMode = mode
						got, gotC := generateMode(t, art, o, req, mode)
						sameResult(t, mode+" (fp16 KV, "+tc.name+")", got, want)
						if gotC != wantC {
							t.Fatalf("%s: cache hits/misses/h2d %v, op by op %v", mode, gotC, wantC)
						}
						o.Prefill = engine.PrefillBatched
						got, _ = generateMode(t, art, o, req, mode)
						sameResult(t, mode+" after a batched prefill (fp16 KV, "+tc.name+")", got, want)
						o.Prefill = engine.PrefillToken
					}
				})
			}
		}
		t.Run(arch+"/matches-cpu", func(t *testing.T) {
			cb := cpu.New(0)
			cdev := cache.NewCPUDevice(cb)
			defer cdev.Close()
			o := engine.LoadOptions{KV: "fp16"}
			want := generate(t, cb, cdev, art, o, req)
			got := generate(t, testBE, testBE.ExpertRows(), art, o, req)
			for s := range want.Logits {
				closeTo(t, fmt.Sprintf("step %d logits", s), got.Logits[s], want.Logits[s], 1e-3, 1e-3)
			}
			if fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
				t.Fatalf("GPU stream (fp16 KV) differs from the CPU's:\n got %v\nwant %v", got.Tokens, want.Tokens)
			}
		})
		t.Run(arch+"/persistent-refuses", func(t *testing.T) {
			_, err := engine.Load(testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", StepMode: engine.StepPersistent, KV: "fp16"})
			if err == nil || !strings.Contains(err.Error(), "FP32 KV cache only") {
				t.Fatalf("err %v, want a refusal naming the FP32 KV cache", err)
			}
		})
	}
}
