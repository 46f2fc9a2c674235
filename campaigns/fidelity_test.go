package campaigns_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/contracts"
)

// TestFidelityCampaignFiles: both committed fidelity campaigns validate
// against their built-in contracts and pair every configuration.
func TestFidelityCampaignFiles(t *testing.T) {
	for _, tc := range []struct {
		file  string
		pairs []string
	}{
		{"fidelity-smoke.yaml", []string{"olmoe-tiny-int4/olmoe-tiny-fp16", "qwen2moe-tiny-int4/qwen2moe-tiny-fp16"}},
		{"fidelity.yaml", []string{"olmoe-int4-c64/olmoe-fp16-c64", "qwen-int4-c60/qwen-fp16-c60"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c, k, _, err := campaigns.LoadFidelity(tc.file, rt)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := c.Pairs(k)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Treatment.ID+"/"+p.Reference.ID)
			}
			if strings.Join(got, " ") != strings.Join(tc.pairs, " ") {
				t.Fatalf("pairs %v, want %v", got, tc.pairs)
			}
		})
	}
}

// TestFidelityPairs: configurations that do not form arm pairs are
// refused with one precise error.
func TestFidelityPairs(t *testing.T) {
	k, err := contracts.EmbeddedFidelity(contracts.FidelitySmokeV1)
	if err != nil {
		t.Fatal(err)
	}
	arm := func(id, format string, capacity int) campaigns.Configuration {
		return campaigns.Configuration{ID: id, ExpertFormat: format, Capacity: capacity, Executor: "grouped-v1",
			Checkpoint: campaigns.Checkpoint{Synthetic: &campaigns.Synthetic{Arch: "olmoe-tiny", Seed: 1}}}
	}
	for _, tc := range []struct {
		name string
		cfgs []campaigns.Configuration
		want string
	}{
		{"paired", []campaigns.Configuration{arm("a", "fp16", 16), arm("b", "int4", 16)}, ""},
		{"no reference", []campaigns.Configuration{arm("b", "int4", 16)}, "no fp16 configuration"},
		{"no treatment", []campaigns.Configuration{arm("a", "fp16", 16)}, "no int4 configuration pairs"},
		{"capacities differ", []campaigns.Configuration{arm("a", "fp16", 8), arm("b", "int4", 16)}, "no fp16 configuration"},
		{"two references", []campaigns.Configuration{arm("a", "fp16", 16), arm("c", "fp16", 16), arm("b", "int4", 16)}, "two reference arms"},
		{"one reference for two", []campaigns.Configuration{arm("a", "fp16", 16), arm("b", "int4", 16), arm("c", "int4", 16)}, "reference arm of two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &campaigns.Campaign{Configurations: tc.cfgs}
			_, err := c.Pairs(k)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (!errors.Is(err, campaigns.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}
