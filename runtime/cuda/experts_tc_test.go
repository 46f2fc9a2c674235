//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestStepperTCDecode: with tuning.tcDecode the captured steps run the int4
// routed experts on the tensor cores (experts_tc.cu). Their bits are not the
// FP32 kernels', so the test bounds them: teacher-forced on the op-by-op
// tokens, every step's logits lie within 2e-4 x (1 + the step's largest
// |logit|) of op by op's, at full capacity (graph-full) and below it
// (graph-wait, the misses served by the cache), on both tiny models, with
// every variant (tcDecodeVariants); that the variants agree bit for bit
// (tc4, tc8 and tca4 are one arithmetic); and that the kernels did run (see
// kernels/emu/tcd.cpp for the arithmetic's own bound).
func TestStepperTCDecode(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
			req := engine.Request{Prompt: promptIDs("Tensor cores for one token."), Tokens: 16, SuppressEOS: true, LogitSteps: 16}
			o := engine.LoadOptions{Executor: "grouped-v1", Capacity: c, StepMode: engine.StepOps}
			withTuning(t, testBE, tuning{})
			want, _ := generateMode(t, art, o, req, engine.StepOps)
			var first engine.Result
			mode := engine.StepGraphFull
			if c < cfg.NumExperts {
				mode = engine.StepGraphWait
			}
			for i, v := range tcDecodeVariants {
				t.Run(fmt.Sprintf("%s/c%d/%s/%s", arch, c, mode, v), func(t *testing.T) {
					withTuning(t, testBE, tuning{tcDecode: i + 1})
					n0 := tcdLaunchCount(t)
					o.StepMode = mode
					forced := req
					forced.Forced = want.Tokens
					got, _ := generateMode(t, art, o, forced, mode)
					if n := tcdLaunchCount(t) - n0; n == 0 {
						t.Fatalf("%s: no experts_tc launch", mode)
					}
					if first.Logits == nil {
						first = got
					} else {
						sameResult(t, tcDecodeVariants[0], got, first)
					}
					worst := 0.0
					for s := range want.Logits {
						mx := 0.0
						for _, v := range want.Logits[s] {
							mx = math.Max(mx, math.Abs(float64(v)))
						}
						for i, v := range got.Logits[s] {
							d := math.Abs(float64(v) - float64(want.Logits[s][i]))
							if !(d <= 2e-4*(1+mx)) {
								t.Fatalf("step %d logit %d: %g, op by op %g (|diff| %g, bound %g)", s, i, v, want.Logits[s][i], d, 2e-4*(1+mx))
							}
							worst = math.Max(worst, d/(1+mx))
						}
					}
					free, _ := generateMode(t, art, o, req, mode)
					same := 0
					for same < len(free.Tokens) && same < len(want.Tokens) && free.Tokens[same] == want.Tokens[same] {
						same++
					}
					t.Logf("largest |logit diff| / (1 + max |logit|): %.3g; free-running, the first %d of %d tokens agree with op by op", worst, same, len(want.Tokens))
				})
			}
		}
	}
}

// tcdLaunchCount reads the test backend's count of experts_tc launches.
func tcdLaunchCount(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.tcdLaunches })
}
