package campaigns_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/verifier"
)

// TestRunExpertActivations: the mini campaign with expert_activations fp16
// declared on one configuration runs on the CPU (batched prefill, INT4
// experts), its records state FP16 (artifact.expert_activation_dtype) and
// the other configuration's records leave the field out as FP32 records
// always have; the edition conforms, its results table shows the column,
// the verifier passes it, and a reproduction of an FP16 worker (pinned to
// the batched prefill it ran) gives identical tokens.
func TestRunExpertActivations(t *testing.T) {
	const a16, a32 = "qwen2moe-tiny-c8", "olmoe-tiny-c16"
	b, err := os.ReadFile("testdata/mini.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "    seed_executor: top4-fused-v1\n"
	if !strings.Contains(string(b), anchor) {
		t.Fatalf("testdata/mini.good.yml no longer declares %q", anchor)
	}
	src := strings.Replace(string(b), anchor, anchor+"    expert_activations: fp16\n", 1)
	tmp := t.TempDir()
	campaign := filepath.Join(tmp, "mini-a16.yml")
	if err := os.WriteFile(campaign, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ed := filepath.Join(tmp, "editions", "mini-a16")
	if _, err := Run(context.Background(), RunOptions{Runtime: rt, Campaign: campaign, Contract: miniContract, Out: ed,
		RunDir: newRunDir(t), Launch: testLauncher, Progress: &countingProgress{}}); err != nil {
		t.Fatal(err)
	}
	checkEdition(t, ed)

	c, k, _, err := LoadFrozen(filepath.Join(ed, editions.CampaignFile), filepath.Join(ed, editions.ContractFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, want string
	}{{a16, editions.ExpertActFP16}, {a32, ""}} {
		cfg, ok := c.Config(tc.id)
		if !ok {
			t.Fatalf("no configuration %s in the frozen campaign", tc.id)
		}
		for blk := 1; blk <= k.Blocks; blk++ {
			p := filepath.Join(ed, editions.RawPath(tc.id, blk))
			r, err := ReadRecord(p)
			if err != nil {
				t.Fatal(err)
			}
			if r.Artifact.ExpertActivationDType != tc.want || r.Artifact.ExpertActivationDTypeOf() != strings.ToUpper(cfg.ExpertActivationsOf()) {
				t.Errorf("%s block %d: expert_activation_dtype %q, want %q (declared %s)", tc.id, blk, r.Artifact.ExpertActivationDType, tc.want, cfg.ExpertActivationsOf())
			}
			if tc.want != "" && r.Setup.Prefill != PrefillBatched {
				t.Errorf("%s block %d: FP16 expert activations with prefill %q", tc.id, blk, r.Setup.Prefill)
			}
			raw, _ := os.ReadFile(p)
			if tc.want == "" && strings.Contains(string(raw), "expert_activation_dtype") {
				t.Errorf("%s block %d: an FP32 record states expert_activation_dtype", tc.id, blk)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(ed, editions.ReportMD))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "expert activations") {
		t.Error("report.md shows no expert activations column")
	}

	set, err := verifier.EmbeddedSchemas()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verifier.Verify(ed, verifier.Options{Schemas: set, ContractFile: miniContract})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Severity == verifier.Error || f.ID == verifier.IDPhysExpertActDType {
			t.Errorf("%s %s %s: %s", f.Severity, f.ID, f.Where(), f.Message)
		}
	}

	res, err := reproduceMini(t, ed, filepath.Join(tmp, "repro"), []string{a16}, []int{2}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Doc.Identical {
		t.Fatalf("a rerun FP16 worker: not identical: %+v", res.Doc.Workers)
	}
}
