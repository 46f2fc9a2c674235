package campaigns_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	. "github.com/horizon-runmap/horizon/campaigns"
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
			c, _, _, err := Load(f, miniContract, rt)
			if err != nil {
				t.Fatal(err)
			}
			for _, cfg := range c.Configurations {
				if cfg.Placement != "canonical" || cfg.Policy != "lru" || cfg.ExpertFormat == "" || cfg.Transport != "staged" ||
					cfg.Prefetch != "off" || cfg.Overlap != "off" {
					t.Errorf("%s: defaults not applied: %+v", cfg.ID, cfg)
				}
			}
		})
	}
}

// Each bad fixture fails with one precise message.
func TestBadCampaigns(t *testing.T) {
	want := map[string]string{
		"unknown-field.bad.yml":               `line 7: unknown field "capacty"`,
		"hosts.bad.yml":                       `hosts "several": want uniform (every worker on one GPU model and driver, the default) or mixed (each configuration's workers on one host)`,
		"capacity-above-experts.bad.yml":      `configuration "olmoe-c17": capacity 17 is above the 16 experts per layer of synthetic olmoe-tiny seed 1`,
		"capacity-below-topk.bad.yml":         `configuration "olmoe-c3": capacity 3 is below top-k 4 of synthetic olmoe-tiny seed 1`,
		"unknown-executor.bad.yml":            `configuration "olmoe-c8": executor "turbo-v9" is unknown (known: scalar-v1, grouped-v1)`,
		"missing-checkpoint.bad.yml":          `configuration "olmoe-c8": checkpoint is missing: give synthetic: {arch, seed} or hf: {dir, revision}`,
		"missing-hf-dir.bad.yml":              `configuration "olmoe-c8": checkpoint: hf.dir testdata/no-such-checkpoint does not exist`,
		"unknown-arch.bad.yml":                `configuration "olmoe-c8": checkpoint: synthetic arch "olmoe-huge" is unknown`,
		"contract-hash-mismatch.bad.yml":      `contract PERF-MINI-TEST: the campaign declares sha256 "0000000000000000000000000000000000000000000000000000000000000000" but the contract's canonical hash is 3051d7dc`,
		"duplicate-id.bad.yml":                `configurations[1]: duplicate id "olmoe-c8"`,
		"bad-id.bad.yml":                      `configurations[0]: id "OLMoE_c8": ids become file names`,
		"seed-executor-mismatch.bad.yml":      `configuration "olmoe-c8": seed_executor "PRODUCT-core scalar" maps to scalar-v1, but executor is grouped-v1`,
		"placement.bad.yml":                   `configuration "olmoe-c8": placement "strided": contract PERF-MINI-TEST prescribes the canonical initial placement`,
		"policy.bad.yml":                      `configuration "olmoe-c8": policy "lfu": contract PERF-MINI-TEST prescribes lru eviction`,
		"two-checkpoints.bad.yml":             `configuration "olmoe-c8": checkpoint: give either synthetic or hf, not both`,
		"device.bad.yml":                      `device "tpu": want cpu or cuda`,
		"transport.bad.yml":                   `configuration "olmoe-c8": transport "mapped": want staged (the default) or registered`,
		"prefetch.bad.yml":                    `configuration "olmoe-c8": prefetch "previous-layer": want off (the default) or next-layer`,
		"overlap.bad.yml":                     `configuration "olmoe-c8": overlap "miss-compute": want off (the default) or hit-compute`,
		"overlap-prefetch.bad.yml":            `configuration "olmoe-c8": overlap hit-compute with prefetch next-layer: overlap runs in captured graph-segmented steps and prefetch op by op; choose one`,
		"overlap-cpu.bad.yml":                 `configuration "olmoe-c8": overlap hit-compute on device cpu: overlap needs CUDA's graph-segmented steps`,
		"overlap-full.bad.yml":                `configuration "olmoe-c16": overlap hit-compute at full residency (capacity 16 of 16)`,
		"step-mode.bad.yml":                   `configuration "olmoe-c8": step_mode "graph-everything": want one of auto, ops, graph-full, graph-segmented, graph-wait, persistent`,
		"step-mode-cpu.bad.yml":               `configuration "olmoe-c8": step_mode graph-segmented on device cpu: captured steps are CUDA's`,
		"step-mode-full.bad.yml":              `configuration "olmoe-c8": step_mode graph-full at capacity 8 of 16: graph-full routes on the device`,
		"step-mode-prefetch.bad.yml":          `configuration "olmoe-c8": step_mode graph-segmented with prefetch next-layer: prefetch predicts between layers on the host`,
		"step-mode-overlap.bad.yml":           `configuration "olmoe-c8": step_mode graph-wait with overlap hit-compute: overlap runs in graph-segmented steps`,
		"transport-staging.bad.yml":           `configuration "olmoe-c8": staging 2 with transport registered: the registered transport copies from the page-locked authority and has no staging ring; leave staging unset`,
		"prefill.bad.yml":                     `configuration "olmoe-c8": prefill "eager": want one of auto, batched, token`,
		"prefill-prefetch.bad.yml":            `configuration "olmoe-c8": prefill batched with prefetch next-layer: next-layer prefetch predicts each position's next group`,
		"kv.bad.yml":                          `configuration "olmoe-c8": kv "bf16": want fp32 (the default) or fp16`,
		"kv-persistent.bad.yml":               `configuration "olmoe-c16": kv fp16 with step_mode persistent: the persistent kernel reads an FP32 KV cache only`,
		"expert-activations.bad.yml":          `configuration "olmoe-c8": expert_activations "bf16": want fp32 (the default) or fp16`,
		"expert-activations-experts.bad.yml":  `configuration "olmoe-c8": expert_activations fp16 with expert_format fp16: FP16 activations apply to INT4 experts only (W4A16)`,
		"expert-activations-token.bad.yml":    `configuration "olmoe-c8": expert_activations fp16 with prefill token: FP16 activations apply to a batched prefill's expert matmuls; use prefill auto or batched`,
		"expert-activations-prefetch.bad.yml": `configuration "olmoe-c8": expert_activations fp16 with prefetch next-layer: next-layer prefetch prefills token at a time`,
		"dense-activations.bad.yml":           `configuration "olmoe-c8": dense_activations "bf16": want fp32 (the default) or fp16`,
		"dense-activations-token.bad.yml":     `configuration "olmoe-c8": dense_activations fp16 with prefill token: FP16 activations apply to a batched prefill's dense projections; use prefill auto or batched`,
		"dense-activations-prefetch.bad.yml":  `configuration "olmoe-c8": dense_activations fp16 with prefetch next-layer: next-layer prefetch prefills token at a time`,
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
			_, _, _, err := Load(f, miniContract, rt)
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
		{"residency-ablation.yaml", 14, "cuda"},
		{"full-residency.yaml", 2, "cuda"},
		{"full-residency-v2.yaml", 2, "cuda"},
		{"smoke-cuda.yaml", 8, "cuda"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			c, k, _, err := Load(tc.file, "", rt)
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
	c, _, _, err := Load("residency39.yaml", "", rt)
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
	// The ablation measures the registered transport, miss/hit overlap and
	// next-layer prefetch on configurations that differ from a twin in
	// those fields only.
	c, _, _, err = Load("residency-ablation.yaml", "", rt)
	if err != nil {
		t.Fatal(err)
	}
	twins := []struct{ id, twin, differ string }{
		{"olmoe-0924-c30-grouped-registered", "olmoe-0924-c30-grouped", "transport"},
		{"olmoe-0924-c50-grouped-registered", "olmoe-0924-c50-grouped", "transport"},
		{"olmoe-0924-c30-overlap", "olmoe-0924-c30-grouped", "overlap"},
		{"olmoe-0924-c30-registered-overlap", "olmoe-0924-c30-grouped-registered", "overlap"},
		{"olmoe-0924-c30-registered-prefetch", "olmoe-0924-c30-grouped-registered", "prefetch"},
	}
	variants := map[string]bool{}
	for _, tw := range twins {
		variants[tw.id] = true
		cfg, ok := c.Config(tw.id)
		if !ok {
			t.Errorf("residency-ablation.yaml has no %s", tw.id)
			continue
		}
		twin, ok := c.Config(tw.twin)
		if !ok {
			t.Errorf("%s: no twin %s", tw.id, tw.twin)
			continue
		}
		a, b := *twin, *cfg
		a.ID = b.ID
		switch tw.differ {
		case "transport":
			a.Transport = b.Transport
		case "overlap":
			a.Overlap = b.Overlap
		case "prefetch":
			a.Prefetch, a.StepMode = b.Prefetch, b.StepMode // prefetch runs op by op
		}
		if reflect.DeepEqual(*twin, *cfg) || !reflect.DeepEqual(a, b) {
			t.Errorf("%s differs from %s in more or less than the %s", tw.id, tw.twin, tw.differ)
		}
	}
	for _, cfg := range c.Configurations {
		if variants[cfg.ID] {
			continue
		}
		if cfg.StepMode != StepGraphSegmented {
			t.Errorf("%s: step_mode %s: the ablation holds graph-segmented steps at every capacity", cfg.ID, cfg.StepMode)
		}
		if cfg.Transport != "staged" || cfg.Prefetch != "off" || cfg.Overlap != "off" {
			t.Errorf("%s: transport %s, prefetch %s, overlap %s: only the twins' variants leave the defaults",
				cfg.ID, cfg.Transport, cfg.Prefetch, cfg.Overlap)
		}
	}
	if cfg, ok := c.Config("olmoe-0924-c30-registered-overlap"); ok && (cfg.Transport != "registered" || cfg.Overlap != "hit-compute") {
		t.Errorf("olmoe-0924-c30-registered-overlap runs transport %s, overlap %s", cfg.Transport, cfg.Overlap)
	}
}

// The policy campaigns run PERF-POLICY-v1, whose cache admits declared
// policies: each policy configuration differs from its lru twin in the
// policy alone, and every shape has a full-residency configuration (the
// step time simulate's predictions need). A policy the contract does not
// admit is refused.
func TestPolicyCampaigns(t *testing.T) {
	for _, tc := range []struct {
		file, device string
		twins        map[string]string // configuration -> its lru twin
		full         []string
	}{
		{"policy-smoke.yaml", "cpu", map[string]string{"olmoe-tiny-c6-fifo": "olmoe-tiny-c6-lru", "olmoe-tiny-c6-lfu": "olmoe-tiny-c6-lru",
			"olmoe-tiny-c6-arc": "olmoe-tiny-c6-lru", "qwen2moe-tiny-c8-arc": "qwen2moe-tiny-c8-lru"}, []string{"olmoe-tiny-c16", "qwen2moe-tiny-c16"}},
		{"policy-ablation.yaml", "cuda", map[string]string{"olmoe-0924-c30-lfu": "olmoe-0924-c30-lru", "olmoe-0924-c30-arc": "olmoe-0924-c30-lru",
			"qwen15-c30-lfu": "qwen15-c30-lru", "qwen15-c30-arc": "qwen15-c30-lru"}, []string{"olmoe-0924-c64", "qwen15-c60"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c, k, _, err := Load(tc.file, "", rt)
			if err != nil {
				t.Fatal(err)
			}
			if k.ID != contracts.PerfPolicyV1 || c.Device != tc.device {
				t.Fatalf("runs %s on %s, want %s on %s", k.ID, c.Device, contracts.PerfPolicyV1, tc.device)
			}
			for id, twinID := range tc.twins {
				cfg, ok1 := c.Config(id)
				twin, ok2 := c.Config(twinID)
				if !ok1 || !ok2 {
					t.Fatalf("no %s or no %s", id, twinID)
				}
				if twin.Policy != "lru" || cfg.Policy == "lru" {
					t.Errorf("%s runs %s, its twin %s runs %s", id, cfg.Policy, twinID, twin.Policy)
				}
				a, b := *twin, *cfg
				a.ID, a.Policy = b.ID, b.Policy
				if !reflect.DeepEqual(a, b) {
					t.Errorf("%s differs from %s in more than the policy", id, twinID)
				}
			}
			for _, id := range tc.full {
				if cfg, ok := c.Config(id); !ok || cfg.Policy != "lru" {
					t.Errorf("no full-residency lru configuration %s", id)
				}
			}
		})
	}
	src, err := os.ReadFile("policy-smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(src), "policy: fifo", "policy: clock", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = Load(path, "", rt)
	if err == nil || !strings.Contains(err.Error(), `policy "clock": contract PERF-POLICY-v1 admits lru, fifo, lfu, arc`) {
		t.Fatalf("a policy outside the contract's: %v", err)
	}
}

// The campaign hash ignores formatting and follows the defaults.
func TestCampaignHash(t *testing.T) {
	c1, _, _, err := Load("testdata/mini.good.yml", miniContract, rt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("testdata/mini.good.yml")
	src := strings.Replace(string(b), "    capacity: 8\n", "    capacity: 8\n    placement: canonical\n    expert_format: int4\n    transport: staged\n    prefetch: off\n    overlap: off\n    kv: fp32\n    expert_activations: fp32\n    dense_activations: fp32\n", 1)
	p := filepath.Join(t.TempDir(), "mini.yml")
	os.WriteFile(p, []byte("# reformatted\n"+src), 0o644)
	c2, _, _, err := Load(p, miniContract, rt)
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
	// A campaign frozen before the transport, prefetch and overlap fields
	// existed has none of them in its JSON: it still reads back with its
	// own hash (and means staged, off, off).
	old := *c1
	old.Configurations = slices.Clone(c1.Configurations)
	for i := range old.Configurations {
		old.Configurations[i].Transport = ""
		old.Configurations[i].Prefetch = ""
		old.Configurations[i].Overlap = ""
	}
	odoc, _ := old.Doc()
	for _, f := range []string{"transport", "prefetch", "overlap"} {
		if strings.Contains(string(odoc.Campaign), f) {
			t.Fatalf("an empty %s is written: %s", f, odoc.Campaign)
		}
	}
	if _, err := FromDoc(odoc, ""); err != nil {
		t.Fatalf("a frozen campaign without transport, prefetch and overlap: %v", err)
	}
}

// The declared dtypes are part of the configuration's identity: kv fp16,
// expert_activations fp16 and dense_activations fp16 change the campaign
// hash and are frozen;
// fp32 is each one's default and hashes as an absent field (left out of
// the frozen campaign), so campaigns and the editions frozen from them made
// before the field keep their hash.
func TestCampaignHashDeclaredDTypes(t *testing.T) {
	base, _, _, err := Load("testdata/mini.good.yml", miniContract, rt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("testdata/mini.good.yml")
	for _, f := range []struct {
		field    string
		of       func(*Configuration) string // the dtype a configuration runs
		declared func(*Configuration) string // the field as parsed
	}{
		{"kv", (*Configuration).KVOf, func(c *Configuration) string { return c.KV }},
		{"expert_activations", (*Configuration).ExpertActivationsOf, func(c *Configuration) string { return c.ExpertActivations }},
		{"dense_activations", (*Configuration).DenseActivationsOf, func(c *Configuration) string { return c.DenseActivations }},
	} {
		t.Run(f.field, func(t *testing.T) {
			hashWith := func(v string) (string, *Campaign) {
				t.Helper()
				src := strings.Replace(string(b), "    capacity: 8\n", "    capacity: 8\n    "+f.field+": "+v+"\n", 1)
				p := filepath.Join(t.TempDir(), "mini.yml")
				if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				c, _, _, err := Load(p, miniContract, rt)
				if err != nil {
					t.Fatal(err)
				}
				h, _ := c.SHA256()
				return h, c
			}
			h0, _ := base.SHA256()
			h32, c32 := hashWith("fp32")
			h16, c16 := hashWith("fp16")
			if h32 != h0 {
				t.Errorf("%s fp32 spelled out changed the hash", f.field)
			}
			if h16 == h0 {
				t.Errorf("%s fp16 did not change the hash", f.field)
			}
			for _, c := range []struct {
				what string
				cfg  *Configuration
				want string
			}{{"no " + f.field, &base.Configurations[1], "fp32"}, {f.field + " fp32", &c32.Configurations[1], "fp32"}, {f.field + " fp16", &c16.Configurations[1], "fp16"}} {
				if got := f.of(c.cfg); got != c.want {
					t.Errorf("%s reads as %q", c.what, got)
				}
			}
			if doc, _ := c32.Doc(); strings.Contains(string(doc.Campaign), `"`+f.field+`"`) {
				t.Errorf("the frozen campaign states the default %s: %s", f.field, doc.Campaign)
			}
			doc, _ := c16.Doc()
			if !strings.Contains(string(doc.Campaign), `"`+f.field+`":"fp16"`) {
				t.Errorf("the frozen campaign does not declare %s fp16: %s", f.field, doc.Campaign)
			}
			back, err := FromDoc(doc, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := f.declared(&back.Configurations[1]); got != "fp16" {
				t.Errorf("%s reads back as %q", f.field, got)
			}
		})
	}
}

// TestDenseActivationsEitherExpertFormat: unlike expert_activations,
// dense_activations fp16 does not need INT4 experts (the dense projections
// are FP16 matrices in either expert format): the configuration that
// expert-activations-experts.bad.yml refuses validates with
// dense_activations fp16 instead, and full.good.yml declares it on FP16
// experts.
func TestDenseActivationsEitherExpertFormat(t *testing.T) {
	b, err := os.ReadFile("testdata/expert-activations-experts.bad.yml")
	if err != nil {
		t.Fatal(err)
	}
	const from, to = "    expert_activations: fp16\n", "    dense_activations: fp16\n"
	if !strings.Contains(string(b), "    expert_format: fp16\n") || !strings.Contains(string(b), from) {
		t.Fatalf("testdata/expert-activations-experts.bad.yml no longer declares FP16 experts and %q", from)
	}
	p := filepath.Join(t.TempDir(), "dense-fp16-experts.yml")
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, _, err := Load(p, miniContract, rt)
	if err != nil {
		t.Fatalf("dense_activations fp16 on FP16 experts: %v", err)
	}
	if cfg := c.Configurations[0]; cfg.ExpertFormat != "fp16" || cfg.DenseActivationsOf() != DenseActFP16 || cfg.ExpertActivationsOf() != ExpertActFP32 {
		t.Fatalf("runs %s experts, dense activations %s, expert activations %s; want fp16, fp16, fp32", cfg.ExpertFormat, cfg.DenseActivationsOf(), cfg.ExpertActivationsOf())
	}
	full, _, _, err := Load("testdata/full.good.yml", miniContract, rt)
	if err != nil {
		t.Fatal(err)
	}
	cfg, ok := full.Config("olmoe-c30")
	if !ok || cfg.ExpertFormat != "fp16" || cfg.DenseActivations != DenseActFP16 {
		t.Fatalf("full.good.yml's olmoe-c30: %+v; want FP16 experts with dense_activations fp16", cfg)
	}
}
