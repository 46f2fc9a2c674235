package report_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/verifier"
)

// TestNewEditionUncertaintyVerifies writes a new edition from the committed
// smoke-cpu edition's frozen documents and raw records (as the runner
// would: with the bootstrap-v1 uncertainty and the interval columns), has
// horizon-verify's checks recompute it clean, and then moves one interval
// bound by one ulp (manifest rebuilt): a recompute.bootstrap finding.
func TestNewEditionUncertaintyVerifies(t *testing.T) {
	src := filepath.Join("..", "..", "editions", "smoke-cpu")
	var in report.EditionInput
	read := func(rel string, v any) {
		b, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	read(editions.CampaignFile, &in.CampaignDoc)
	read(editions.ContractFile, &in.ContractDoc)
	c, err := report.CampaignFromDoc(in.CampaignDoc)
	if err != nil {
		t.Fatal(err)
	}
	in.RunDir, in.Records = src, map[string][]*editions.RawRecord{}
	for _, cfg := range c.Configurations {
		for b := 1; ; b++ {
			rel := editions.RawPath(cfg.ID, b)
			if _, err := os.Stat(filepath.Join(src, filepath.FromSlash(rel))); err != nil {
				break
			}
			var r editions.RawRecord
			read(rel, &r)
			in.Records[cfg.ID] = append(in.Records[cfg.ID], &r)
		}
	}
	in.Now = func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }
	dir := filepath.Join(t.TempDir(), "smoke-cpu")
	if err := report.WriteEdition(dir, in); err != nil {
		t.Fatal(err)
	}
	// The manifest names the tool that ran the workers (the committed
	// edition's), not this test binary.
	var committed editions.Manifest
	read(editions.ManifestFile, &committed)
	remanifest := func() {
		m, err := editions.BuildManifest(dir, c.Edition, in.Now(), committed.Tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := editions.WriteDoc(filepath.Join(dir, editions.ManifestFile), &m); err != nil {
			t.Fatal(err)
		}
	}
	remanifest()
	schemas, err := verifier.EmbeddedSchemas()
	if err != nil {
		t.Fatal(err)
	}
	verify := func() *verifier.Report {
		rep, err := verifier.Verify(dir, verifier.Options{Schemas: schemas})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := verify(); !rep.Passed() {
		t.Fatalf("the new edition does not verify:\n%v", rep.Findings)
	}
	md, err := os.ReadFile(filepath.Join(dir, editions.ReportMD))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| pooled decode 95% CI (tok/s) |") {
		t.Error("report.md has no interval column")
	}

	id := c.Configurations[0].ID
	p := filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(id)))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var d editions.ConfigDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Uncertainty == nil || d.Uncertainty.Seed != report.DefaultBootstrapSeed {
		t.Fatalf("%s: uncertainty %+v", id, d.Uncertainty)
	}
	d.Uncertainty.PooledDecodeTokS.Hi = math.Nextafter(d.Uncertainty.PooledDecodeTokS.Hi, math.Inf(1))
	if err := editions.WriteDoc(p, &d); err != nil {
		t.Fatal(err)
	}
	// The careful tamperer's claim states the moved bound too.
	cp := filepath.Join(dir, editions.ClaimsFile)
	var cl editions.ClaimsDoc
	if b, err := os.ReadFile(cp); err != nil || json.Unmarshal(b, &cl) != nil {
		t.Fatalf("claims.json: %v", err)
	}
	for i := range cl.Claims {
		if c := &cl.Claims[i]; c.ID == id+".pooled_decode_tok_s" && c.Interval != nil {
			c.Interval.Hi.Value = d.Uncertainty.PooledDecodeTokS.Hi
		}
	}
	if err := editions.WriteDoc(cp, &cl); err != nil {
		t.Fatal(err)
	}
	remanifest()
	rep := verify()
	if rep.Passed() || !rep.Has(verifier.IDRecomputeBootstrap) {
		t.Fatalf("one ulp on the upper bound: want %s, got %v", verifier.IDRecomputeBootstrap, rep.Findings)
	}
	for _, f := range rep.Findings {
		if f.Severity == verifier.Error && f.ID != verifier.IDRecomputeBootstrap {
			t.Errorf("the tamper trips %s too: %s", f.ID, f.Message)
		}
	}
}
