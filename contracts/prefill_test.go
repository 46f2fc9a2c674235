package contracts

import (
	"errors"
	"strings"
	"testing"
)

// byteEncode is the synthetic checkpoints' byte-level tokenizer: one id per
// byte.
func byteEncode(s string) ([]int, error) {
	ids := make([]int, len(s))
	for i := range len(s) {
		ids[i] = int(s[i])
	}
	return ids, nil
}

// wordEncode stands in for a BPE tokenizer: one id per space-separated word.
func wordEncode(s string) ([]int, error) {
	var ids []int
	for _, w := range strings.Fields(s) {
		ids = append(ids, len(w))
	}
	return ids, nil
}

func TestPerfPrefillContracts(t *testing.T) {
	real, err := Embedded(PerfRealV1)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, p := range real.Prompts {
		texts = append(texts, p.Text)
	}
	source := strings.Join(texts, " ")
	for _, tc := range []struct {
		id      string
		lengths []int
		warmup  int
	}{
		{PerfPrefillV1, []int{16, 64, 256, 1024, 2048}, 512},
		{PerfPrefillSmokeV1, []int{16, 64, 256}, 64},
	} {
		t.Run(tc.id, func(t *testing.T) {
			k, err := Embedded(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if k.Blocks != 3 || k.OutputTokens != 1 || k.Warmup.OutputTokens != 1 || !k.Warmup.Excluded || k.Concurrency != 1 || k.Selection != "greedy" {
				t.Fatalf("%s: blocks %d, output %d, warmup %d: want 3 blocks, 1 token, a 1-token excluded warmup, greedy, concurrency 1",
					tc.id, k.Blocks, k.OutputTokens, k.Warmup.OutputTokens)
			}
			if k.PromptRule == nil || k.PromptRule.ID != RepeatTruncateV1 || k.PromptRule.Separator != " " {
				t.Fatalf("%s: prompt rule %+v", tc.id, k.PromptRule)
			}
			if len(k.Prompts) != len(tc.lengths) || k.Warmup.Prompt.Tokens != tc.warmup || k.Warmup.Prompt.Text != source {
				t.Fatalf("%s: %d prompts, warmup %d tokens", tc.id, len(k.Prompts), k.Warmup.Prompt.Tokens)
			}
			for i, p := range k.Prompts {
				if p.Tokens != tc.lengths[i] || p.Text != source {
					t.Errorf("%s prompt %d (%s): %d tokens; want %d tokens of the PERF-REAL-v1 texts joined by one space", tc.id, i, p.ID, p.Tokens, tc.lengths[i])
				}
			}
			if k.MaxPromptTokens() != tc.lengths[len(tc.lengths)-1] {
				t.Errorf("MaxPromptTokens %d", k.MaxPromptTokens())
			}
			for _, id := range []string{"prefill_tok_s", "prefill_mean_tok_s", "prefill_median_tok_s", "prefill_mean_ci95_tok_s"} {
				if _, ok := k.Metric(id); !ok {
					t.Errorf("metric %s has no definition", id)
				}
			}
		})
	}
}

func TestPromptIDs(t *testing.T) {
	rule := &PromptRule{ID: RepeatTruncateV1, Separator: " ", Definition: "d"}
	text := "ab cd" // 5 bytes, 2 words
	for _, tc := range []struct {
		name   string
		rule   *PromptRule
		tokens int
		encode func(string) ([]int, error)
		want   []int
		err    string
	}{
		{"no rule: the text as it is", nil, 0, byteEncode, []int{'a', 'b', ' ', 'c', 'd'}, ""},
		{"bytes: truncated inside one copy", rule, 3, byteEncode, []int{'a', 'b', ' '}, ""},
		{"bytes: exactly one copy", rule, 5, byteEncode, []int{'a', 'b', ' ', 'c', 'd'}, ""},
		{"bytes: into the second copy, joined by the separator", rule, 8, byteEncode, []int{'a', 'b', ' ', 'c', 'd', ' ', 'a', 'b'}, ""},
		{"words: three copies", rule, 5, wordEncode, []int{2, 2, 2, 2, 2}, ""},
		{"no length", rule, 0, byteEncode, nil, "needs a length"},
		{"unknown rule", &PromptRule{ID: "other"}, 4, byteEncode, nil, "unknown"},
		{"an encoding that does not grow", rule, 4, func(string) ([]int, error) { return nil, nil }, nil, "fewer than"},
		{"encode fails", rule, 4, func(string) ([]int, error) { return nil, errors.New("boom") }, nil, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PromptIDs(tc.rule, Prompt{ID: "p", Text: text, Tokens: tc.tokens}, tc.encode)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestPromptRuleValidation(t *testing.T) {
	base, _ := EmbeddedYAML(PerfPrefillSmokeV1)
	for _, tc := range []struct{ name, old, new, err string }{
		{"a prompt without a length", "    tokens: 16\n", "", "every prompt declares its length"},
		{"an unknown rule", "id: repeat-truncate-v1", "id: repeat-v9", "prompt_rule.id"},
		{"no definition", "prompt_rule:\n  id: repeat-truncate-v1\n  separator: \" \"\n  definition: >-", "prompt_rule:\n  id: repeat-truncate-v1\n  separator: \" \"\n  definitionx: >-", "unknown field"},
		{"no output token", "output_tokens: 1\nselection", "output_tokens: 0\nselection", "output_tokens 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(string(base), tc.old, tc.new, 1)
			if y == string(base) {
				t.Fatalf("the case's text %q is not in the contract", tc.old)
			}
			_, err := Parse([]byte(y), "x")
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want one containing %q", err, tc.err)
			}
		})
	}
	// A declared length under a contract without a rule.
	real, _ := EmbeddedYAML(PerfRealV1)
	y := strings.Replace(string(real), "    text: \"Explain photosynthesis to a ten-year-old.\"\n", "    text: \"Explain photosynthesis to a ten-year-old.\"\n    tokens: 9\n", 1)
	if _, err := Parse([]byte(y), "x"); err == nil || !strings.Contains(err.Error(), "without a prompt_rule") {
		t.Fatalf("err %v", err)
	}
}
