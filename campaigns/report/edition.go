package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// EditionInput is everything an edition is made from: the frozen campaign
// and contract documents, the raw records, and the one section that needs
// the runtime's knowledge of architectures.
type EditionInput struct {
	CampaignDoc editions.CampaignDoc
	ContractDoc editions.ContractDoc
	// Records are each configuration's raw records in block order.
	Records map[string][]*editions.RawRecord
	// RunDir holds the raw record files (raw/<id>/block-<k>.json), copied
	// into the edition byte for byte.
	RunDir string
	// Now stamps the manifest; nil means time.Now.
	Now func() time.Time
	// Ceilings, for cuda editions, returns the Markdown of the speeds
	// beside their ceilings for the raw records already written under the
	// edition directory it is given (heading level 3), or a line saying why
	// they were not computed. It comes from outside because the ceilings
	// need the architectures' tensor shapes (runtime/model); the runner
	// passes its Runtime's CeilingsSection. nil leaves the section out.
	Ceilings func(editionDir string) string
	// HBMCeilings, for cuda editions, returns each configuration's HBM
	// decode ceiling in tok/s (package ceilings), for the report's
	// headlines; nil (or a configuration left out) shows none.
	HBMCeilings func(editionDir string) map[string]float64
	// WithoutUncertainty regenerates an edition made before
	// editions.BootstrapV1: its configuration documents carry no
	// uncertainty. The runner leaves it false, so new editions have it.
	WithoutUncertainty bool
	// Republish, when set, rewrites an existing edition's derived
	// documents: the manifest keeps the previous one's created_at and tool
	// and appends this build's republication (editions.Manifest).
	Republish *Republish
}

// Republish is what a republication keeps and adds to the manifest.
type Republish struct {
	Previous editions.Manifest
	// PreviousSHA256 is the SHA-256 of the previous manifest.json file.
	PreviousSHA256 string
	Reason         string
}

// reporters are the report formats of an edition, by file.
var reporters = []struct {
	file  string
	write Reporter
}{{editions.ReportMD, Markdown}, {editions.ReportHTML, HTML}}

// WriteEdition writes a complete edition into dir: the raw records, the
// frozen campaign and contract, one aggregate per configuration, the
// claims, the plots and both reports, and manifest.json last. Every JSON
// document is validated against its schema as it is written.
func WriteEdition(dir string, in EditionInput) error {
	c, err := CampaignFromDoc(in.CampaignDoc)
	if err != nil {
		return err
	}
	k, err := contracts.FromJSON(in.ContractDoc.Contract)
	if err != nil {
		return fmt.Errorf("frozen contract: %w", err)
	}
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
		d, err := Aggregate(c, k, cfg, recs)
		if err != nil {
			return err
		}
		if in.WithoutUncertainty {
			d.Uncertainty = nil
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
	routing, err := editionRouting(c, in.Records, docs)
	if err != nil {
		return err
	}
	plots, err := writePlots(dir, docs, routing, c)
	if err != nil {
		return err
	}
	var hbm map[string]float64
	if c.Device == "cuda" && in.HBMCeilings != nil {
		hbm = in.HBMCeilings(dir)
	}
	r := buildReport(c, k, in.ContractDoc.SHA256, in.Records, docs, routing, plots, len(claims.Claims), hbm)
	if c.Device == "cuda" && in.Ceilings != nil {
		r.Ceilings = in.Ceilings(dir)
	}
	for _, f := range reporters {
		var b bytes.Buffer
		if err := f.write(&b, &r); err != nil {
			return fmt.Errorf("%s: %w", f.file, err)
		}
		if err := editions.WriteFileAtomic(filepath.Join(dir, f.file), b.Bytes()); err != nil {
			return err
		}
	}
	return writeManifestAs(dir, c.Edition, in.Now, in.Republish)
}

// writeManifestAs is writeManifest, or with rp the republished manifest:
// the previous creation time and tool, its republications and this one.
func writeManifestAs(dir, edition string, now func() time.Time, rp *Republish) error {
	if rp == nil {
		return writeManifest(dir, edition, now)
	}
	if now == nil {
		now = time.Now
	}
	m, err := editions.BuildManifest(dir, edition, now(), rp.Previous.Tool)
	if err != nil {
		return err
	}
	m.CreatedAt = rp.Previous.CreatedAt
	m.Republished = append(append([]editions.Republication(nil), rp.Previous.Republished...),
		editions.Republication{At: now().UTC().Format(time.RFC3339), Tool: editions.ReadBuildInfo(), Reason: rp.Reason,
			PreviousManifestSHA256: rp.PreviousSHA256})
	return editions.WriteDoc(filepath.Join(dir, editions.ManifestFile), &m)
}

// writeManifest lists every file of dir in its manifest.json, created at
// now() (time.Now when nil), with this build's identity.
func writeManifest(dir, edition string, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	m, err := editions.BuildManifest(dir, edition, now(), editions.ReadBuildInfo())
	if err != nil {
		return err
	}
	return editions.WriteDoc(filepath.Join(dir, editions.ManifestFile), &m)
}
