package contracts

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

func TestPerfRealV1(t *testing.T) {
	c, err := Embedded(PerfRealV1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Blocks != 3 || c.OutputTokens != 128 || c.Warmup.OutputTokens != 64 || len(c.Prompts) != 12 {
		t.Fatalf("PERF-REAL-v1 is 12 prompts x 3 blocks x 128 tokens with a 64-token warmup; got %d x %d x %d, warmup %d",
			len(c.Prompts), c.Blocks, c.OutputTokens, c.Warmup.OutputTokens)
	}
	topics := map[string]bool{}
	for _, p := range append(c.Prompts, c.Warmup.Prompt) {
		// Synthetic models use a byte-level tokenizer: bytes are tokens.
		if n := len(p.Text); n < 20 || n > 200 {
			t.Errorf("prompt %s has %d bytes, want 20..200", p.ID, n)
		}
		if !utf8.ValidString(p.Text) || p.Topic == "" {
			t.Errorf("prompt %s: text must be UTF-8 and the topic set", p.ID)
		}
		if topics[p.Topic] {
			t.Errorf("prompt %s repeats topic %s", p.ID, p.Topic)
		}
		topics[p.Topic] = true
	}
	for _, id := range []string{"pooled_decode_tok_s", "overall_output_tok_s", "ttft_mean_s", "response_mean_s",
		"vram_peak_bytes", "rss_peak_bytes", "h2d_bytes", "block_spread_decode_tok_s"} {
		if _, ok := c.Metric(id); !ok {
			t.Errorf("metric %s has no definition", id)
		}
	}
}

// The identity ignores YAML comments, key order and formatting, and
// changes with any value.
func TestHashIsCanonical(t *testing.T) {
	orig, _ := EmbeddedYAML(PerfRealV1)
	c1, err := Parse(orig, "orig")
	if err != nil {
		t.Fatal(err)
	}
	var node yaml.Node
	if err := yaml.Unmarshal(orig, &node); err != nil {
		t.Fatal(err)
	}
	// Reverse the top-level key order and drop comments.
	m := node.Content[0]
	var pairs [][2]*yaml.Node
	for i := 0; i < len(m.Content); i += 2 {
		pairs = append([][2]*yaml.Node{{m.Content[i], m.Content[i+1]}}, pairs...)
	}
	m.Content = m.Content[:0]
	for _, p := range pairs {
		m.Content = append(m.Content, p[0], p[1])
	}
	node.HeadComment = ""
	reordered, err := yaml.Marshal(&node)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Parse(reordered, "reordered")
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := c1.SHA256()
	h2, _ := c2.SHA256()
	if h1 != h2 {
		t.Fatalf("reformatting changed the hash: %s vs %s", h1, h2)
	}
	c2.Prompts[3].Text += "!"
	if h3, _ := c2.SHA256(); h3 == h1 {
		t.Fatal("changing a prompt did not change the hash")
	}
}

func TestCanonicalJSON(t *testing.T) {
	got, err := CanonicalJSON([]byte(`{ "b": [1, 2.50, {"z": "<&>", "a": null}], "a": true }`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":true,"b":[1,2.50,{"a":null,"z":"<&>"}]}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestBadContracts(t *testing.T) {
	orig, _ := EmbeddedYAML(PerfRealV1)
	cases := []struct {
		name, from, to, want string
	}{
		{"unknown field", "blocks: 3", "blocks: 3\nblockz: 4", `unknown field "blockz"`},
		{"sampling", "selection: greedy", "selection: top-p", `selection "top-p": the runner implements only greedy`},
		{"concurrency", "concurrency: 1", "concurrency: 4", "concurrency 4"},
		{"no token", "output_tokens: 128", "output_tokens: 0", "output_tokens 0: want at least 1"},
		{"duplicate prompt", "id: p02-cooking", "id: p01-astronomy", `duplicate prompt id "p01-astronomy"`},
		{"prompt id", "id: p02-cooking", "id: P02", `id "P02": use lowercase letters`},
		{"requirement", "cpu: unsupported\n    cuda: required\n", "cpu: maybe\n    cuda: required\n", `cpu requirement "maybe"`},
		{"measured warmup", "excluded: true", "excluded: false", "warmup.excluded must be true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(string(orig), tc.from, tc.to, 1)
			if src == string(orig) {
				t.Fatalf("%q not found in the contract", tc.from)
			}
			_, err := Parse([]byte(src), "bad.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if tc.name != "unknown field" && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}
