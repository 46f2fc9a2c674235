package ceilings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadLlamaBench reads session 36's OLMoE lines (pp16, pp512, tg128,
// tg128 @ d2048 from one H100 call) and refuses what is not a finished
// llama-bench result of a synthetic checkpoint's GGUF, naming the line.
func TestLoadLlamaBench(t *testing.T) {
	got, err := LoadLlamaBench("testdata/llama-bench-olmoe.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for _, l := range got {
		if l.Arch != "olmoe-1b-7b" || l.Seed != 924 || l.GPU != "NVIDIA H100 80GB HBM3" || l.BuildCommit != "82bb48500a9a" {
			t.Errorf("%s: %s-%d on %q by %q", l.File, l.Arch, l.Seed, l.GPU, l.BuildCommit)
		}
		tests = append(tests, l.Test())
	}
	if want := "pp16 pp512 tg128 tg128 @ d2048"; strings.Join(tests, " ") != want {
		t.Errorf("tests %q, want %q", strings.Join(tests, " "), want)
	}
	good, err := os.ReadFile("testdata/llama-bench-olmoe.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(good), "\n", 2)[0]
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "\n\n", "no llama-bench results"},
		{"not JSON", first + "\n{oops\n", "x.jsonl:2: not a llama-bench JSON line"},
		{"two values", first + " {}\n", "x.jsonl:1: more than one JSON value"},
		{"unnamed model", strings.Replace(first, "olmoe-1b-7b-924-q4e.gguf", "model.gguf", 1), "want <arch>-<seed>[-<tag>].gguf"},
		{"unknown preset", strings.Replace(first, "olmoe-1b-7b-924-q4e.gguf", "llama-7b-1-q4e.gguf", 1), `"llama-7b-1-q4e.gguf"`},
		{"no rate", strings.Replace(first, `"avg_ts": 4114.990556`, `"avg_ts": 0`, 1), "not a finished test"},
		{"no samples", strings.Replace(first, `"samples_ts": [ 4070.92, 4177.65, 4096.39 ]`, `"samples_ts": []`, 1), "not a finished test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.jsonl")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadLlamaBench(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestWritePeer pairs each full-residency cuda configuration with the
// peer's tests of its checkpoint: a prefill length with ppT, a depth's
// prefill with ppd and its decode with tgN @ dd (d0, a one-token prompt, with tgN at depth 0), a PERF-REAL-v1
// configuration's pooled decode with tg128. The ratio is given on the same
// GPU only; partial, cpu and other checkpoints' configurations get no row.
// The whole section is testdata/peer.md (-update rewrites it).
func TestWritePeer(t *testing.T) {
	peers, err := LoadLlamaBench("testdata/llama-bench-olmoe.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	const h100, h200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
	conf := func(id, gpu string, capacity int) *Config {
		return &Config{Edition: "e", ID: id, Device: "cuda", GPU: gpu, Arch: "olmoe-1b-7b", Seed: 924, Capacity: capacity, Experts: 64}
	}
	pre := conf("prefill-h100", h100, 64)
	pre.Prefills = []*PrefillLen{{Prompt: "pp16", Tokens: 16, Timed: 3, Seconds: 0.012}, {Prompt: "pp512", Tokens: 512, Timed: 3, Seconds: 0.045}}
	dep := conf("depth-h100", h100, 64)
	dep.Depths = []*Depth{
		{Prompt: "d0", Tokens: 1, Output: 128, DecodeTokens: 381, DecodeSeconds: 0.368, PrefillTimed: 3, PrefillSeconds: 0.015},
		{Prompt: "d512", Tokens: 512, Output: 128, DecodeTokens: 381, DecodeSeconds: 0.380, PrefillTimed: 3, PrefillSeconds: 0.06},
		{Prompt: "d2048", Tokens: 2048, Output: 128, DecodeTokens: 381, DecodeSeconds: 0.404},
	}
	real := conf("real-h200", h200, 64)
	real.DecodeTokens, real.DecodeSeconds = 1000, 0.9
	partial := conf("partial-h100", h100, 30)
	partial.DecodeTokens, partial.DecodeSeconds = 1000, 2
	other := conf("other-seed", h100, 64)
	other.Seed, other.DecodeTokens, other.DecodeSeconds = 1, 1000, 1
	cpu := conf("cpu", "UNSUPPORTED", 64)
	cpu.Device, cpu.DecodeTokens, cpu.DecodeSeconds = "cpu", 10, 1
	confs := []*Config{pre, dep, real, partial, other, cpu}

	rows := peerRows(confs, peers)
	var got []string
	for _, r := range rows {
		got = append(got, r.c.ID+" "+r.peer.Test())
	}
	// d0 has no prefill row (one token), d512 no decode row (the peer ran
	// no tg128 @ d512) and d2048 no prefill row (no timed prefill).
	want := "prefill-h100 pp16|prefill-h100 pp512|depth-h100 tg128|depth-h100 pp512|depth-h100 tg128 @ d2048|real-h200 tg128"
	if strings.Join(got, "|") != want {
		t.Errorf("pairs %q, want %q", strings.Join(got, "|"), want)
	}
	var b strings.Builder
	if err := WritePeer(&b, confs, peers, 2); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"| e | prefill-h100 | prefill pp512 (512 tokens) | NVIDIA H100 80GB HBM3 | 34133.3 | pp512 | 29102.5 ± 157.9 | NVIDIA H100 80GB HBM3 | 1.17x |",
		"| e | depth-h100 | decode after d0 (1 token), 128 out | NVIDIA H100 80GB HBM3 | 1035.3 | tg128 | 799.2 ± 13.4 | NVIDIA H100 80GB HBM3 | 1.30x |",
		"| e | depth-h100 | prefill of d512 (512 tokens) | NVIDIA H100 80GB HBM3 | 25600.0 | pp512 | 29102.5 ± 157.9 | NVIDIA H100 80GB HBM3 | 0.88x |",
		"| e | real-h200 | pooled decode | NVIDIA H200 | 1111.1 | tg128 | 799.2 ± 13.4 | NVIDIA H100 80GB HBM3 | - (other GPU) |",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("section lacks\n%s\n%s", line, b.String())
		}
	}
	golden := "testdata/peer.md"
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(g) != b.String() {
		t.Errorf("section differs from %s (go test -update rewrites it):\n%s", golden, b.String())
	}
	if err := WritePeer(&b, confs, nil, 2); err == nil {
		t.Error("WritePeer with no results: no error")
	}
}
