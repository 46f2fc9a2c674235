package engine

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestKV16 runs both tiny models with an FP16 KV cache: the tokens and
// logits do not depend on capacity, executor or prefill mode (as with FP32);
// the first step's logits are close to the FP32 cache's but not all the same
// bits (the option changes what is stored); Engine.KVName says FP16.
func TestKV16(t *testing.T) {
	prompt := promptIDs("Half the bytes of every cached key and value.")
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		cfg, err := testArtifact(t, arch, qpack.SchemeInt4).Config()
		if err != nil {
			t.Fatal(err)
		}
		req := Request{Prompt: prompt, Tokens: 16, SuppressEOS: true, LogitSteps: 16}
		gen := func(t *testing.T, o LoadOptions) Result {
			t.Helper()
			l := loadEngine(t, arch, qpack.SchemeInt4, o)
			l.Cache.BeginRequest()
			res, err := l.Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Cache.EndRequest(); err != nil {
				t.Fatal(err)
			}
			wantName, wantDT := "FP32", backend.F32
			if o.KV == "fp16" {
				wantName, wantDT = "FP16", backend.F16
			}
			if l.KVName() != wantName || l.KVDType() != wantDT {
				t.Fatalf("KV %q: engine says %s (%v)", o.KV, l.KVName(), l.KVDType())
			}
			return res
		}
		var want Result
		t.Run(arch+"/fp16/full", func(t *testing.T) { want = gen(t, LoadOptions{KV: "fp16", Prefill: PrefillToken}) })
		for _, ex := range executor.Names() {
			for _, c := range []int{cfg.TopK, cfg.TopK + 2, cfg.NumExperts} {
				for _, pf := range []string{PrefillToken, PrefillBatched} {
					t.Run(fmt.Sprintf("%s/fp16/%s/c%d/%s", arch, ex, c, pf), func(t *testing.T) {
						got := gen(t, LoadOptions{KV: "fp16", Executor: ex, Capacity: c, Prefill: pf})
						if !reflect.DeepEqual(got.Tokens, want.Tokens) {
							t.Fatalf("tokens %v, full residency token at a time %v", got.Tokens, want.Tokens)
						}
						for s := range want.Logits {
							for i := range want.Logits[s] {
								if math.Float32bits(got.Logits[s][i]) != math.Float32bits(want.Logits[s][i]) {
									t.Fatalf("step %d logit %d: %g, full residency token at a time %g", s, i, got.Logits[s][i], want.Logits[s][i])
								}
							}
						}
					})
				}
			}
		}
		t.Run(arch+"/fp16-vs-fp32", func(t *testing.T) {
			f32 := gen(t, LoadOptions{Prefill: PrefillToken})
			var maxDiff, scale float64
			differ := 0
			for i, x := range f32.Logits[0] {
				d := math.Abs(float64(x) - float64(want.Logits[0][i]))
				maxDiff, scale = math.Max(maxDiff, d), math.Max(scale, math.Abs(float64(x)))
				if x != want.Logits[0][i] {
					differ++
				}
			}
			if differ == 0 {
				t.Fatal("an FP16 KV cache gave the FP32 cache's first-step logits bit for bit: the option stores nothing differently")
			}
			// Keys and values rounded to 11 significant bits move a logit by
			// about 2^-11 of its scale; allow 1%.
			if maxDiff > 0.01*scale {
				t.Fatalf("first-step logits move by %g against a scale of %g", maxDiff, scale)
			}
			t.Logf("first step: %d of %d logits differ, max |diff| %.3g (scale %.3g)", differ, len(f32.Logits[0]), maxDiff, scale)
		})
	}
	if _, err := ParseKVDType("bf16"); err == nil {
		t.Fatal("ParseKVDType(bf16): no error")
	}
}
