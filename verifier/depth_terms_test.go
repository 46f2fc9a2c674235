package verifier

import (
	"slices"
	"testing"
)

// contractTerms.runs is the verifier's own copy of contracts.PromptsFor: a
// where-held prompt runs only where the recorded context holds its
// request (tokens + output tokens - 1 positions), a required one always.
func TestContractTermsRuns(t *testing.T) {
	terms := &contractTerms{
		OutputTokens: 128, PromptRule: ruleRepeatTruncateV1,
		Prompts:      []string{"d0", "d512", "d3968", "d8064"},
		PromptTokens: []int{1, 512, 3968, 8064},
		WhereHeld:    []bool{false, false, false, true},
	}
	for _, tc := range []struct {
		name      string
		positions int
		want      []int
	}{
		{"OLMoE-1B-7B's 4096", 4096, []int{0, 1, 2}},
		{"Qwen1.5-MoE's 8192", 8192, []int{0, 1, 2, 3}},
		{"one short of the deepest", 8064 + 126, []int{0, 1, 2}},
		{"exactly the deepest", 8064 + 127, []int{0, 1, 2, 3}},
		{"not recorded: every prompt", 0, []int{0, 1, 2, 3}},
		{"required beyond the context still expected", 1000, []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := terms.runs(tc.positions); !slices.Equal(got, tc.want) {
				t.Errorf("runs(%d) = %v, want %v", tc.positions, got, tc.want)
			}
		})
	}
}
