package ceilings

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	golden := filepath.Join("testdata", "smoke-cpu.md")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./ceilings/ -update)", err)
	}
	if out != string(want) {
		t.Fatalf("report differs from %s (run go test ./ceilings/ -update after checking the change)", golden)
	}
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
