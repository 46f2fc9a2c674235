package campaigns_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/verifier"
)

// TestRunDenseActivations: the mini campaign with dense_activations fp16
// declared on one configuration runs on the CPU (batched prefill), its
// records state FP16 (artifact.dense_activation_dtype, carried into
// configs/<id>.json) and the other configuration's records leave the field
// out as FP32 records always have; the edition conforms, and a record whose
// dense activation dtype is not the one its configuration declares does
// not; its results table shows the column, the verifier passes it, and a
// reproduction of an FP16 worker (pinned to the batched prefill it ran)
// gives identical tokens.
func TestRunDenseActivations(t *testing.T) {
	const d16, d32 = "qwen2moe-tiny-c8", "olmoe-tiny-c16"
	b, err := os.ReadFile("testdata/mini.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "    seed_executor: top4-fused-v1\n"
	if !strings.Contains(string(b), anchor) {
		t.Fatalf("testdata/mini.good.yml no longer declares %q", anchor)
	}
	src := strings.Replace(string(b), anchor, anchor+"    dense_activations: fp16\n", 1)
	tmp := t.TempDir()
	campaign := filepath.Join(tmp, "mini-d16.yml")
	if err := os.WriteFile(campaign, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ed := filepath.Join(tmp, "editions", "mini-d16")
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
	}{{d16, editions.ExpertActFP16}, {d32, ""}} {
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
			if r.Artifact.DenseActivationDType != tc.want || r.Artifact.DenseActivationDTypeOf() != strings.ToUpper(cfg.DenseActivationsOf()) {
				t.Errorf("%s block %d: dense_activation_dtype %q, want %q (declared %s)", tc.id, blk, r.Artifact.DenseActivationDType, tc.want, cfg.DenseActivationsOf())
			}
			if r.Artifact.ExpertActivationDType != "" {
				t.Errorf("%s block %d: dense_activations alone recorded expert_activation_dtype %q", tc.id, blk, r.Artifact.ExpertActivationDType)
			}
			if tc.want != "" && r.Setup.Prefill != PrefillBatched {
				t.Errorf("%s block %d: FP16 dense activations with prefill %q", tc.id, blk, r.Setup.Prefill)
			}
			raw, _ := os.ReadFile(p)
			if tc.want == "" && strings.Contains(string(raw), "dense_activation_dtype") {
				t.Errorf("%s block %d: an FP32 record states dense_activation_dtype", tc.id, blk)
			}

			// CheckRecord holds the record to the declaration both ways:
			// FP32 where fp16 is declared, FP16 where it is not.
			forged := *r
			forged.Artifact.DenseActivationDType = map[string]string{"": editions.ExpertActFP16, editions.ExpertActFP16: ""}[tc.want]
			if err := CheckRecord(k, c, cfg, blk, &forged); !errors.Is(err, ErrConformance) || !strings.Contains(err.Error(), "configured dense_activations "+cfg.DenseActivationsOf()) {
				t.Errorf("%s block %d: a record with dense_activation_dtype %q passes or fails otherwise: %v", tc.id, blk, forged.Artifact.DenseActivationDType, err)
			}
		}
		var doc editions.ConfigDoc
		if err := ReadJSONStrict(filepath.Join(ed, editions.ConfigPath(tc.id)), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Artifact.DenseActivationDType != tc.want {
			t.Errorf("%s: %s states dense_activation_dtype %q, want %q", tc.id, editions.ConfigPath(tc.id), doc.Artifact.DenseActivationDType, tc.want)
		}
	}
	md, err := os.ReadFile(filepath.Join(ed, editions.ReportMD))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "dense activations") {
		t.Error("report.md shows no dense activations column")
	}
	if strings.Contains(string(md), "expert activations") {
		t.Error("report.md shows an expert activations column for an edition without FP16 expert activations")
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
		if f.Severity == verifier.Error || strings.Contains(f.ID, "dense") {
			t.Errorf("%s %s %s: %s", f.Severity, f.ID, f.Where(), f.Message)
		}
	}

	res, err := reproduceMini(t, ed, filepath.Join(tmp, "repro"), []string{d16}, []int{2}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Doc.Identical {
		t.Fatalf("a rerun FP16 worker: not identical: %+v", res.Doc.Workers)
	}
}
