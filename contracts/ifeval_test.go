package contracts

import (
	"errors"
	"strings"
	"testing"
)

// TestIFEvalContracts: both built-in IFEval contracts parse, their hashes
// are what the committed campaigns pin (a change to either contract must
// be reviewed and the campaigns updated), and their shards cover the
// population exactly once.
func TestIFEvalContracts(t *testing.T) {
	for _, tc := range []struct {
		id, sha            string
		prompts, max, shrd int
	}{
		{IFEvalV1, "3ba60cd52892da415d03e84260dce826df8a434334852d4e40f7cdbc97828137", 541, 1280, 9},
		{IFEvalSmokeV1, "50000ee5f280edb775250567b84fe2f0047ab3bba269651bf596670f38ed4944", 12, 32, 2},
	} {
		t.Run(tc.id, func(t *testing.T) {
			k, err := EmbeddedIFEval(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if sum, _ := k.SHA256(); sum != tc.sha {
				t.Errorf("sha256 %s, want %s (update campaigns/ifeval*.yaml and this test when the contract changes on purpose)", sum, tc.sha)
			}
			if k.Input.Prompts != tc.prompts || k.MaxNewTokens != tc.max || k.Shards() != tc.shrd {
				t.Errorf("%d prompts, max %d, %d shards; want %d, %d, %d", k.Input.Prompts, k.MaxNewTokens, k.Shards(), tc.prompts, tc.max, tc.shrd)
			}
			next := 0
			for s := 1; s <= k.Shards(); s++ {
				lo, hi := k.ShardRange(s)
				if lo != next || hi <= lo {
					t.Fatalf("shard %d covers %d..%d after %d", s, lo, hi, next)
				}
				next = hi
			}
			if next != k.Input.Prompts {
				t.Fatalf("shards end at %d of %d prompts", next, k.Input.Prompts)
			}
			b, err := k.JSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := IFEvalFromJSON(b)
			if err != nil {
				t.Fatal(err)
			}
			if s2, _ := back.SHA256(); s2 != tc.sha {
				t.Fatalf("the JSON form hashes to %s", s2)
			}
		})
	}
	if IsIFEval(PerfRealV1) || !IsIFEval(IFEvalV1) {
		t.Fatal("IsIFEval")
	}
}

// TestIFEvalValidate: each broken term gives one precise error.
func TestIFEvalValidate(t *testing.T) {
	good := func() *IFEval {
		k, err := EmbeddedIFEval(IFEvalSmokeV1)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, tc := range []struct {
		name string
		edit func(*IFEval)
		want string
	}{
		{"unknown id", func(k *IFEval) { k.ID = "IFEVAL-v9" }, "id"},
		{"bad hash", func(k *IFEval) { k.Input.SHA256 = "abc" }, "input.sha256"},
		{"subset size", func(k *IFEval) { k.Input.First = 5 }, "input.first 5"},
		{"no tokens", func(k *IFEval) { k.MaxNewTokens = 0 }, "max_new_tokens"},
		{"sampling", func(k *IFEval) { k.Selection = "top-p" }, "greedy"},
		{"eos suppressed", func(k *IFEval) { k.EOS = "suppressed" }, "ends"},
		{"format", func(k *IFEval) { k.PromptFormat = "alpaca" }, "prompt_format"},
		{"shards", func(k *IFEval) { k.ShardPrompts = 0 }, "shard_prompts"},
		{"scorer", func(k *IFEval) { k.Scorer = "" }, "scorer"},
		{"duplicate metric", func(k *IFEval) { k.Metrics = append(k.Metrics, k.Metrics[0]) }, "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := good()
			tc.edit(k)
			err := k.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an ErrInvalid naming %q", err, tc.want)
			}
		})
	}
	if _, err := ParseIFEval([]byte("id: IFEVAL-v1\nbogus: 1\n"), "x.yaml"); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("unknown field: %v", err)
	}
}
