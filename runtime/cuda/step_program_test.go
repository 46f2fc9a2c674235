package cuda

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/plan"
)

var update = flag.Bool("update", false, "rewrite the golden program listings in testdata/")

func decodePlan(t *testing.T, arch string) (*plan.Plan, model.Config) {
	t.Helper()
	p, err := model.LookupPreset(arch)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Build(p.Config, plan.Options{T: 1, MaxSeq: 64, Head: true})
	if err != nil {
		t.Fatal(err)
	}
	return pl, p.Config
}

// listing is what the captured step issues for each instruction of the
// body, where graph-segmented cuts it, and the fusions, one line each.
func listing(pr *program, st executor.Strategy) string {
	var b strings.Builder
	cut := map[int]bool{}
	for _, c := range pr.cuts {
		cut[c] = true
	}
	for i, in := range pr.body {
		if cut[i] {
			b.WriteString("---- segment (host serves the group)\n")
		}
		var notes []string
		if j := pr.xnFrom[i]; j >= 0 {
			notes = append(notes, fmt.Sprintf("stages xn of %d (%s)", j, pr.body[j].Op))
		}
		if pr.downAddsResidual(i, st) {
			notes = append(notes, "down adds the residual")
		}
		if pr.sharedAddsResidual(i) {
			notes = append(notes, "gated add adds the residual")
		}
		if in.Op == plan.OpMoEResidual && pr.residualFused(i, st) {
			notes = append(notes, "issues nothing (fused)")
		}
		if i == pr.lastRoute {
			notes = append(notes, "last route")
		}
		fmt.Fprintln(&b, strings.TrimRight(fmt.Sprintf("%3d L%d %-14s %s", i, in.Layer, in.Op, strings.Join(notes, "; ")), " "))
	}
	b.WriteString("---- head graph\n")
	for _, in := range pr.head {
		fmt.Fprintf(&b, "    %s\n", in.Op)
	}
	return b.String()
}

func TestProgramGolden(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, st := range []executor.Strategy{executor.PerExpert, executor.PerGroup} {
			file := fmt.Sprintf("program-%s-%s.txt", arch, st)
			t.Run(file, func(t *testing.T) {
				pl, cfg := decodePlan(t, arch)
				pr, err := compile(pl, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if len(pr.cuts) != cfg.NumLayers {
					t.Fatalf("%d cuts for %d layers", len(pr.cuts), cfg.NumLayers)
				}
				got := listing(pr, st)
				path := filepath.Join("testdata", file)
				if *update {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./runtime/cuda -run TestProgramGolden -update)", err)
				}
				if got != string(want) {
					t.Fatalf("program differs from %s (check, then -update):\n%s", path, got)
				}
			})
		}
	}
}

// TestProgramFusions holds the fusions the kernels rely on: every
// moe-residual is issued exactly once, by itself or by the instruction
// before it, and only the strategies and shapes that have such a kernel
// fuse.
func TestProgramFusions(t *testing.T) {
	tests := []struct {
		arch      string
		st        executor.Strategy
		wantFused int // moe-residuals folded into the instruction before
	}{
		{"olmoe-tiny", executor.PerGroup, 4},  // the grouped down adds the residual
		{"olmoe-tiny", executor.PerExpert, 0}, // scalar-v1 accumulates, then adds
		{"qwen2moe-tiny", executor.PerGroup, 4},
		{"qwen2moe-tiny", executor.PerExpert, 4}, // the shared expert's gated add
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.arch, tc.st), func(t *testing.T) {
			pl, cfg := decodePlan(t, tc.arch)
			pr, err := compile(pl, cfg)
			if err != nil {
				t.Fatal(err)
			}
			fused := 0
			for i, in := range pr.body {
				if in.Op == plan.OpMoEResidual && pr.residualFused(i, tc.st) {
					fused++
				}
				if pr.downAddsResidual(i, tc.st) && cfg.HasSharedExpert() {
					t.Errorf("instruction %d: the routed down adds the residual before the shared expert", i)
				}
			}
			if fused != tc.wantFused {
				t.Errorf("%d moe-residuals fused, want %d", fused, tc.wantFused)
			}
		})
	}
}

// TestCompileRejects: a plan the kernels cannot run exactly is refused
// with the reason, not issued.
func TestCompileRejects(t *testing.T) {
	tests := []struct {
		name   string
		arch   string
		mutate func(p *plan.Plan)
		want   string
	}{
		{"prefill plan", "olmoe-tiny", func(p *plan.Plan) { p.T = 8 }, "T = 1"},
		{"no head", "olmoe-tiny", func(p *plan.Plan) { p.Instrs = p.Instrs[:len(p.Instrs)-2]; p.Head = false }, "T = 1"},
		{"no select", "olmoe-tiny", func(p *plan.Plan) { p.Instrs = p.Instrs[:len(p.Instrs)-1] }, "head, select"},
		{"unknown op", "olmoe-tiny", func(p *plan.Plan) { p.Instrs[3].Op = plan.Op(99) }, "no kernel"},
		{"layer out of range", "olmoe-tiny", func(p *plan.Plan) { p.Instrs[1].Layer = 9 }, "outside"},
		{"xn read after x changed", "olmoe-tiny", func(p *plan.Plan) {
			// swap route and attn-out of layer 0: routed-experts then reads
			// an xn computed before the residual it should see
			p.Instrs[3], p.Instrs[4] = p.Instrs[4], p.Instrs[3]
		}, "reads xn after x changed"},
		{"routed rows without a route", "olmoe-tiny", func(p *plan.Plan) { p.Instrs[4].Layer = 1 }, "did not choose"},
		{"shared expert without its residual", "qwen2moe-tiny", func(p *plan.Plan) {
			for i, in := range p.Instrs {
				if in.Op == plan.OpMoEResidual {
					p.Instrs = append(p.Instrs[:i:i], p.Instrs[i+1:]...)
					return
				}
			}
		}, "not followed by its moe-residual"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl, cfg := decodePlan(t, tc.arch)
			tc.mutate(pl)
			_, err := compile(pl, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("compile: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
