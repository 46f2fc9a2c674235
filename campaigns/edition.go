package campaigns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/ceilings"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// EditionInput is everything an edition is made from.
type EditionInput struct {
	Campaign    *Campaign
	CampaignDoc editions.CampaignDoc
	Contract    *contracts.Contract
	ContractDoc editions.ContractDoc
	// Records are each configuration's raw records in block order.
	Records map[string][]*editions.RawRecord
	// RunDir holds the raw record files (raw/<id>/block-<k>.json), copied
	// into the edition byte for byte.
	RunDir string
	// Now stamps the manifest; nil means time.Now.
	Now func() time.Time
}

// WriteEdition writes a complete edition into dir: the raw records, the
// frozen campaign and contract, one aggregate per configuration, the
// claims, the plots and both reports, and manifest.json last. Every JSON
// document is validated against its schema as it is written.
func WriteEdition(dir string, in EditionInput) error {
	c := in.Campaign
	var docs []editions.ConfigDoc
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		recs := in.Records[cfg.ID]
		for _, r := range recs {
			rel := editions.RawPath(cfg.ID, r.Block)
			b, err := os.ReadFile(filepath.Join(in.RunDir, filepath.FromSlash(rel)))
			if err != nil {
				return err
			}
			if err := editions.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(rel)), b); err != nil {
				return err
			}
		}
		d, err := Aggregate(c, cfg, recs)
		if err != nil {
			return err
		}
		if err := editions.WriteDoc(filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(cfg.ID))), &d); err != nil {
			return err
		}
		docs = append(docs, d)
	}
	if err := editions.WriteDoc(filepath.Join(dir, editions.CampaignFile), in.CampaignDoc); err != nil {
		return err
	}
	if err := editions.WriteDoc(filepath.Join(dir, editions.ContractFile), in.ContractDoc); err != nil {
		return err
	}
	claims := Claims(c, docs)
	if err := editions.WriteDoc(filepath.Join(dir, editions.ClaimsFile), &claims); err != nil {
		return err
	}
	plots, err := writePlots(dir, docs)
	if err != nil {
		return err
	}
	r := buildReport(in, docs, plots, len(claims.Claims))
	if c.Device == "cuda" {
		r.Ceilings = ceilingsMarkdown(dir)
	}
	if err := editions.WriteFileAtomic(filepath.Join(dir, editions.ReportMD), renderMD(r)); err != nil {
		return err
	}
	html, err := renderHTML(r)
	if err != nil {
		return fmt.Errorf("report.html: %w", err)
	}
	if err := editions.WriteFileAtomic(filepath.Join(dir, editions.ReportHTML), html); err != nil {
		return err
	}
	now := time.Now
	if in.Now != nil {
		now = in.Now
	}
	m, err := editions.BuildManifest(dir, c.Edition, now(), editions.ReadBuildInfo())
	if err != nil {
		return err
	}
	return editions.WriteDoc(filepath.Join(dir, editions.ManifestFile), &m)
}

// ceilingsMarkdown is package ceilings' sections for the raw records
// already written under dir, at heading level 3; where they cannot be
// computed (an architecture that is not a synthetic preset), a line that
// says why. It never fails the edition: the report only describes it.
func ceilingsMarkdown(dir string) string {
	confs, err := ceilings.LoadEdition(dir)
	if err == nil {
		var b strings.Builder
		if err = ceilings.WriteSections(&b, confs, nil, ceilings.DefaultOptions(), 3); err == nil {
			return b.String()
		}
	}
	return fmt.Sprintf("Not computed: %v.\n", err)
}
