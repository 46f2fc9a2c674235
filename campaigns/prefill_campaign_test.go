package campaigns_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/contracts"
)

// The prefill campaigns: the smoke one validates on the cpu, the H200 one
// on cuda (its captured steps time prefill); a cuda configuration whose
// steps cannot time it (op by op, persistent, or auto with next-layer
// prefetch, which runs op by op) is refused at validation, before any
// artifact is prepared.
func TestPrefillCampaigns(t *testing.T) {
	c, k, _, err := Load("prefill-smoke.yaml", "", rt)
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != contracts.PerfPrefillSmokeV1 || len(c.Configurations) != 4 || c.Device != "cpu" {
		t.Fatalf("prefill-smoke.yaml: %s, %d configurations on %s", k.ID, len(c.Configurations), c.Device)
	}
	if c, _, _, err = Load("prefill.yaml", "", rt); err != nil || c.Device != "cuda" {
		t.Fatalf("prefill.yaml: %v", err)
	}
	src, err := os.ReadFile("prefill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The first configuration without its prefill: token, then the case's
	// lines: auto, unless a case declares it.
	const first = "    capacity: 64\n    executor: grouped-v1\n"
	for _, tc := range []struct{ add, err string }{
		{"", ""},
		{"    prefill: token\n", ""}, // as committed: timed in the captured graph-full steps
		{"    step_mode: graph-segmented\n", ""},
		// Auto prefill runs batched on cuda (raw version 3 on), timed on the
		// host in every step mode; token at a time it is timed only in the
		// captured steps, and next-layer prefetch runs it token at a time.
		{"    step_mode: ops\n", ""},
		{"    step_mode: persistent\n", ""},
		{"    step_mode: ops\n    prefill: token\n", "not in cuda's ops steps"},
		{"    step_mode: persistent\n    prefill: token\n", "not in cuda's persistent steps"},
		{"    prefetch: next-layer\n", "not in cuda's ops steps"},
		// A batched prefill is timed on the host in every step mode.
		{"    prefill: batched\n", ""},
		{"    step_mode: ops\n    prefill: batched\n", ""},
		{"    step_mode: persistent\n    prefill: batched\n", ""},
	} {
		t.Run(strings.TrimSpace(tc.add), func(t *testing.T) {
			y := strings.Replace(string(src), first+"    prefill: token\n", first+tc.add, 1)
			if y == string(src) && tc.add != "    prefill: token\n" {
				t.Fatal("prefill.yaml's first configuration no longer declares prefill: token after its executor")
			}
			path := filepath.Join(t.TempDir(), "prefill.yaml")
			if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := Load(path, "", rt)
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !errors.Is(err, ErrInvalid) ||
				!strings.Contains(err.Error(), "contract PERF-PREFILL-v1 requires prefill_seconds on cuda, but this build times the end of prefill only on cpu, cuda/graph-full") ||
				!strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// A declared prompt length beyond a checkpoint's context is refused at
// validation with one precise message, not at run time.
func TestPromptLengthsFitContext(t *testing.T) {
	base, _ := contracts.EmbeddedYAML(contracts.PerfPrefillSmokeV1)
	for _, tc := range []struct {
		name, arch string
		tokens     string // the last prompt's declared length
		err        string
	}{
		{"fits olmoe-tiny", "olmoe-tiny", "4096", ""},
		{"one past olmoe-tiny's 4096", "olmoe-tiny", "4097", "needs 4097 positions per request (its longest required prompt plus its output tokens, less one), above the 4096-position context (max_position_embeddings) of synthetic olmoe-tiny seed 1"},
		{"fits qwen2moe-tiny's 8192", "qwen2moe-tiny", "8192", ""},
		{"past qwen2moe-tiny", "qwen2moe-tiny", "9000", "above the 8192-position context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			y := strings.Replace(string(base), "    tokens: 256\n", "    tokens: "+tc.tokens+"\n", 1)
			kpath := filepath.Join(dir, "contract.yaml")
			if err := os.WriteFile(kpath, []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			k, err := contracts.LoadFile(kpath)
			if err != nil {
				t.Fatal(err)
			}
			sum, _ := k.SHA256()
			camp := "edition: x\ncontract: {id: " + k.ID + ", sha256: " + sum + "}\ndevice: cpu\nconfigurations:\n" +
				"  - {id: c, checkpoint: {synthetic: {arch: " + tc.arch + ", seed: 1}}, capacity: 16, executor: grouped-v1}\n"
			cpath := filepath.Join(dir, "campaign.yaml")
			if err := os.WriteFile(cpath, []byte(camp), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, _, err = Load(cpath, kpath, rt)
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}
