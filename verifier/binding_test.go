package verifier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// TestReleasedContracts: the table of released contracts is exactly
// contracts/*.yaml, each with the canonical hash package contracts gives
// it; and the verifier's generic YAML reading (contractFileHash) hashes
// each file to the same value, so --contract FILE means what it says.
func TestReleasedContracts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "contracts", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no contracts/*.yaml: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "ifeval") {
			// IFEval contracts: the ifeval check holds them to the built-in ones
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			k, err := contracts.ParseIFEval(b, f)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := contracts.EmbeddedIFEval(k.ID)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := k.SHA256()
			r, _ := rel.SHA256()
			if a != r {
				t.Errorf("%s: %s is not the built-in %s", f, a, r)
			}
			continue
		}
		if strings.HasPrefix(filepath.Base(f), "fidelity") {
			// fidelity contracts: the fidelity check holds them to the built-in ones
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			k, err := contracts.ParseFidelity(b, f)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := contracts.EmbeddedFidelity(k.ID)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := k.SHA256()
			r, _ := rel.SHA256()
			if a != r {
				t.Errorf("%s: %s is not the built-in %s", f, a, r)
			}
			continue
		}
		k, err := contracts.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := k.SHA256()
		if err != nil {
			t.Fatal(err)
		}
		if got := releasedContracts[k.ID]; got != want {
			t.Errorf("%s: releasedContracts[%q] = %q, want %s", f, k.ID, got, want)
		}
		id, got, err := contractFileHash(f)
		if err != nil || id != k.ID || got != want {
			t.Errorf("%s: contractFileHash = %s %s %v, want %s %s", f, id, got, err, k.ID, want)
		}
		seen[k.ID] = true
	}
	for id := range releasedContracts {
		if !seen[id] {
			t.Errorf("releasedContracts lists %s, which no contracts/*.yaml defines", id)
		}
	}
}

// TestFixtureContractYAMLHash: the YAML the fixture writes for its cut-down
// contract hashes (generically) to the hash package contracts gives it.
func TestFixtureContractYAMLHash(t *testing.T) {
	k := fixContract(t)
	want, err := k.SHA256()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "k.yaml")
	writeContractYAML(t, k, p)
	if _, got, err := contractFileHash(p); err != nil || got != want {
		t.Fatalf("contractFileHash = %s, %v; want %s", got, err, want)
	}
}

// TestClaimStatementsMatchRunner: the verifier's claim generator (ids,
// units, decimals, ratio pointers, statements, which claims are required)
// equals report.Claims on documents that exercise every branch.
func TestClaimStatementsMatchRunner(t *testing.T) {
	seed := int64(924)
	base := editions.ConfigDoc{ID: "c", Device: "cuda", Capacity: 30, ExpertsPerLayer: 64, Executor: "grouped-v1",
		Checkpoint: editions.Checkpoint{Kind: "synthetic", Arch: "olmoe-1b-7b", Seed: &seed}, Requests: 36, Blocks: 3}
	base.Metrics.RSSPeakBytes = editions.Observed[int64](1 << 30)
	base.Metrics.VRAMPeakBytes = editions.Observed[int64](5 << 30)
	var docs []editions.ConfigDoc
	for _, tc := range []struct {
		id  string
		mod func(d *editions.ConfigDoc)
	}{
		{"synthetic", func(d *editions.ConfigDoc) {}},
		{"no-seed", func(d *editions.ConfigDoc) { d.Checkpoint.Seed = nil }},
		{"hf-revision", func(d *editions.ConfigDoc) {
			d.Checkpoint = editions.Checkpoint{Kind: "hf", Arch: "qwen2_moe", Dir: "ckpt/qwen", Revision: "abc123"}
		}},
		{"hf", func(d *editions.ConfigDoc) {
			d.Checkpoint = editions.Checkpoint{Kind: "hf", Arch: "olmoe", Dir: "../x"}
		}},
		{"cpu-no-vram", func(d *editions.ConfigDoc) {
			d.Device, d.Metrics.VRAMPeakBytes = "cpu", editions.UnsupportedObs[int64]()
		}},
		{"rss-unknown", func(d *editions.ConfigDoc) { d.Metrics.RSSPeakBytes = editions.UnknownObs[int64]() }},
		{"seed-executor", func(d *editions.ConfigDoc) { d.SeedExecutor, d.Requests, d.Blocks = "Grouped T3", 12, 1 }},
	} {
		d := base
		d.ID = tc.id
		tc.mod(&d)
		docs = append(docs, d)
	}
	got := report.Claims(&report.Campaign{Edition: "e", Evidence: "E2", Publication: "public"}, docs)
	have := map[string]bool{}
	byID := map[string]*editions.ConfigDoc{}
	for i := range docs {
		byID[docs[i].ID] = &docs[i]
	}
	for _, c := range got.Claims {
		have[c.ID] = true
		cfg, metric, _ := strings.Cut(c.ID, ".")
		m, ok := claimMetricNamed(metric)
		if !ok {
			t.Errorf("the runner claims %s, a metric the verifier does not know", c.ID)
			continue
		}
		d := byID[cfg]
		if s := claimStatement(d, m); s != c.Statement {
			t.Errorf("%s statement:\n verifier %q\n runner   %q", c.ID, s, c.Statement)
		}
		if c.Unit != m.unit || c.Decimals != m.decimals || c.Source.Pointer != m.source() || c.Source.File != editions.ConfigPath(cfg) {
			t.Errorf("%s: unit %s decimals %d source %s#%s; verifier wants %s %d", c.ID, c.Unit, c.Decimals, c.Source.File, c.Source.Pointer, m.unit, m.decimals)
		}
		if (c.Numerator == nil) != (m.num == "") || (c.Numerator != nil && (c.Numerator.Pointer != m.num || c.Denominator.Pointer != m.den)) {
			t.Errorf("%s: ratio pointers differ from the verifier's %q / %q", c.ID, m.num, m.den)
		}
	}
	for i := range docs {
		for _, m := range claimMetrics {
			id := docs[i].ID + "." + m.name
			if m.required(&docs[i]) != have[id] {
				t.Errorf("%s: verifier requires it = %v, runner claims it = %v", id, m.required(&docs[i]), have[id])
			}
		}
	}
}

// TestCampaignFiles: each committed edition's frozen campaign is its
// campaign YAML under the generic comparison, and another campaign's YAML
// is not.
func TestCampaignFiles(t *testing.T) {
	schemas := fixtureSchemas(t)
	for _, tc := range []struct {
		edition, campaign string
		match             bool
	}{
		{"smoke-cpu", "smoke.yaml", true},
		{"full-residency-v1", "full-residency.yaml", true},
		// The edition ran the Qwen configurations as fused-topk-v1, retired in
		// issue 13; residency39.yaml now names grouped-v1 (the same steps).
		{"technical-preview-v3", "residency39.yaml", false},
		{"residency-ablation", "residency-ablation.yaml", true},
		{"smoke-cpu", "full-residency.yaml", false},
		{"technical-preview-v3", "residency-ablation.yaml", false},
	} {
		t.Run(tc.edition+"/"+tc.campaign, func(t *testing.T) {
			rep, err := Verify(filepath.Join("..", "editions", tc.edition),
				Options{Schemas: schemas, CampaignFile: filepath.Join("..", "campaigns", tc.campaign)})
			if err != nil {
				t.Skip(err)
			}
			if got := rep.Has(IDBindingCampaignFile); got == tc.match {
				t.Errorf("binding.campaign-file reported = %v, want %v:\n%s", got, !tc.match, findingsText(rep.Findings))
			}
		})
	}
}

func TestCompareDeclared(t *testing.T) {
	tree := func(s string) any {
		v, err := parseTree([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name, declared, frozen string
		diffs                  int
	}{
		{"equal, defaults added", `{"a":1,"b":{"c":"x"}}`, `{"a":1,"b":{"c":"x","d":2},"e":true}`, 0},
		{"numbers as numbers", `{"a":64,"b":1e3}`, `{"a":64.0,"b":1000}`, 0},
		{"big integers exactly", `{"seed":18446744073709551615}`, `{"seed":18446744073709551614}`, 1},
		{"declared key absent", `{"a":1,"b":2}`, `{"a":1}`, 1},
		{"other value", `{"a":"x"}`, `{"a":"y"}`, 1},
		{"list length", `{"a":[1,2]}`, `{"a":[1]}`, 1},
		{"list element", `{"a":[{"id":"p","c":1}]}`, `{"a":[{"id":"p","c":2}]}`, 1},
		{"type", `{"a":{"b":1}}`, `{"a":[1]}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out []declaredMismatch
			compareDeclared("", tree(tc.declared), tree(tc.frozen), &out)
			if len(out) != tc.diffs {
				t.Errorf("%d differences, want %d: %+v", len(out), tc.diffs, out)
			}
		})
	}
}

// TestContractOption: the fixture's unreleased contract is an error
// without --contract, accepted (with a hint) with its own YAML, and an
// error with another contract's YAML; a committed edition is pinned
// without the option and agrees with the released YAML.
func TestContractOption(t *testing.T) {
	schemas := fixtureSchemas(t)
	dir := newFixture(t)
	released := filepath.Join("..", "contracts", "perf-real-v1.yaml")
	for _, tc := range []struct {
		name, dir, file string
		want, not       string
	}{
		{"fixture, no file", dir, "", IDBindingContractUnpinned, IDBindingContractExplicit},
		{"fixture, its file", dir, fixtureContractFile(dir), IDBindingContractExplicit, IDBindingContractUnpinned},
		{"fixture, another contract's file", dir, released, IDBindingContractFile, IDBindingContractExplicit},
		{"fixture, no such file", dir, filepath.Join(t.TempDir(), "absent.yaml"), IDBindingContractFile, IDBindingContractUnpinned},
		{"committed, released file", filepath.Join("..", "editions", "smoke-cpu"), released, "", IDBindingContractFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Verify(tc.dir, Options{Schemas: schemas, ContractFile: tc.file})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && !rep.Has(tc.want) {
				t.Errorf("want %s:\n%s", tc.want, findingsText(rep.Findings))
			}
			if rep.Has(tc.not) {
				t.Errorf("unexpected %s:\n%s", tc.not, findingsText(rep.Findings))
			}
		})
	}
}

// TestClaimBindingCases: single bindings broken on the fixture, each
// caught by its own ID (the forgery suite covers the consistent ones).
func TestClaimBindingCases(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
		edit func(t *testing.T, c map[string]any)
	}{
		{"unknown metric", IDBindingClaimUnknown, func(t *testing.T, c map[string]any) { c["id"] = "tiny-c4.misses" }},
		{"unknown configuration", IDBindingClaimUnknown, func(t *testing.T, c map[string]any) { c["id"] = "tiny-c99.pooled_decode_tok_s" }},
		{"numerator from another file", IDBindingClaimRatio, func(t *testing.T, c map[string]any) {
			obj(t, c, "numerator")["file"] = editions.ConfigPath("tiny-c8")
		}},
		{"ratio dropped", IDBindingClaimRatio, func(t *testing.T, c map[string]any) { c["numerator"], c["denominator"] = nil, nil }},
		{"unit changed", IDBindingClaimTerms, func(t *testing.T, c map[string]any) { c["unit"] = "tokens/s/GPU" }},
		{"publication raised", IDBindingStatusRaised, func(t *testing.T, c map[string]any) { c["publication"] = "public" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newFixture(t)
			edit(t, dir, editions.ClaimsFile, func(d map[string]any) { tc.edit(t, obj(t, d, "claims", 0)) })
			rehash(t, dir)
			rep := verifyFixture(t, dir)
			if !rep.Has(tc.want) {
				t.Fatalf("want %s:\n%s", tc.want, findingsText(rep.Findings))
			}
		})
	}
}

// TestUnobservedRequiredZeroIsAnError: the retired hint is never reported;
// its replacement is an error.
func TestUnobservedRequiredZeroIsAnError(t *testing.T) {
	dir := newFixture(t)
	for _, p := range rawPathsOf(t, dir, "tiny-c8") {
		edit(t, dir, p, func(d map[string]any) {
			for _, q := range arr(t, d, "requests") {
				obj(t, q, "cache")["writebacks"] = editions.Unsupported
			}
		})
	}
	reaggregate(t, dir)
	rehash(t, dir)
	rep := verifyFixture(t, dir)
	if !rep.Has(IDInvRequiredZeroUnobserved) || rep.Has(IDInvUnknown) || rep.Passed() {
		t.Fatalf("want the error %s and never %s:\n%s", IDInvRequiredZeroUnobserved, IDInvUnknown, findingsText(rep.Findings))
	}
	if catalogue[IDInvUnknown].Severity != Hint || !strings.Contains(catalogue[IDInvUnknown].Summary, "retired") {
		t.Errorf("the retired ID keeps its catalogue entry, marked retired: %+v", catalogue[IDInvUnknown])
	}
}
