//go:build cuda

package cuda

import (
	"fmt"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestTeacherForcingOnDevice: a teacher-forced request (engine.Request.Forced:
// each step feeds the forced id, not its own choice) gives in every step
// mode the tokens, greedy choices and logits bits op by op gives, with
// forced ids that differ from the greedy ones (an EOS id first); the
// captured steps must set the forced token on the device each step.
func TestTeacherForcingOnDevice(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		forced := []int{cfg.EOSTokenIDs[0], 7, 11, 13, 17, 19}
		req := engine.Request{Prompt: promptIDs("Teacher forcing on the device."), Tokens: len(forced), LogitSteps: len(forced), Forced: forced}
		for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
			modes := []string{engine.StepGraphFull, engine.StepPersistent}
			if c < cfg.NumExperts {
				modes = []string{engine.StepGraphSegmented, engine.StepGraphWait}
			}
			o := engine.LoadOptions{Executor: "grouped-v1", Capacity: c, StepMode: engine.StepOps}
			want, err := loadEngine(t, art, o).Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range modes {
				t.Run(fmt.Sprintf("%s/c%d/%s", arch, c, mode), func(t *testing.T) {
					o.StepMode = mode
					got, err := loadEngine(t, art, o).Generate(req)
					if err != nil {
						t.Fatal(err)
					}
					sameResult(t, "op by op", got, want)
					if fmt.Sprint(got.Greedy) != fmt.Sprint(want.Greedy) {
						t.Fatalf("greedy %v, op by op %v", got.Greedy, want.Greedy)
					}
				})
			}
		}
	}
}
