package campaigns

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// Load reads a campaign and its contract and validates one against the
// other. contractPath selects a contract file (tests use small contracts);
// "" takes the built-in contract the campaign names; cat answers the
// runtime's names and the checkpoints' shapes (worker.Runtime). Nothing is
// written.
func Load(campaignPath, contractPath string, cat Catalog) (*Campaign, *contracts.Contract, string, error) {
	c, err := LoadFile(campaignPath)
	if err != nil {
		return nil, nil, "", err
	}
	var k *contracts.Contract
	if contractPath != "" {
		k, err = contracts.LoadFile(contractPath)
	} else {
		if c.Contract.ID == "" {
			return nil, nil, "", fmt.Errorf("campaign %s: %w: contract.id is missing", campaignPath, ErrInvalid)
		}
		k, err = contracts.Embedded(c.Contract.ID)
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("campaign %s: %w", campaignPath, err)
	}
	sum, err := k.SHA256()
	if err != nil {
		return nil, nil, "", err
	}
	if err := c.Validate(k, sum, cat); err != nil {
		return nil, nil, "", fmt.Errorf("campaign %s: %w", campaignPath, err)
	}
	return c, k, sum, nil
}

// LoadFrozen reads the frozen campaign.json and contract.json a runner
// wrote for its workers, checking both hashes and that the campaign runs
// that contract.
func LoadFrozen(campaignPath, contractPath string) (*Campaign, *contracts.Contract, string, error) {
	var kd editions.ContractDoc
	if err := readJSONStrict(contractPath, &kd); err != nil {
		return nil, nil, "", err
	}
	k, err := ContractFromDoc(kd)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", contractPath, err)
	}
	var cd editions.CampaignDoc
	if err := readJSONStrict(campaignPath, &cd); err != nil {
		return nil, nil, "", err
	}
	c, err := FromDoc(cd, "")
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", campaignPath, err)
	}
	if c.Contract.ID != k.ID || c.Contract.SHA256 != kd.SHA256 {
		return nil, nil, "", fmt.Errorf("%s runs contract %s %s, %s is %s %s", campaignPath, c.Contract.ID, c.Contract.SHA256, contractPath, k.ID, kd.SHA256)
	}
	return c, k, kd.SHA256, nil
}

func readJSONStrict(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
