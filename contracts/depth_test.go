package contracts

import (
	"strings"
	"testing"
)

// TestPerfDepthContracts holds the depth contracts to what they state: the
// depths (prompt lengths) in order with their context requirement, the
// output length, the protocol shared with PERF-REAL-v1, and the prompts
// made from PERF-REAL-v1's texts by repeat-truncate-v1.
func TestPerfDepthContracts(t *testing.T) {
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
		id       string
		depths   []int
		held     []bool // where-held, by depth
		output   int
		required int // MaxPositions: the deepest required request
	}{
		{PerfDepthV1, []int{1, 512, 2048, 3968, 8064}, []bool{false, false, false, false, true}, 128, 3968 + 127},
		{PerfDepthSmokeV1, []int{1, 64, 256}, []bool{false, false, false}, 64, 256 + 63},
	} {
		t.Run(tc.id, func(t *testing.T) {
			k, err := Embedded(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if k.Blocks != 3 || k.OutputTokens != tc.output || !k.Warmup.Excluded || k.Concurrency != 1 || k.Selection != "greedy" || k.EOS != "suppressed" {
				t.Fatalf("blocks %d, output %d, warmup excluded %v, concurrency %d", k.Blocks, k.OutputTokens, k.Warmup.Excluded, k.Concurrency)
			}
			if !k.DecodeByPrompt() || k.PromptRule == nil || k.PromptRule.ID != RepeatTruncateV1 || k.Warmup.Prompt.Text != source {
				t.Fatalf("prompt rule %+v, decode by prompt %v", k.PromptRule, k.DecodeByPrompt())
			}
			if len(k.Prompts) != len(tc.depths) {
				t.Fatalf("%d depths, want %d", len(k.Prompts), len(tc.depths))
			}
			for i, p := range k.Prompts {
				if p.Tokens != tc.depths[i] || p.Text != source || (p.Context == ContextWhereHeld) != tc.held[i] {
					t.Errorf("depth %d: %s tokens %d context %q", i, p.ID, p.Tokens, p.Context)
				}
				ids, err := PromptIDs(k.PromptRule, p, byteEncode)
				if err != nil || len(ids) != p.Tokens {
					t.Errorf("%s: %d ids, %v", p.ID, len(ids), err)
				}
			}
			if got := k.MaxPositions(); got != tc.required {
				t.Errorf("MaxPositions %d, want %d (where-held depths do not count)", got, tc.required)
			}
		})
	}
}

func TestPromptsFor(t *testing.T) {
	k, err := Embedded(PerfDepthV1)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(ps []Prompt) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.ID)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name      string
		positions int
		want      string
	}{
		{"OLMoE-1B-7B (4096 positions)", 4096, "d0,d512,d2048,d3968"},
		{"Qwen1.5-MoE (8192 positions)", 8192, "d0,d512,d2048,d3968,d8064"},
		{"one position short of the deepest", 8064 + 126, "d0,d512,d2048,d3968"},
		{"exactly the deepest", 8064 + 127, "d0,d512,d2048,d3968,d8064"},
		{"unknown context runs everything", 0, "d0,d512,d2048,d3968,d8064"},
		{"a required depth is never dropped", 1024, "d0,d512,d2048,d3968"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(k.PromptsFor(tc.positions)); got != tc.want {
				t.Errorf("PromptsFor(%d) = %s, want %s", tc.positions, got, tc.want)
			}
		})
	}
}

func TestPromptContextValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(k *Contract)
		want string
	}{
		{"unknown context", func(k *Contract) { k.Prompts[1].Context = "sometimes" }, `context "sometimes": want required or where-held`},
		{"context without a prompt rule", func(k *Contract) {
			k.PromptRule = nil
			for i := range k.Prompts {
				k.Prompts[i].Tokens = 0
			}
			k.Warmup.Prompt.Tokens = 0
			k.Prompts[0].Context = ContextRequired
		}, "without a prompt_rule: whether the context holds a prompt needs its declared length"},
		{"where-held warmup", func(k *Contract) { k.Warmup.Prompt.Context = ContextWhereHeld }, "the warmup runs on every configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Embedded(PerfDepthV1)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(k)
			err = k.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}
