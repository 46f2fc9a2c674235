package contracts

import (
	"errors"
	"strings"
	"testing"
)

// TestFidelityContracts: both built-in fidelity contracts parse, their
// hashes are what the committed campaigns pin, their JSON form round-trips
// and their generation terms hold the declared population.
func TestFidelityContracts(t *testing.T) {
	for _, tc := range []struct {
		id, sha                  string
		prompts, max, shrd, topK int
	}{
		{FidelityV1, "e2e72b36e8adc176cbc582bc3aa31802dee7d75aed55511ef1e6ce210457277e", 120, 256, 3, 4},
		{FidelitySmokeV1, "262b348e6b7226d2b5aba7dc79ac1e25fb263f678facf48a48d7ff82230b2e32", 4, 12, 2, 4},
	} {
		t.Run(tc.id, func(t *testing.T) {
			k, err := EmbeddedFidelity(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			sum, _ := k.SHA256()
			if sum != tc.sha {
				t.Errorf("sha256 %s, want %s (update campaigns/fidelity*.yaml and this test when the contract changes on purpose)", sum, tc.sha)
			}
			if k.Input.Prompts != tc.prompts || k.Input.First != tc.prompts || k.MaxNewTokens != tc.max || k.Shards() != tc.shrd || k.TopK != tc.topK {
				t.Errorf("%d prompts, max %d, %d shards, top-%d; want %d, %d, %d, %d", k.Input.Prompts, k.MaxNewTokens, k.Shards(), k.TopK, tc.prompts, tc.max, tc.shrd, tc.topK)
			}
			if g := k.Generation(); g.ID != k.ID || g.MaxNewTokens != k.MaxNewTokens || g.Input != k.Input {
				t.Errorf("generation terms %+v", g)
			}
			b, err := k.JSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := FidelityFromJSON(b)
			if err != nil {
				t.Fatal(err)
			}
			if s2, _ := back.SHA256(); s2 != sum {
				t.Fatalf("the JSON form hashes to %s", s2)
			}
		})
	}
	if IsFidelity(IFEvalV1) || !IsFidelity(FidelityV1) || IsIFEval(FidelityV1) {
		t.Fatal("IsFidelity")
	}
}

// TestFidelityValidate: each broken term gives one precise error.
func TestFidelityValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Fidelity)
		want string
	}{
		{"unknown id", func(k *Fidelity) { k.ID = "FIDELITY-v9" }, "id"},
		{"an IFEval id", func(k *Fidelity) { k.ID = IFEvalV1 }, "id"},
		{"subset size", func(k *Fidelity) { k.Input.First = 5 }, "input.first 5"},
		{"sampling", func(k *Fidelity) { k.Selection = "top-p" }, "greedy"},
		{"arms swapped", func(k *Fidelity) { k.Arms = Arms{Reference: "int4", Treatment: "fp16"} }, "arms"},
		{"same arms", func(k *Fidelity) { k.Arms.Treatment = "fp16" }, "arms"},
		{"no top-k", func(k *Fidelity) { k.TopK = 0 }, "top_k"},
		{"few resamples", func(k *Fidelity) { k.Bootstrap.Resamples = 10 }, "bootstrap"},
		{"level", func(k *Fidelity) { k.Bootstrap.Level = 1 }, "bootstrap"},
		{"metric missing", func(k *Fidelity) { k.Metrics = k.Metrics[1:] }, "paired_regressions is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := EmbeddedFidelity(FidelitySmokeV1)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(k)
			err = k.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := ParseFidelity([]byte("id: FIDELITY-SMOKE-v1\nunknown: 1\n"), "x.yaml"); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("an unknown field: %v", err)
	}
}
