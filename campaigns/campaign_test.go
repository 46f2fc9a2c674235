package campaigns

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
)

const miniContract = "testdata/mini-contract.yaml"

func TestGoodCampaigns(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yml")
	if len(files) == 0 {
		t.Fatal("no good fixtures")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, _, _, err := Load(f, miniContract)
			if err != nil {
				t.Fatal(err)
			}
			for _, cfg := range c.Configurations {
				if cfg.Placement != "canonical" || cfg.Policy != "lru" || cfg.ExpertFormat == "" || cfg.Transport != "staged" {
					t.Errorf("%s: defaults not applied: %+v", cfg.ID, cfg)
				}
			}
		})
	}
}

// Each bad fixture fails with one precise message.
func TestBadCampaigns(t *testing.T) {
	want := map[string]string{
		"unknown-field.bad.yml":          `line 7: unknown field "capacty"`,
		"capacity-above-experts.bad.yml": `configuration "olmoe-c17": capacity 17 is above the 16 experts per layer of synthetic olmoe-tiny seed 1`,
		"capacity-below-topk.bad.yml":    `configuration "olmoe-c3": capacity 3 is below top-k 4 of synthetic olmoe-tiny seed 1`,
		"unknown-executor.bad.yml":       `configuration "olmoe-c8": executor "turbo-v9" is unknown (known: scalar-v1, grouped-v1, fused-topk-v1)`,
		"missing-checkpoint.bad.yml":     `configuration "olmoe-c8": checkpoint is missing: give synthetic: {arch, seed} or hf: {dir, revision}`,
		"missing-hf-dir.bad.yml":         `configuration "olmoe-c8": checkpoint: hf.dir testdata/no-such-checkpoint does not exist`,
		"unknown-arch.bad.yml":           `configuration "olmoe-c8": checkpoint: synthetic arch "olmoe-huge" is unknown`,
		"contract-hash-mismatch.bad.yml": `contract PERF-MINI-TEST: the campaign declares sha256 "0000000000000000000000000000000000000000000000000000000000000000" but the contract's canonical hash is 3051d7dc`,
		"duplicate-id.bad.yml":           `configurations[1]: duplicate id "olmoe-c8"`,
		"bad-id.bad.yml":                 `configurations[0]: id "OLMoE_c8": ids become file names`,
		"seed-executor-mismatch.bad.yml": `configuration "olmoe-c8": seed_executor "PRODUCT-core scalar" maps to scalar-v1, but executor is grouped-v1`,
		"placement.bad.yml":              `configuration "olmoe-c8": placement "strided": contract PERF-MINI-TEST prescribes the canonical initial placement`,
		"two-checkpoints.bad.yml":        `configuration "olmoe-c8": checkpoint: give either synthetic or hf, not both`,
		"device.bad.yml":                 `device "tpu": want cpu or cuda`,
		"transport.bad.yml":              `configuration "olmoe-c8": transport "mapped": want staged (the default) or registered`,
		"prefetch.bad.yml":               `configuration "olmoe-c8": prefetch "previous-layer": want off (the default) or next-layer`,
		"transport-staging.bad.yml":      `configuration "olmoe-c8": staging 2 with transport registered: the registered transport copies from the page-locked authority and has no staging ring; leave staging unset`,
	}
	files, _ := filepath.Glob("testdata/*.bad.yml")
	if len(files) != len(want) {
		t.Errorf("%d bad fixtures, %d expected errors", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			w, ok := want[filepath.Base(f)]
			if !ok {
				t.Fatalf("no expected error for %s", f)
			}
			_, _, _, err := Load(f, miniContract)
			if err == nil {
				t.Fatal("loaded without error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, w)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// The committed campaigns validate against the built-in contract and keep
// the seed's configurations.
func TestCommittedCampaigns(t *testing.T) {
	cases := []struct {
		file    string
		configs int
		device  string
	}{
		{"smoke.yaml", 4, "cpu"},
		{"residency39.yaml", 13, "cuda"},
		{"residency-ablation.yaml", 11, "cuda"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			c, k, _, err := Load(tc.file, "")
			if err != nil {
				t.Fatal(err)
			}
			if k.ID != contracts.PerfRealV1 {
				t.Fatalf("runs %s, want %s", k.ID, contracts.PerfRealV1)
			}
			if len(c.Configurations) != tc.configs || c.Device != tc.device {
				t.Fatalf("%d configurations on %s, want %d on %s", len(c.Configurations), c.Device, tc.configs, tc.device)
			}
		})
	}
	// residency39 keeps each seed executor mapped to ours.
	c, _, _, err := Load("residency39.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range c.Configurations {
		if cfg.SeedExecutor == "" || SeedExecutors[cfg.SeedExecutor] != cfg.Executor {
			t.Errorf("%s: seed executor %q, executor %s", cfg.ID, cfg.SeedExecutor, cfg.Executor)
		}
		if cfg.Transport != "staged" {
			t.Errorf("%s: transport %q, residency39 runs the staged transport", cfg.ID, cfg.Transport)
		}
	}
	// The ablation measures the registered transport on two configurations
	// that differ from their staged twins in the transport only.
	c, _, _, err = Load("residency-ablation.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	registered := 0
	for _, cfg := range c.Configurations {
		if cfg.Transport != "registered" {
			continue
		}
		registered++
		twin, ok := c.Config(strings.TrimSuffix(cfg.ID, "-registered"))
		if !ok {
			t.Fatalf("%s: no staged twin", cfg.ID)
		}
		a, b := *twin, cfg
		a.ID, a.Transport = b.ID, b.Transport
		if twin.Transport != "staged" || !reflect.DeepEqual(a, b) {
			t.Errorf("%s differs from %s in more than the transport", cfg.ID, twin.ID)
		}
	}
	if registered != 2 {
		t.Errorf("%d registered configurations in residency-ablation.yaml, want 2", registered)
	}
}

// The campaign hash ignores formatting and follows the defaults.
func TestCampaignHash(t *testing.T) {
	c1, _, _, err := Load("testdata/mini.good.yml", miniContract)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("testdata/mini.good.yml")
	src := strings.Replace(string(b), "    capacity: 8\n", "    capacity: 8\n    placement: canonical\n    expert_format: int4\n    transport: staged\n", 1)
	p := filepath.Join(t.TempDir(), "mini.yml")
	os.WriteFile(p, []byte("# reformatted\n"+src), 0o644)
	c2, _, _, err := Load(p, miniContract)
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := c1.SHA256()
	h2, _ := c2.SHA256()
	if h1 != h2 {
		t.Fatalf("spelling out the defaults changed the hash")
	}
	doc, _ := c1.Doc()
	back, err := FromDoc(doc, "")
	if err != nil {
		t.Fatal(err)
	}
	if h3, _ := back.SHA256(); h3 != h1 {
		t.Fatal("the frozen campaign does not read back to the same campaign")
	}
	// A campaign frozen before the transport field existed has none in its
	// JSON: it still reads back with its own hash (and means staged).
	old := *c1
	old.Configurations = slices.Clone(c1.Configurations)
	for i := range old.Configurations {
		old.Configurations[i].Transport = ""
	}
	odoc, _ := old.Doc()
	if strings.Contains(string(odoc.Campaign), "transport") {
		t.Fatalf("an empty transport is written: %s", odoc.Campaign)
	}
	if _, err := FromDoc(odoc, ""); err != nil {
		t.Fatalf("a frozen campaign without transport: %v", err)
	}
}
