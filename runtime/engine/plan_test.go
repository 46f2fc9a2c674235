package engine

import (
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/plan"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The engine executes its plan and nothing else: the decode plan has the
// head, the prompt-body plan does not, and the interpreter refuses what it
// cannot run (a batched plan, an instruction it does not know) with an
// error instead of computing something else.
func TestEngineRunsItsPlan(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		t.Run(arch, func(t *testing.T) {
			e := newEngine(t, arch, qpack.SchemeInt4)
			cfg := e.Config()
			if p := e.Plan(); p.T != 1 || !p.Head || p.Count(plan.OpRoutedExperts) != cfg.NumLayers {
				t.Fatalf("decode plan: T=%d head=%v, %d routed-experts for %d layers", p.T, p.Head, p.Count(plan.OpRoutedExperts), cfg.NumLayers)
			}
			if e.body.Head || e.body.Count(plan.OpHead) != 0 {
				t.Fatal("the prompt-body plan has a head")
			}
			if got, want := e.Plan().Count(plan.OpSharedExpert) > 0, cfg.HasSharedExpert(); got != want {
				t.Fatalf("shared-expert instructions %v, model has a shared expert %v", got, want)
			}
			batched, err := plan.Build(cfg, plan.Options{T: 4, MaxSeq: e.MaxSeq(), Head: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.run(batched, 1, 0, nil); err == nil || !strings.Contains(err.Error(), "T = 4") {
				t.Fatalf("a batched plan: %v", err)
			}
			odd := *e.Plan()
			odd.Instrs = append([]plan.Instr{{Op: plan.Op(99), Layer: -1}}, odd.Instrs...)
			if _, err := e.run(&odd, 1, 0, nil); err == nil || !strings.Contains(err.Error(), "op(99)") {
				t.Fatalf("an unknown instruction: %v", err)
			}
			// The decode plan selects: its token is the argmax the
			// generate loop used before selection moved into the plan.
			next, err := e.run(e.Plan(), 'H', 0, cfg.EOSTokenIDs)
			if err != nil {
				t.Fatal(err)
			}
			want, err := e.be.Argmax(e.logits, cfg.EOSTokenIDs)
			if err != nil || next != want {
				t.Fatalf("select gave %d, argmax of the logits %d (%v)", next, want, err)
			}
		})
	}
}
