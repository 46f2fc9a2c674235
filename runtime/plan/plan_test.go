package plan

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/model"
)

var update = flag.Bool("update", false, "rewrite the golden plan listings in testdata/")

func preset(t *testing.T, name string) model.Config {
	t.Helper()
	p, err := model.LookupPreset(name)
	if err != nil {
		t.Fatal(err)
	}
	return p.Config
}

// The listings are the documentation of the instruction set: a change to
// the plan shows up as a diff of these files.
func TestPlanGolden(t *testing.T) {
	for _, tc := range []struct {
		arch string
		o    Options
		file string
	}{
		{"olmoe-tiny", Options{T: 1, MaxSeq: 64, Head: true}, "olmoe-tiny-decode.txt"},
		{"qwen2moe-tiny", Options{T: 1, MaxSeq: 64, Head: true}, "qwen2moe-tiny-decode.txt"},
		{"olmoe-tiny", Options{T: 57, MaxSeq: 256, Head: true}, "olmoe-tiny-prefill57.txt"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p, err := Build(preset(t, tc.arch), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			got := p.String()
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./runtime/plan -update)", err)
			}
			if got != string(want) {
				t.Fatalf("plan differs from %s (run go test ./runtime/plan -update after checking):\n%s", path, got)
			}
		})
	}
}

// Each layer issues the same instructions in the same order; Qwen adds the
// shared expert; the head is optional.
func TestPlanShape(t *testing.T) {
	for _, tc := range []struct {
		arch       string
		head       bool
		perLayer   []Op
		wantInstrs int
	}{
		{"olmoe-1b-7b", true, []Op{OpAttnIn, OpAttention, OpAttnOut, OpRoute, OpRoutedExperts, OpMoEResidual}, 1 + 16*6 + 2},
		{"olmoe-1b-7b", false, []Op{OpAttnIn, OpAttention, OpAttnOut, OpRoute, OpRoutedExperts, OpMoEResidual}, 1 + 16*6},
		{"qwen15-moe-a27b", true, []Op{OpAttnIn, OpAttention, OpAttnOut, OpRoute, OpRoutedExperts, OpSharedExpert, OpMoEResidual}, 1 + 24*7 + 2},
	} {
		cfg := preset(t, tc.arch)
		p, err := Build(cfg, Options{T: 1, MaxSeq: 16, Head: tc.head})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Instrs) != tc.wantInstrs {
			t.Errorf("%s head=%v: %d instructions, want %d", tc.arch, tc.head, len(p.Instrs), tc.wantInstrs)
		}
		if p.Instrs[0].Op != OpEmbed {
			t.Errorf("%s: starts with %s", tc.arch, p.Instrs[0].Op)
		}
		for l := 0; l < cfg.NumLayers; l++ {
			var ops []Op
			for _, in := range p.Instrs {
				if in.Layer == l {
					ops = append(ops, in.Op)
				}
			}
			if !slices.Equal(ops, tc.perLayer) {
				t.Fatalf("%s layer %d: %v, want %v", tc.arch, l, ops, tc.perLayer)
			}
		}
		if got := p.Count(OpHead) + p.Count(OpSelect); (got == 2) != tc.head {
			t.Errorf("%s head=%v: %d head/select instructions", tc.arch, tc.head, got)
		}
		for i, in := range p.Instrs {
			if in.RoutedRows != (in.Op == OpRoutedExperts) {
				t.Errorf("%s instr %d %s: RoutedRows %v", tc.arch, i, in.Op, in.RoutedRows)
			}
		}
	}
}

// Dependencies follow the buffers: every instruction after the embed
// depends only on earlier ones, each one's direct producer is among its
// deps, and the layers chain through x (layer l+1's attn-in waits for layer
// l's moe-residual).
func TestPlanDeps(t *testing.T) {
	cfg := preset(t, "qwen2moe-tiny")
	p, err := Build(cfg, Options{T: 4, MaxSeq: 32, Head: true})
	if err != nil {
		t.Fatal(err)
	}
	index := func(op Op, layer int) int {
		for i, in := range p.Instrs {
			if in.Op == op && in.Layer == layer {
				return i
			}
		}
		t.Fatalf("no %s in layer %d", op, layer)
		return -1
	}
	for _, tc := range []struct {
		what          string
		instr, before int
	}{
		{"attention reads q", index(OpAttention, 0), index(OpAttnIn, 0)},
		{"attn-out reads att", index(OpAttnOut, 0), index(OpAttention, 0)},
		{"route reads the updated x", index(OpRoute, 0), index(OpAttnOut, 0)},
		{"experts read the group", index(OpRoutedExperts, 0), index(OpRoute, 0)},
		{"shared expert adds to moe", index(OpSharedExpert, 0), index(OpRoutedExperts, 0)},
		{"residual after the shared expert", index(OpMoEResidual, 0), index(OpSharedExpert, 0)},
		{"next layer after the residual", index(OpAttnIn, 1), index(OpMoEResidual, 0)},
		{"route overwrites xn after the experts of the layer before read it", index(OpAttnIn, 1), index(OpSharedExpert, 0)},
		{"head after the last layer", index(OpHead, -1), index(OpMoEResidual, cfg.NumLayers-1)},
		{"select after the head", index(OpSelect, -1), index(OpHead, -1)},
	} {
		if !slices.Contains(p.Instrs[tc.instr].Deps, tc.before) {
			t.Errorf("%s: instr %d (%s) deps %v lack %d", tc.what, tc.instr, p.Instrs[tc.instr].Op, p.Instrs[tc.instr].Deps, tc.before)
		}
	}
	for i, in := range p.Instrs {
		for _, d := range in.Deps {
			if d >= i {
				t.Fatalf("instr %d depends on %d, not an earlier instruction", i, d)
			}
		}
		if i > 0 && len(in.Deps) == 0 {
			t.Errorf("instr %d (%s) depends on nothing", i, in.Op)
		}
	}
	// KV caches are per layer: layer 1's attention does not wait on layer
	// 0's cache, only on its own.
	att1 := p.Instrs[index(OpAttention, 1)]
	if slices.Contains(att1.Deps, index(OpAttnIn, 0)) {
		t.Errorf("layer 1 attention depends on layer 0's attn-in: %v", att1.Deps)
	}
}

func TestBuildRejects(t *testing.T) {
	cfg := preset(t, "olmoe-tiny")
	for _, tc := range []struct {
		name string
		cfg  model.Config
		o    Options
	}{
		{"no tokens", cfg, Options{T: 0, MaxSeq: 8}},
		{"step longer than the cache", cfg, Options{T: 9, MaxSeq: 8}},
		{"empty config", model.Config{}, Options{T: 1, MaxSeq: 8}},
	} {
		if _, err := Build(tc.cfg, tc.o); err == nil {
			t.Errorf("%s: built", tc.name)
		}
	}
}
