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

// The depth campaigns: the smoke one validates on the cpu, the H200 one on
// cuda, with the configurations issue 16 names (and, on cuda, the FP16-mode
// twins at full residency), each with an FP16 KV cache.
func TestDepthCampaigns(t *testing.T) {
	for _, tc := range []struct {
		file, contract, device string
		configs                []string
	}{
		{"depth-smoke.yaml", contracts.PerfDepthSmokeV1, "cpu", []string{"olmoe-tiny-c16", "olmoe-tiny-c6", "qwen2moe-tiny-c16", "qwen2moe-tiny-c8"}},
		{"depth.yaml", contracts.PerfDepthV1, "cuda", []string{"olmoe-0924-c64-grouped", "olmoe-0924-c30-grouped", "qwen15-c60-grouped", "qwen15-c30-grouped", "olmoe-0924-c64-grouped-a16", "qwen15-c60-grouped-a16"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c, k, _, err := Load(tc.file, "", rt)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, cfg := range c.Configurations {
				ids = append(ids, cfg.ID)
			}
			if k.ID != tc.contract || c.Device != tc.device || strings.Join(ids, ",") != strings.Join(tc.configs, ",") {
				t.Fatalf("%s: contract %s on %s, configurations %v", tc.file, k.ID, c.Device, ids)
			}
			// Issue 16 wants an FP16 KV cache at depth.
			for _, cfg := range c.Configurations {
				if cfg.KVOf() != KVFP16 {
					t.Errorf("%s: %s declares kv %q, want fp16", tc.file, cfg.ID, cfg.KV)
				}
			}
		})
	}
}

// A required depth beyond a checkpoint's context is refused at validation
// with one precise message; a where-held one is not (the worker leaves it
// out where it does not fit).
func TestDepthsFitContext(t *testing.T) {
	base, _ := contracts.EmbeddedYAML(contracts.PerfDepthSmokeV1)
	for _, tc := range []struct {
		name, arch string
		tokens     string // the deepest depth's declared length
		context    string // its context requirement
		err        string
	}{
		{"required, fits olmoe-tiny's 4096", "olmoe-tiny", "4033", "required", ""},
		{"required, one past olmoe-tiny's 4096", "olmoe-tiny", "4034", "required", "needs 4097 positions per request (its longest required prompt plus its output tokens, less one), above the 4096-position context (max_position_embeddings) of synthetic olmoe-tiny seed 1"},
		{"where-held, past olmoe-tiny's 4096", "olmoe-tiny", "8000", "where-held", ""},
		{"required, past qwen2moe-tiny's 8192", "qwen2moe-tiny", "8200", "required", "above the 8192-position context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			y := strings.Replace(string(base), "    tokens: 256\n    context: required\n", "    tokens: "+tc.tokens+"\n    context: "+tc.context+"\n", 1)
			kpath := filepath.Join(dir, "contract.yaml")
			if err := os.WriteFile(kpath, []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			k, err := contracts.LoadFile(kpath)
			if err != nil {
				t.Fatal(err)
			}
			if k.Prompts[len(k.Prompts)-1].Tokens == 256 {
				t.Fatal("the contract edit did not apply")
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
			case tc.err != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("error %v, want one line containing %q", err, tc.err)
			}
		})
	}
}
