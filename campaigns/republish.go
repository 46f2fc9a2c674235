package campaigns

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// Republish rewrites the derived documents of the edition in dir (its
// configuration documents, claims, reports, plots and manifest) with this
// build's writer, from its raw records and frozen campaign and contract,
// which are kept byte for byte. The manifest keeps the original creation
// time and tool (the build that ran the workers) and appends this build's
// republication with reason. The new edition replaces the old one in one
// rename (publish), so dir is never half written. ceil gives the cuda
// reports' ceilings section and headline ceilings (the Runtime's); nil
// leaves them out.
func Republish(dir, reason string, ceil Ceilings) error {
	var m editions.Manifest
	if err := readJSONStrict(filepath.Join(dir, editions.ManifestFile), &m); err != nil {
		return fmt.Errorf("%s is not an edition: %w", dir, err)
	}
	var cd editions.CampaignDoc
	var kd editions.ContractDoc
	if err := readJSONStrict(filepath.Join(dir, editions.CampaignFile), &cd); err != nil {
		return err
	}
	if err := readJSONStrict(filepath.Join(dir, editions.ContractFile), &kd); err != nil {
		return err
	}
	// The raw records are read from a copy outside dir: publish replaces
	// dir itself.
	src, err := os.MkdirTemp("", "horizon-republish-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := os.CopyFS(filepath.Join(src, "raw"), os.DirFS(filepath.Join(dir, "raw"))); err != nil {
		return fmt.Errorf("copy the raw records: %w", err)
	}
	sum, _, err := editions.HashFile(filepath.Join(dir, editions.ManifestFile))
	if err != nil {
		return err
	}
	rp := &report.Republish{Previous: m, PreviousSHA256: sum, Reason: reason}
	var ids struct {
		Configs []struct {
			ID string `json:"id"`
		} `json:"configurations"`
	}
	if err := json.Unmarshal(cd.Campaign, &ids); err != nil {
		return fmt.Errorf("campaign.json: %w", err)
	}
	if contracts.IsIFEval(kd.ID) {
		k, err := contracts.IFEvalFromJSON(kd.Contract)
		if err != nil {
			return fmt.Errorf("contract.json: %w", err)
		}
		shards := map[string][]*editions.IFEvalShard{}
		for _, c := range ids.Configs {
			for s := 1; s <= k.Shards(); s++ {
				sh, err := ReadIFEvalShard(filepath.Join(src, filepath.FromSlash(editions.IFEvalShardPath(c.ID, s))))
				if err != nil {
					return err
				}
				shards[c.ID] = append(shards[c.ID], sh)
			}
		}
		in := report.IFEvalInput{CampaignDoc: cd, ContractDoc: kd, Shards: shards, RunDir: src, Republish: rp}
		return publish(dir, true, func(d string) error { return report.WriteIFEvalEdition(d, in) })
	}
	if contracts.IsFidelity(kd.ID) {
		k, err := contracts.FidelityFromJSON(kd.Contract)
		if err != nil {
			return fmt.Errorf("contract.json: %w", err)
		}
		c, err := report.CampaignFromDoc(cd)
		if err != nil {
			return err
		}
		shards := map[string][]*editions.FidelityShard{}
		for _, id := range report.FidelityPairIDs(c, k) {
			for s := 1; s <= k.Shards(); s++ {
				sh, err := ReadFidelityShard(filepath.Join(src, filepath.FromSlash(editions.FidelityShardPath(id, s))))
				if err != nil {
					return err
				}
				shards[id] = append(shards[id], sh)
			}
		}
		in := report.FidelityInput{CampaignDoc: cd, ContractDoc: kd, Shards: shards, RunDir: src, Republish: rp}
		return publish(dir, true, func(d string) error { return report.WriteFidelityEdition(d, in) })
	}
	recs := map[string][]*editions.RawRecord{}
	for _, c := range ids.Configs {
		for b := 1; ; b++ {
			p := filepath.Join(src, filepath.FromSlash(editions.RawPath(c.ID, b)))
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				break
			}
			r, err := readRecord(p)
			if err != nil {
				return err
			}
			recs[c.ID] = append(recs[c.ID], r)
		}
		if len(recs[c.ID]) == 0 {
			return fmt.Errorf("configuration %s has no raw records in %s", c.ID, dir)
		}
	}
	in := report.EditionInput{CampaignDoc: cd, ContractDoc: kd, Records: recs, RunDir: src, Republish: rp}
	if ceil != nil {
		in.Ceilings, in.HBMCeilings = ceil.CeilingsSection, ceil.HBMCeilings
	}
	return publish(dir, true, func(d string) error { return report.WriteEdition(d, in) })
}
