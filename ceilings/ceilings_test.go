package ceilings

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/runtime/engine"
)

var update = flag.Bool("update", false, "rewrite testdata/*.md")

func TestStepBytes(t *testing.T) {
	tests := []struct {
		arch          string
		record        int64
		routed        int64
		total, relTol float64
	}{
		// GPU-NOTES.md: ~0.54 GB attention + ~0.41 GB experts + 0.21 GB lm_head = ~1.15 GB
		{"olmoe-1b-7b", 3194880, 8 * 16 * 3194880, 1.156e9, 0.01},
		// ~0.81 GB attention + 1.66 GB shared + ~0.42 GB routed + 0.62 GB lm_head = ~3.5 GB
		{"qwen15-moe-a27b", 4382720, 4 * 24 * 4382720, 3.5e9, 0.03},
	}
	for _, tc := range tests {
		b, err := StepBytes(tc.arch, tc.record)
		if err != nil {
			t.Fatal(err)
		}
		if b.Routed != tc.routed {
			t.Errorf("%s: routed bytes %d, want %d", tc.arch, b.Routed, tc.routed)
		}
		if got := float64(b.Total()); math.Abs(got-tc.total) > tc.relTol*tc.total {
			t.Errorf("%s: %d bytes per step, want %.3g within %.0f%%", tc.arch, b.Total(), tc.total, 100*tc.relTol)
		}
		if b.ResidentNonRouted <= b.NonRouted {
			t.Errorf("%s: resident non-routed %d should exceed the bytes read per step %d (the embedding table)", tc.arch, b.ResidentNonRouted, b.NonRouted)
		}
	}
	if _, err := StepBytes("no-such-arch", 1); err == nil {
		t.Error("StepBytes accepted an unknown architecture")
	}
}

// TestSmokeEditionGolden runs the report over the committed CPU smoke
// edition: partial configurations there have no H2D bandwidth and VRAM is
// unsupported, which must print UNKNOWN, never a number.
func TestSmokeEditionGolden(t *testing.T) {
	confs, err := LoadEdition("../editions/smoke-cpu")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, confs, nil, DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
		t.Fatalf("report holds NaN or Inf:\n%s", out)
	}
	if !strings.Contains(out, "UNKNOWN") {
		t.Fatal("a CPU edition's partial configurations have no H2D bandwidth: the report must say UNKNOWN")
	}
	checkGolden(t, "smoke-cpu.md", buf.Bytes())
}

func TestLoadErrors(t *testing.T) {
	if _, err := LoadEdition(t.TempDir()); err == nil {
		t.Error("LoadEdition accepted a directory without raw records")
	}
	bad := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(bad, []byte(`{"modes": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBaseline(bad); err == nil {
		t.Error("LoadBaseline accepted a document without a checkpoint")
	}
	if err := Write(&bytes.Buffer{}, nil, nil, DefaultOptions()); err == nil {
		t.Error("Write accepted no configurations")
	}
}

// TestDepths: per-depth decode is gathered exactly for an edition whose
// contract declares depths (the committed depth smoke edition), never for
// PERF-REAL-v1's; and the depth section sets each cuda configuration's
// depth beside bandwidth / (weights + (d + N/2) x KV bytes per position),
// which the CPU edition (no cuda configuration) does not print at all.
func TestDepths(t *testing.T) {
	real, err := LoadEdition("../editions/smoke-cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range real {
		if c.Depths != nil {
			t.Fatalf("smoke-cpu %s: depths %v under PERF-REAL-v1", c.ID, c.Depths)
		}
	}
	confs, err := LoadEdition("../editions/depth-smoke-cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range confs {
		var toks []int
		var n int64
		for _, d := range c.Depths {
			toks = append(toks, d.Tokens)
			n += d.DecodeTokens
		}
		if !slices.Equal(toks, []int{1, 64, 256}) || n != c.DecodeTokens {
			t.Fatalf("%s: depths %v with %d decode tokens, want [1 64 256] holding all %d", c.ID, toks, n, c.DecodeTokens)
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, confs, nil, DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "context depth") {
		t.Fatal("a cpu edition printed a depth section against the HBM ceiling")
	}

	kv, err := KVBytesPerPosition("olmoe-1b-7b", "")
	if err != nil {
		t.Fatal(err)
	}
	if kv != 16*2*2048*4 { // 16 layers, K and V, 16 heads x 128, FP32
		t.Fatalf("olmoe-1b-7b: %d KV bytes per position, want %d", kv, 16*2*2048*4)
	}
	if kv16, err := KVBytesPerPosition("olmoe-1b-7b", "FP16"); err != nil || kv16 != kv/2 {
		t.Fatalf("olmoe-1b-7b FP16: %d KV bytes per position (%v), want %d", kv16, err, kv/2)
	}
	b, err := StepBytes("olmoe-1b-7b", 3194880)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	for _, tc := range []struct {
		depth, n int
		tokens   int64
		seconds  float64
	}{{1, 128, 127, 0.127}, {2048, 128, 381, 0.5}} {
		for _, gpu := range []string{o.GPU, "NVIDIA H100 80GB HBM3"} {
			c := &Config{Edition: "e", ID: "c", Device: "cuda", GPU: gpu, Arch: "olmoe-1b-7b", Capacity: 64, Experts: 64, RecordBytes: 3194880,
				Depths: []*Depth{{Prompt: "d", Tokens: tc.depth, Output: tc.n, DecodeTokens: tc.tokens, DecodeSeconds: tc.seconds}}}
			var out bytes.Buffer
			if err := writeDepths(func(f string, a ...any) { fmt.Fprintf(&out, f, a...) }, []*Config{c}, o); err != nil {
				t.Fatal(err)
			}
			ceil := o.HBMBytesPerS / (float64(b.Total()) + float64(kv)*(float64(tc.depth)+float64(tc.n)/2))
			rate := float64(tc.tokens) / tc.seconds
			ceilCol, ofCol := fmt.Sprintf("%.0f", ceil), fmt.Sprintf("%.0f%%", 100*rate/ceil)
			if gpu != o.GPU { // the figures are another GPU's: no ceiling
				ceilCol, ofCol = "UNKNOWN", "UNKNOWN"
			}
			want := fmt.Sprintf("| %.1f | %.0f | %.1f | %s | %s |", rate, float64(b.Total())/1e6,
				float64(kv)*(float64(tc.depth)+float64(tc.n)/2)/1e6, ceilCol, ofCol)
			if !strings.Contains(out.String(), want) {
				t.Fatalf("depth %d on %s: section\n%s\nwant a row ending %s", tc.depth, gpu, out.String(), want)
			}
		}
	}
}

// TestOtherGPU: the figures belong to one GPU (Options.GPU). A cuda
// configuration whose records name another, several or none has no
// ceiling: its decode row reads UNKNOWN where the ceiling and its share
// would be, HBMCeilings leaves it out, and the section names it; a
// configuration of the figures' GPU keeps its numbers.
func TestOtherGPU(t *testing.T) {
	o := DefaultOptions()
	b, err := StepBytes("olmoe-1b-7b", 3194880)
	if err != nil {
		t.Fatal(err)
	}
	conf := func(id, gpu string) *Config {
		return &Config{Edition: "e", ID: id, Device: "cuda", GPU: gpu, Arch: "olmoe-1b-7b", Executor: "grouped-v1", Capacity: 64, Experts: 64,
			Transport: "staged", StepMode: "graph-full", RecordBytes: 3194880, Model: editions.Model{Layers: 16, ExpertsPerLayer: 64},
			Requests: 1, DecodeTokens: 127, DecodeSeconds: 0.127, Steps: 184, MaxSeq: 184, VRAMPeak: -1, VRAMProcPeak: -1}
	}
	confs := []*Config{conf("h200", o.GPU), conf("h100", "NVIDIA H100 80GB HBM3"), conf("mixed", "")}
	var out strings.Builder
	if err := WriteSections(&out, confs, nil, o, 2); err != nil {
		t.Fatal(err)
	}
	ceil := o.HBMBytesPerS / float64(b.Total())
	for _, want := range []string{
		fmt.Sprintf("| e | h200 | grouped-v1 | 64/64 | graph-full | staged | 1000.0 | %.0f | %.0f | %.0f%% |", float64(b.Total())/1e6, ceil, 1e5/ceil),
		fmt.Sprintf("| e | h100 | grouped-v1 | 64/64 | graph-full | staged | 1000.0 | %.0f | UNKNOWN | UNKNOWN |", float64(b.Total())/1e6),
		fmt.Sprintf("| e | mixed | grouped-v1 | 64/64 | graph-full | staged | 1000.0 | %.0f | UNKNOWN | UNKNOWN |", float64(b.Total())/1e6),
		"These figures are the NVIDIA H200's. Configurations measured on another GPU have no ceiling here (UNKNOWN): h100 (NVIDIA H100 80GB HBM3), mixed (records name several GPUs, or none).",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, out.String())
		}
	}
	got := HBMCeilings(confs, o)
	if len(got) != 1 || got["h200"] != ceil {
		t.Errorf("HBMCeilings = %v, want only h200 at %.1f", got, ceil)
	}
	// Figures given for the H100 rate the H100's configuration instead.
	o.GPU = "NVIDIA H100 80GB HBM3"
	if got := HBMCeilings(confs, o); len(got) != 1 || got["h100"] == 0 {
		t.Errorf("HBMCeilings with the H100's figures = %v, want only h100", got)
	}
}

// TestPrefillShape pins the prefill arithmetic against the shapes' own
// counts (results/prefill-h200-s17: ~2.15 GFLOP of matrix products a token
// for OLMoE-1B-7B, ~4.1 for Qwen1.5-MoE-A2.7B).
func TestPrefillShape(t *testing.T) {
	tests := []struct {
		arch          string
		matmul, tol   float64
		attnPerPos    float64
		headBytes     int64
		chunkMoreThan int64
	}{
		// q,k,v,o 4 x 2048^2 + router 64 x 2048 per layer, 16 layers; 8 experts x 3 x 1024 x 2048
		{"olmoe-1b-7b", 2 * 16 * (4*2048*2048 + 64*2048 + 8*3*1024*2048), 0, 4 * 16 * 128 * 16, 50304 * 2048 * 2, 400e6},
		{"qwen15-moe-a27b", 4.1e9, 0.03, 4 * 16 * 128 * 24, 151936 * 2048 * 2, 2e9},
	}
	for _, tc := range tests {
		s, err := PrefillShapeOf(tc.arch)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(s.MatmulFLOPs-tc.matmul) > tc.tol*tc.matmul {
			t.Errorf("%s: %.4g matmul FLOPs a token, want %.4g within %.0f%%", tc.arch, s.MatmulFLOPs, tc.matmul, 100*tc.tol)
		}
		if s.AttnFLOPsPerPos != tc.attnPerPos {
			t.Errorf("%s: %g attention FLOPs a position, want %g", tc.arch, s.AttnFLOPsPerPos, tc.attnPerPos)
		}
		if s.HeadBytes != tc.headBytes {
			t.Errorf("%s: lm_head %d bytes, want %d", tc.arch, s.HeadBytes, tc.headBytes)
		}
		if s.ChunkBytes < tc.chunkMoreThan {
			t.Errorf("%s: %d chunk bytes, want more than %d", tc.arch, s.ChunkBytes, tc.chunkMoreThan)
		}
		// One chunk up to PrefillChunk positions, a second one after it.
		one, two := s.WeightsBytes(512, 0, 0), s.WeightsBytes(513, 0, 0)
		if two-one != s.ChunkBytes+s.RowBytes {
			t.Errorf("%s: a 513th position adds %d bytes, want a chunk and a row (%d)", tc.arch, two-one, s.ChunkBytes+s.RowBytes)
		}
		if got := s.WeightsBytes(16, 10, 3); got != s.ChunkBytes+s.HeadBytes+16*s.RowBytes+30 {
			t.Errorf("%s: WeightsBytes(16, 10, 3) = %d", tc.arch, got)
		}
	}
}

// TestPrefillEdition: a prefill contract's edition (the committed CPU smoke)
// loads without a decode, gathers each prompt length with its routing-trace
// reads, and prints the prefill section and the VRAM section only (no
// decode table of NaN rates); an edition of another contract gathers none.
func TestPrefillEdition(t *testing.T) {
	real, err := LoadEdition("../editions/smoke-cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range real {
		if c.Prefills != nil {
			t.Fatalf("%s: a PERF-REAL-v1 configuration got prefill lengths", c.ID)
		}
	}
	confs, err := LoadEdition("../editions/prefill-smoke-cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range confs {
		if len(c.Prefills) == 0 {
			t.Fatalf("%s: no prefill lengths", c.ID)
		}
		for _, x := range c.Prefills {
			if x.Traced != x.Requests || x.Reads <= 0 || x.Timed != x.Requests || x.TokS() <= 0 {
				t.Errorf("%s/%s: %+v: want every request traced and timed, reads > 0", c.ID, x.Prompt, *x)
			}
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, confs, nil, DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, bad := range []string{"NaN", "Inf", "Decode against the HBM"} {
		if strings.Contains(out, bad) {
			t.Fatalf("prefill report holds %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{"## Prefill against its ceilings", "## Whole-worker VRAM"} {
		if !strings.Contains(out, want) {
			t.Fatalf("prefill report lacks %q:\n%s", want, out)
		}
	}
	checkGolden(t, "prefill-smoke-cpu.md", buf.Bytes())

	// Given with a decode edition, the prefill configurations stay out of
	// the decode and partial-residency tables (no NaN rate judged within
	// its bound) and keep their prefill section.
	buf.Reset()
	if err := Write(&buf, append(real, confs...), nil, DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	out = buf.String()
	for _, bad := range []string{"NaN", "Inf"} {
		if strings.Contains(out, bad) {
			t.Fatalf("mixed report holds %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{"## Prefill against its ceilings", "## Decode against the HBM", "## Whole-worker VRAM"} {
		if !strings.Contains(out, want) {
			t.Fatalf("mixed report lacks %q:\n%s", want, out)
		}
	}
	for _, c := range confs {
		if n := strings.Count(out, "| "+c.Edition+" | "+c.ID+" | "); n < len(c.Prefills)+1 {
			t.Errorf("%s: %d rows, want its %d prefill rows and a VRAM row", c.ID, n, len(c.Prefills))
		}
	}
}

// checkGolden compares a report with testdata/name (rewritten with -update).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./ceilings/ -update)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("report differs from %s (run go test ./ceilings/ -update after checking the change)", golden)
	}
}

// TestPrefillChunkIsTheEngines: the ceilings count a prefill's weight
// reads per chunk of the engine's own size (ceilings restates the constant
// so that it does not depend on the runtime).
func TestPrefillChunkIsTheEngines(t *testing.T) {
	if PrefillChunk != engine.PrefillChunk {
		t.Fatalf("ceilings.PrefillChunk = %d, runtime/engine.PrefillChunk = %d", PrefillChunk, engine.PrefillChunk)
	}
}

// TestSectionVersions: today's format comes first and is Section's text;
// the earlier format judges the VRAM table on the device reading, without
// the margin column.
func TestSectionVersions(t *testing.T) {
	dir := "../editions/technical-preview-v3"
	vs, err := SectionVersions(dir)
	if err != nil {
		t.Fatal(err)
	}
	now, ok := Section(dir)
	if !ok || len(vs) != 2 || vs[0] != now {
		t.Fatalf("%d versions, the first equal to Section's: %v", len(vs), len(vs) > 0 && vs[0] == now)
	}
	if vs[1] == vs[0] || !strings.Contains(vs[0], "device reading vs limit") || strings.Contains(vs[1], "device reading vs limit") {
		t.Fatal("the earlier format is not the VRAM table without its device-reading column")
	}
	if _, err := SectionVersions(t.TempDir()); err == nil {
		t.Fatal("SectionVersions of a directory without raw records did not fail")
	}
}
