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
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestDenseActivationsF16 runs both tiny models with FP16 dense-projection
// activations on the CPU reference, alone and with FP16 expert
// activations: tokens and logits do not depend on capacity, executor or
// device routing; the first step's logits differ from FP32 activations'
// but stay close; the engine names both dtypes. Two chunks, so the KV
// cache carries rows from one batch to the next.
func TestDenseActivationsF16(t *testing.T) {
	prompt := promptIDs(strings.Repeat("Half of every activation the projections read. ", 2))
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		req := Request{Prompt: prompt, Tokens: 12, SuppressEOS: true, LogitSteps: 12}
		gen := func(t *testing.T, devRoute bool, o LoadOptions) Result {
			return generateActivations(t, art, req, devRoute, o)
		}
		for _, mode := range []struct {
			name    string
			experts string
		}{{"dense", ""}, {"dense+experts", ExpertActFP16}} {
			var want Result
			t.Run(arch+"/"+mode.name+"/full", func(t *testing.T) {
				want = gen(t, false, LoadOptions{DenseActivations: ExpertActFP16, ExpertActivations: mode.experts, Prefill: PrefillBatched})
			})
			for _, ex := range executor.Names() {
				for _, c := range []int{cfg.TopK, cfg.NumExperts} {
					for _, dev := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/%s/%s/c%d/device-routing=%v", arch, mode.name, ex, c, dev), func(t *testing.T) {
							got := gen(t, dev, LoadOptions{DenseActivations: ExpertActFP16, ExpertActivations: mode.experts, Executor: ex, Capacity: c, Prefill: PrefillBatched})
							if !reflect.DeepEqual(got.Tokens, want.Tokens) {
								t.Fatalf("tokens %v, full residency %v", got.Tokens, want.Tokens)
							}
							for s := range want.Logits {
								for i := range want.Logits[s] {
									if math.Float32bits(got.Logits[s][i]) != math.Float32bits(want.Logits[s][i]) {
										t.Fatalf("step %d logit %d: %g, full residency %g", s, i, got.Logits[s][i], want.Logits[s][i])
									}
								}
							}
						})
					}
				}
			}
			t.Run(arch+"/"+mode.name+"-vs-fp32", func(t *testing.T) {
				// The reference: the same expert activations with FP32 dense ones.
				ref := gen(t, false, LoadOptions{ExpertActivations: mode.experts, Prefill: PrefillBatched})
				var maxDiff, scale float64
				differ := 0
				for i, x := range ref.Logits[0] {
					d := math.Abs(float64(x) - float64(want.Logits[0][i]))
					maxDiff, scale = math.Max(maxDiff, d), math.Max(scale, math.Abs(float64(x)))
					if x != want.Logits[0][i] {
						differ++
					}
				}
				if differ == 0 {
					t.Fatal("FP16 dense activations gave FP32's first-step logits bit for bit: the option rounds nothing")
				}
				// Activations rounded to 11 significant bits of their chunk's
				// largest move a logit by about 2^-12 of its scale a layer.
				// Measured: 0.02% (olmoe-tiny) and 0.3% (qwen2moe-tiny, whose
				// q and k have biases and no norms, so the attention scores
				// amplify the q|k|v inputs' rounding: 0.02% without it);
				// allow 1%.
				if maxDiff > 0.01*scale {
					t.Logf("first step: %d of %d logits differ; tokens %v against FP32's %v", differ, len(ref.Logits[0]), want.Tokens, ref.Tokens)
					t.Fatalf("first-step logits move by %g against a scale of %g", maxDiff, scale)
				}
				t.Logf("first step: %d of %d logits differ, max |diff| %.3g (scale %.3g); tokens %v against FP32's %v",
					differ, len(ref.Logits[0]), maxDiff, scale, want.Tokens, ref.Tokens)
			})
		}
	}
}

// noDenseActivations runs the batched ops without backend.DenseActivations
// (it embeds the two interfaces alone).
type noDenseActivations struct {
	backend.Backend
	backend.Batched
}

// TestDenseActivationsRefused: FP16 dense activations are refused, with the
// reason, wherever nothing would run in FP16; FP16 experts do not matter.
func TestDenseActivationsRefused(t *testing.T) {
	cases := []struct {
		name string
		wrap bool
		o    LoadOptions
		want string
	}{
		{"unknown name", false, LoadOptions{DenseActivations: "bf16"}, `dense activations "bf16": want fp32 (the default) or fp16`},
		{"token prefill", false, LoadOptions{DenseActivations: ExpertActFP16, Prefill: PrefillToken}, "prefills token at a time"},
		{"next-layer prefetch", false, LoadOptions{DenseActivations: ExpertActFP16, Prefetch: PrefetchNextLayer}, "prefills token at a time"},
		{"backend without it", true, LoadOptions{DenseActivations: ExpertActFP16, Prefill: PrefillBatched}, "FP32 activations only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cb := cpu.New(0)
			var be backend.Backend = cb
			if c.wrap {
				be = noDenseActivations{cb, cb}
			}
			dev := cache.NewCPUDevice(cb)
			defer dev.Close()
			l, err := Load(be, dev, testArtifact(t, "olmoe-tiny", qpack.SchemeInt4), c.o)
			if err == nil {
				l.Close()
				t.Fatalf("Load(%+v): no error", c.o)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v; want it to say %q", err, c.want)
			}
		})
	}
	l := loadEngine(t, "olmoe-tiny", qpack.SchemeFP16, LoadOptions{DenseActivations: ExpertActFP16, Prefill: PrefillBatched})
	if l.DenseActivationName() != "FP16" {
		t.Fatalf("dense activations fp16 on FP16 experts: engine says %s", l.DenseActivationName())
	}
}
