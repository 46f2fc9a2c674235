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

// TestExpertActivationsF16 runs both tiny models with FP16 expert
// activations on the CPU reference: tokens and logits do not depend on
// capacity, executor or device routing (as with FP32); the first step's
// logits differ from FP32 activations' (the option rounds what the experts
// read) but stay close; the engine names the dtype. Two chunks, so the
// KV cache carries FP16-expert rows from one batch to the next.
func TestExpertActivationsF16(t *testing.T) {
	prompt := promptIDs(strings.Repeat("Half of every activation the routed experts read. ", 2))
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
		var want Result
		t.Run(arch+"/fp16/full", func(t *testing.T) {
			want = gen(t, false, LoadOptions{ExpertActivations: ExpertActFP16, Prefill: PrefillBatched})
		})
		for _, ex := range executor.Names() {
			for _, c := range []int{cfg.TopK, cfg.TopK + 2, cfg.NumExperts} {
				for _, dev := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/fp16/%s/c%d/device-routing=%v", arch, ex, c, dev), func(t *testing.T) {
						got := gen(t, dev, LoadOptions{ExpertActivations: ExpertActFP16, Executor: ex, Capacity: c, Prefill: PrefillBatched})
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
		t.Run(arch+"/fp16-vs-fp32", func(t *testing.T) {
			// The same backend loaded with FP16 first, then FP32: Load resets
			// the backend, so the FP32 run has FP32's bits.
			be := cpu.New(0)
			loadOnCPU(t, be, be, art, LoadOptions{ExpertActivations: ExpertActFP16, Prefill: PrefillBatched})
			l := loadOnCPU(t, be, be, art, LoadOptions{Prefill: PrefillBatched})
			l.chunk = 64
			l.Cache.BeginRequest()
			f32, err := l.Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			ref := gen(t, false, LoadOptions{Prefill: PrefillBatched})
			if !reflect.DeepEqual(f32.Logits, ref.Logits) {
				t.Fatal("an FP32 load after an FP16 one on the same backend did not give FP32's logits: the backend kept FP16")
			}
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
				t.Fatal("FP16 expert activations gave FP32's first-step logits bit for bit: the option rounds nothing")
			}
			// Activations rounded to 11 significant bits (relative to their
			// row's largest) move a logit by about 2^-12 of its scale in a
			// layer (measured: ~1e-4 on both tiny models); allow 0.2%.
			if maxDiff > 0.002*scale {
				t.Fatalf("first-step logits move by %g against a scale of %g", maxDiff, scale)
			}
			t.Logf("first step: %d of %d logits differ, max |diff| %.3g (scale %.3g); tokens %v against FP32's %v",
				differ, len(f32.Logits[0]), maxDiff, scale, want.Tokens, f32.Tokens)
		})
	}
}

// generateActivations runs req on a fresh CPU backend loaded with o (device
// routing as devRoute says; 64-token chunks) and checks that the engine
// names the expert and dense activation dtypes o declares.
func generateActivations(t *testing.T, art *qpack.Artifact, req Request, devRoute bool, o LoadOptions) Result {
	t.Helper()
	be := cpu.New(0)
	be.SetDeviceRouting(devRoute)
	l := loadOnCPU(t, be, be, art, o)
	l.chunk = 64
	l.Cache.BeginRequest()
	res, err := l.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Cache.EndRequest(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, declared, name string
		dt                   backend.DType
	}{{"expert", o.ExpertActivations, l.ExpertActivationName(), l.ExpertActivationDType()},
		{"dense", o.DenseActivations, l.DenseActivationName(), l.DenseActivationDType()}} {
		wantName, wantDT := "FP32", backend.F32
		if c.declared == ExpertActFP16 {
			wantName, wantDT = "FP16", backend.F16
		}
		if c.name != wantName || c.dt != wantDT {
			t.Fatalf("%s activations %q: engine says %s (%v)", c.what, c.declared, c.name, c.dt)
		}
	}
	return res
}

// noExpertActivations is a backend without backend.ExpertActivations (nor
// the batched ops: it embeds the interface alone).
type noExpertActivations struct{ backend.Backend }

// TestExpertActivationsRefused: FP16 expert activations are refused, with
// the reason, wherever nothing would run in FP16.
func TestExpertActivationsRefused(t *testing.T) {
	cases := []struct {
		name   string
		scheme qpack.Scheme
		wrap   bool
		o      LoadOptions
		want   string
	}{
		{"unknown name", qpack.SchemeInt4, false, LoadOptions{ExpertActivations: "bf16"}, `expert activations "bf16": want fp32 (the default) or fp16`},
		{"fp16 experts", qpack.SchemeFP16, false, LoadOptions{ExpertActivations: ExpertActFP16}, "FP16 activations apply to"},
		{"token prefill", qpack.SchemeInt4, false, LoadOptions{ExpertActivations: ExpertActFP16, Prefill: PrefillToken}, "prefills token at a time"},
		{"next-layer prefetch", qpack.SchemeInt4, false, LoadOptions{ExpertActivations: ExpertActFP16, Prefetch: PrefetchNextLayer}, "prefills token at a time"},
		{"backend without it", qpack.SchemeInt4, true, LoadOptions{ExpertActivations: ExpertActFP16}, "FP32 activations only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cb := cpu.New(0)
			var be backend.Backend = cb
			if c.wrap {
				be = noExpertActivations{cb}
			}
			dev := cache.NewCPUDevice(cb)
			defer dev.Close()
			l, err := Load(be, dev, testArtifact(t, "olmoe-tiny", c.scheme), c.o)
			if err == nil {
				l.Close()
				t.Fatalf("Load(%+v): no error", c.o)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v; want it to say %q", err, c.want)
			}
		})
	}
	for _, name := range []string{"", ExpertActFP32} {
		l := loadEngine(t, "olmoe-tiny", qpack.SchemeFP16, LoadOptions{ExpertActivations: name, Prefill: PrefillToken})
		if l.ExpertActivationName() != "FP32" {
			t.Fatalf("expert activations %q on FP16 experts, token prefill: engine says %s", name, l.ExpertActivationName())
		}
	}
}
