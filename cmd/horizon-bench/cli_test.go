package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The CLI tests run the real binary: bad input must produce one clear error
// and leave nothing behind.

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "horizon-cli-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "horizon-bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// synth writes a tiny checkpoint and returns its directory.
func synth(t *testing.T, arch string, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), arch)
	if r := run(t, append([]string{"synth", "--arch", arch, "--seed", "1", "--out", dir}, extra...)...); r.code != 0 {
		t.Fatalf("synth: %d %s", r.code, r.stderr)
	}
	return dir
}

// onlyEntries fails unless dir holds exactly the named entries.
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want exactly %v (nothing half-written)", dir, got, names)
	}
}

func TestBadInput(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, ckpt string)
		arch  string
		shard string
		want  string
	}{
		{"missing shard", func(t *testing.T, ckpt string) {
			must(t, os.Remove(filepath.Join(ckpt, "model-00002-of-00004.safetensors")))
		}, "qwen2moe-tiny", "12000000", "model-00002-of-00004.safetensors"},
		{"truncated safetensors", func(t *testing.T, ckpt string) {
			p := filepath.Join(ckpt, "model.safetensors")
			st, err := os.Stat(p)
			must(t, err)
			must(t, os.Truncate(p, st.Size()-1000))
		}, "olmoe-tiny", "", "model.safetensors"},
		{"wrong tensor shape", func(t *testing.T, ckpt string) {
			p := filepath.Join(ckpt, "config.json")
			b, err := os.ReadFile(p)
			must(t, err)
			var m map[string]any
			must(t, json.Unmarshal(b, &m))
			m["vocab_size"] = 600
			b, _ = json.Marshal(m)
			must(t, os.WriteFile(p, b, 0o644))
		}, "olmoe-tiny", "", "shape"},
		{"unknown architecture", func(t *testing.T, ckpt string) {
			p := filepath.Join(ckpt, "config.json")
			b, err := os.ReadFile(p)
			must(t, err)
			must(t, os.WriteFile(p, []byte(strings.Replace(string(b), `"olmoe"`, `"mixtral"`, 1)), 0o644))
		}, "olmoe-tiny", "", `model_type "mixtral"`},
		{"NaN weight", func(t *testing.T, ckpt string) {
			// The first tensor in the data section is the embedding table.
			p := filepath.Join(ckpt, "model.safetensors")
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			must(t, err)
			defer f.Close()
			var n [8]byte
			_, err = f.ReadAt(n[:], 0)
			must(t, err)
			_, err = f.WriteAt([]byte{0xc0, 0x7f}, 8+int64(binary.LittleEndian.Uint64(n[:]))+2*300)
			must(t, err)
		}, "olmoe-tiny", "", "model.embed_tokens.weight"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var extra []string
			if c.shard != "" {
				extra = []string{"--shard-bytes", c.shard}
			}
			ckpt := synth(t, c.arch, extra...)
			c.setup(t, ckpt)
			parent := t.TempDir()
			out := filepath.Join(parent, "artifact")
			r := run(t, "prepare", "--checkpoint", ckpt, "--out", out)
			if r.code == 0 {
				t.Fatalf("prepare succeeded:\n%s", r.stdout)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Fatalf("error does not mention %q:\n%s", c.want, r.stderr)
			}
			onlyEntries(t, parent)
		})
	}
}

// TestUsageErrors: bad flag values exit 2 (usage) with a message naming them.
func TestUsageErrors(t *testing.T) {
	parent := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown arch", []string{"synth", "--arch", "gpt-9", "--seed", "1", "--out", filepath.Join(parent, "x")}, "gpt-9"},
		{"no out", []string{"synth", "--arch", "olmoe-tiny", "--seed", "1"}, "--out"},
		{"unknown step mode", []string{"generate", "--step-mode", "turbo", "--tokens", "2"}, `--step-mode "turbo"`},
		{"unknown prefetch", []string{"generate", "--prefetch", "previous-layer", "--tokens", "2"}, "previous-layer"},
		{"unknown overlap", []string{"generate", "--overlap", "miss-compute", "--tokens", "2"}, `--overlap "miss-compute": want one of [off hit-compute]`},
		{"unknown kv", []string{"generate", "--kv", "bf16", "--tokens", "2"}, `--kv: KV cache dtype "bf16": want fp32 or fp16`},
		{"kv fp16 persistent", []string{"generate", "--kv", "fp16", "--step-mode", "persistent", "--tokens", "2"}, "--kv fp16 with --step-mode persistent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want %d mentioning %q", r.code, r.stderr, exitUsage, c.want)
			}
		})
	}
	onlyEntries(t, parent)
}

// TestGenerateMainJob runs the README's main job and checks the JSON fields
// scripts rely on.
func TestGenerateMainJob(t *testing.T) {
	r := run(t, "generate", "--tokens", "8", "--capacity", "6", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		TokenIDs      []int   `json:"token_ids"`
		TTFT          float64 `json:"ttft_seconds"`
		DecodeSeconds float64 `json:"decode_seconds"`
		DecodeTokS    float64 `json:"decode_tok_s"`
		StepMode      string  `json:"step_mode"`
		Prefetch      string  `json:"prefetch"`
		Overlap       string  `json:"overlap"`
		KVDType       string  `json:"kv_dtype"`
		Cache         struct {
			Hits, Misses int64
			H2DBytes     int64 `json:"h2d_bytes"`
			D2H          int64 `json:"d2h_expert_bytes"`
		} `json:"cache"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(out.TokenIDs) != 8 || out.TTFT <= 0 || out.DecodeSeconds <= 0 || out.DecodeTokS <= 0 {
		t.Fatalf("unexpected output %+v", out)
	}
	if out.StepMode != "ops" || out.Prefetch != "off" || out.Overlap != "off" {
		t.Fatalf("step mode %q, prefetch %q, overlap %q; want ops, off, off on the cpu by default", out.StepMode, out.Prefetch, out.Overlap)
	}
	if out.Cache.Misses == 0 || out.Cache.H2DBytes == 0 || out.Cache.D2H != 0 {
		t.Fatalf("capacity 6 of 16 should miss and never copy back: %+v", out.Cache)
	}
	if out.KVDType != "FP32" {
		t.Fatalf("kv_dtype %q, want FP32 by default", out.KVDType)
	}
}

// TestGenerateKV: --kv fp16 runs the FP16 KV cache and says so in --json.
func TestGenerateKV(t *testing.T) {
	r := run(t, "generate", "--tokens", "4", "--kv", "fp16", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		TokenIDs []int  `json:"token_ids"`
		KVDType  string `json:"kv_dtype"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(out.TokenIDs) != 4 || out.KVDType != "FP16" {
		t.Fatalf("%d tokens, kv_dtype %q; want 4 and FP16", len(out.TokenIDs), out.KVDType)
	}
}

// TestGenerateExpertActivations: --expert-activations fp16 rounds the
// batched prefill's expert activations (other first-step logits than fp32's)
// and says so in --json; fp32, the default, says FP32.
func TestGenerateExpertActivations(t *testing.T) {
	dir := t.TempDir()
	gen := func(name string) (string, []byte) {
		t.Helper()
		p := filepath.Join(dir, name+".f32")
		r := run(t, "generate", "--tokens", "4", "--expert-activations", name, "--logits-out", p, "--json")
		if r.code != 0 {
			t.Fatalf("--expert-activations %s: exit %d: %s", name, r.code, r.stderr)
		}
		var out struct {
			TokenIDs []int  `json:"token_ids"`
			Act      string `json:"expert_activation_dtype"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		if len(out.TokenIDs) != 4 {
			t.Fatalf("--expert-activations %s: %d tokens, want 4", name, len(out.TokenIDs))
		}
		b, err := os.ReadFile(p)
		must(t, err)
		return out.Act, b
	}
	a32, l32 := gen("fp32")
	a16, l16 := gen("fp16")
	if a32 != "FP32" || a16 != "FP16" {
		t.Fatalf("expert_activation_dtype %q and %q; want FP32 and FP16", a32, a16)
	}
	if bytes.Equal(l32, l16) {
		t.Fatal("fp16 expert activations gave fp32's first-step logits bit for bit")
	}
}

// TestGenerateDenseActivations: --dense-activations fp16 rounds the
// batched prefill's dense projections' activations (other first-step
// logits than fp32's, on INT4 and on FP16 experts alike: unlike
// --expert-activations it needs no INT4 experts) and says so in --json,
// leaving expert_activation_dtype FP32; fp32, the default, says FP32.
func TestGenerateDenseActivations(t *testing.T) {
	dir := t.TempDir()
	gen := func(name, experts string) (string, string, []byte) {
		t.Helper()
		p := filepath.Join(dir, name+"-"+experts+".f32")
		r := run(t, "generate", "--tokens", "4", "--experts", experts, "--dense-activations", name, "--logits-out", p, "--json")
		if r.code != 0 {
			t.Fatalf("--dense-activations %s --experts %s: exit %d: %s", name, experts, r.code, r.stderr)
		}
		var out struct {
			TokenIDs []int  `json:"token_ids"`
			Dense    string `json:"dense_activation_dtype"`
			Expert   string `json:"expert_activation_dtype"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		if len(out.TokenIDs) != 4 {
			t.Fatalf("--dense-activations %s --experts %s: %d tokens, want 4", name, experts, len(out.TokenIDs))
		}
		b, err := os.ReadFile(p)
		must(t, err)
		return out.Dense, out.Expert, b
	}
	for _, experts := range []string{"int4", "fp16"} {
		d32, e32, l32 := gen("fp32", experts)
		d16, e16, l16 := gen("fp16", experts)
		if d32 != "FP32" || d16 != "FP16" {
			t.Fatalf("--experts %s: dense_activation_dtype %q and %q; want FP32 and FP16", experts, d32, d16)
		}
		if e32 != "FP32" || e16 != "FP32" {
			t.Fatalf("--experts %s: expert_activation_dtype %q and %q; want FP32 for both", experts, e32, e16)
		}
		if bytes.Equal(l32, l16) {
			t.Fatalf("--experts %s: fp16 dense activations gave fp32's first-step logits bit for bit", experts)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"capacity below top-k", []string{"--capacity", "3"}, 1, "capacity 3 outside 4..16"},
		{"capacity above experts", []string{"--capacity", "17"}, 1, "capacity 17 outside 4..16"},
		{"unknown executor", []string{"--executor", "magic-v9"}, 1, "unknown executor"},
		{"cuda without cuda build", []string{"--device", "cuda"}, 1, "make cuda"},
		{"bad device", []string{"--device", "tpu"}, exitUsage, "--device"},
		{"missing artifact", []string{"--artifact", "/nonexistent/artifact"}, 1, "open artifact"},
		{"overlap on the cpu", []string{"--capacity", "6", "--overlap", "hit-compute"}, 1, "graph-segmented steps"},
		{"overlap with prefetch", []string{"--capacity", "6", "--overlap", "hit-compute", "--prefetch", "next-layer"}, 1, "graph-segmented"},
		{"unknown expert activations", []string{"--expert-activations", "bf16"}, exitUsage, "--expert-activations: "},
		{"fp16 expert activations, token prefill", []string{"--expert-activations", "fp16", "--prefill", "token"}, exitUsage, "batched prefill"},
		{"fp16 expert activations on fp16 experts", []string{"--expert-activations", "fp16", "--experts", "fp16"}, 1, "apply to qpack-int4-b256-v1 experts only"},
		{"unknown dense activations", []string{"--dense-activations", "bf16"}, exitUsage, "--dense-activations: "},
		{"fp16 dense activations, token prefill", []string{"--dense-activations", "fp16", "--prefill", "token"}, exitUsage, "batched prefill"},
		{"fp16 dense activations, next-layer prefetch", []string{"--dense-activations", "fp16", "--prefetch", "next-layer"}, exitUsage, "--dense-activations fp16 applies to a batched prefill"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, append([]string{"generate", "--tokens", "2"}, c.args...)...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want %d mentioning %q", r.code, r.stderr, c.code, c.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestExitCodesAndVersion: the exit-code table in --help holds. Usage
// errors (unknown command, unknown flag, bad flag value, a missing campaign
// file) exit 2 with one line on stderr, not the help; --version answers
// with the build.
func TestExitCodesAndVersion(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string // a substring of the one stderr line ("" for none)
		stdout string // a substring of stdout
	}{
		{"version", []string{"--version"}, 0, "", "vcs revision"},
		{"no command prints the help", nil, 0, "", "Exit codes"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`, ""},
		{"unknown flag", []string{"generate", "--bogus"}, exitUsage, "flag provided but not defined: -bogus", ""},
		{"bad flag value", []string{"generate", "--tokens", "many"}, exitUsage, `invalid value "many"`, ""},
		{"missing campaign file", []string{"run", filepath.Join(t.TempDir(), "none.yaml")}, exitUsage, "is not a campaign file", ""},
		{"campaign is a directory", []string{"run", t.TempDir()}, exitUsage, "is not a campaign file", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkExit(t, run(t, c.args...), c.code, c.stderr, c.stdout)
		})
	}
}

// checkExit fails unless r exited with code, its stderr is one line
// mentioning stderr (when stderr is not empty), and its stdout mentions
// stdout.
func checkExit(t *testing.T, r result, code int, stderr, stdout string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if stderr != "" {
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], stderr) {
			t.Fatalf("stderr %q, want one line mentioning %q", r.stderr, stderr)
		}
	}
	if !strings.Contains(r.stdout, stdout) {
		t.Fatalf("stdout %q does not mention %q", r.stdout, stdout)
	}
}
