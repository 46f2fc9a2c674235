package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func bytesOf(s string) []int {
	ids := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int(s[i])
	}
	return ids
}

func TestByteLevelRoundTrip(t *testing.T) {
	tok := NewByteLevel(258, []int{256})
	for _, tc := range []struct{ name, text string }{
		{"empty", ""},
		{"ascii", "Hello, world! 123"},
		{"multibyte", "naïve 東京 🚀"},
		{"controls", "tab\tnl\nnul\x00del\x7f"},
		{"special spelled out", "<|endoftext|>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, err := tok.Encode(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if want := bytesOf(tc.text); len(ids) != len(want) || (len(ids) > 0 && !reflect.DeepEqual(ids, want)) {
				t.Fatalf("Encode(%q) = %v, want %v", tc.text, ids, want)
			}
			if got := tok.Decode(ids); got != tc.text {
				t.Fatalf("Decode(Encode(%q)) = %q", tc.text, got)
			}
		})
	}
}

func TestByteLevelDecode(t *testing.T) {
	tok := NewByteLevel(512, []int{256, 300})
	for _, tc := range []struct {
		name string
		ids  []int
		want string
	}{
		{"nil", nil, ""},
		{"eos", []int{256}, ""},
		{"second eos", []int{'a', 300, 'b'}, "ab"},
		{"unused id", []int{'a', 257, 'b'}, "a<|257|>b"},
		{"out of vocab", []int{999}, "<|999|>"},
		{"negative", []int{-1}, "<|-1|>"},
		{"truncated 3-byte", []int{0xE6, 0x9D, 'a'}, "\uFFFDa"},
		{"lone continuations", []int{0x80, 0x80}, "\uFFFD\uFFFD"},
		{"truncated 4-byte", []int{0xF0, 0x9F, 0x9A}, "\uFFFD"},
		{"surrogate", []int{0xED, 0xA0, 0x80}, "\uFFFD\uFFFD\uFFFD"},
		{"invalid lead", []int{0xFF, 'x'}, "\uFFFDx"},
		// eos renders as nothing before the UTF-8 repair, as the HF decoder
		// skips special tokens before joining bytes.
		{"split by eos", []int{0xE6, 256, 0x9D, 0xB1}, "東"},
		{"whole rune", []int{0xE6, 0x9D, 0xB1}, "東"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tok.Decode(tc.ids); got != tc.want {
				t.Fatalf("Decode(%v) = %q, want %q", tc.ids, got, tc.want)
			}
		})
	}
}

func TestByteToRuneTable(t *testing.T) {
	for b, want := range map[int]rune{' ': 'Ġ', '\n': 'Ċ', 0: 'Ā', 'a': 'a', '!': '!', 0x7F: 'ġ', 0xAD: 'Ń', 0xFF: 'ÿ'} {
		if byteToRune[b] != want {
			t.Errorf("byteToRune[%#x] = %q, want %q", b, byteToRune[b], want)
		}
	}
	if len(runeToByte) != 256 {
		t.Fatalf("byteToRune is not a bijection: %d distinct runes", len(runeToByte))
	}
}

func writeJSON(t *testing.T, vocabSize int, eos []int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteByteLevelJSON(&b, vocabSize, eos); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestWriteByteLevelJSON(t *testing.T) {
	cases := []struct {
		vocab int
		eos   []int
	}{
		{256, nil},
		{258, []int{256}},
		{512, []int{300, 257, 511}},
	}
	for _, tc := range cases {
		a, b := writeJSON(t, tc.vocab, tc.eos), writeJSON(t, tc.vocab, tc.eos)
		if !bytes.Equal(a, b) {
			t.Fatalf("WriteByteLevelJSON(%d, %v) is not deterministic", tc.vocab, tc.eos)
		}
		var f hfFile
		if err := json.Unmarshal(a, &f); err != nil {
			t.Fatalf("WriteByteLevelJSON(%d, %v) wrote invalid JSON: %v", tc.vocab, tc.eos, err)
		}
		var top map[string]json.RawMessage
		_ = json.Unmarshal(a, &top)
		for k := range top {
			switch k {
			case "version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model":
			default:
				t.Errorf("top-level key %q is unknown to the Rust tokenizers deserializer", k)
			}
		}
		var m struct {
			Vocab map[string]int `json:"vocab"`
		}
		_ = json.Unmarshal(f.Model, &m)
		if len(m.Vocab) != tc.vocab {
			t.Errorf("model vocab has %d entries, want %d", len(m.Vocab), tc.vocab)
		}
		if len(f.AddedTokens) != len(tc.eos) {
			t.Fatalf("added_tokens has %d entries, want %d", len(f.AddedTokens), len(tc.eos))
		}
		for i, at := range f.AddedTokens {
			want := "<|endoftext|>"
			if i > 0 {
				want = "<|eos_" + itoa(tc.eos[i]) + "|>"
			}
			if at.ID != tc.eos[i] || at.Content != want || !at.Special || m.Vocab[want] != tc.eos[i] {
				t.Errorf("added_tokens[%d] = %+v (vocab id %d), want id %d content %q special", i, at, m.Vocab[want], tc.eos[i], want)
			}
		}
	}
	if bytes.Equal(writeJSON(t, 258, []int{256, 257}), writeJSON(t, 258, []int{257, 256})) {
		t.Error("eos order is not recorded")
	}
	for _, tc := range []struct {
		name  string
		vocab int
		eos   []int
	}{
		{"small vocab", 255, nil},
		{"eos is a byte", 300, []int{10}},
		{"eos beyond vocab", 300, []int{300}},
		{"repeated eos", 300, []int{256, 256}},
	} {
		if err := WriteByteLevelJSON(&bytes.Buffer{}, tc.vocab, tc.eos); err == nil {
			t.Errorf("%s: WriteByteLevelJSON(%d, %v) succeeded", tc.name, tc.vocab, tc.eos)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func writeFile(t *testing.T, dir string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, FileName)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadByteLevel(t *testing.T) {
	for _, tc := range []struct {
		vocab int
		eos   []int
	}{
		{256, nil},
		{258, []int{257}},
		{512, []int{300, 257, 511}},
	} {
		dir := t.TempDir()
		writeFile(t, dir, writeJSON(t, tc.vocab, tc.eos))
		tok, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		bl, ok := tok.(*ByteLevel)
		if !ok {
			t.Fatalf("Load gave %T (kind %s), want *ByteLevel", tok, tok.Kind())
		}
		if bl.Kind() != "byte-level-v1" || bl.VocabSize() != tc.vocab || !slices.Equal(bl.EOSIDs(), tc.eos) {
			t.Fatalf("Load: kind %s vocab %d eos %v, want vocab %d eos %v", bl.Kind(), bl.VocabSize(), bl.EOSIDs(), tc.vocab, tc.eos)
		}
		for _, id := range tc.eos {
			if got := bl.Decode([]int{'a', id, 'b'}); got != "ab" {
				t.Fatalf("eos %d decodes to %q", id, got)
			}
		}
	}
}

// A reformatted copy (other key order, other whitespace) is still
// recognised; a copy with any behavioural change is not.
func TestLoadByteLevelRecognition(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(writeJSON(t, 300, []int{257, 256}), &doc); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(doc) // sorted keys, no whitespace
	tok, err := parse("compact", compact, false)
	if err != nil {
		t.Fatal(err)
	}
	if bl, ok := tok.(*ByteLevel); !ok || !reflect.DeepEqual(bl.EOSIDs(), []int{257, 256}) {
		t.Fatalf("reformatted description: got %T %v", tok, tok)
	}

	mutations := map[string]func(m map[string]any){
		"a merge": func(m map[string]any) {
			model := m["model"].(map[string]any)
			vocab := model["vocab"].(map[string]any)
			delete(vocab, "<|299|>")
			vocab["ab"] = 299.0
			model["merges"] = []any{"a b"}
		},
		"prefix space": func(m map[string]any) {
			m["pre_tokenizer"].(map[string]any)["add_prefix_space"] = true
		},
		"normalizer": func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFC"} },
		"renamed eos": func(m map[string]any) {
			m["added_tokens"].([]any)[0].(map[string]any)["content"] = "</s>"
			vocab := m["model"].(map[string]any)["vocab"].(map[string]any)
			delete(vocab, "<|endoftext|>")
			vocab["</s>"] = 257.0
		},
		"swapped bytes": func(m map[string]any) {
			vocab := m["model"].(map[string]any)["vocab"].(map[string]any)
			vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
		},
	}
	for name, mutate := range mutations {
		var m map[string]any
		_ = json.Unmarshal(writeJSON(t, 300, []int{257, 256}), &m)
		mutate(m)
		data, _ := json.Marshal(m)
		tok, err := parse(name, data, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tok.Kind() != KindHF {
			t.Errorf("%s: still recognised as %s", name, tok.Kind())
		}
	}
}

// gpt2StyleJSON is a small GPT-2 style byte-level BPE tokenizer.json: the
// 256 byte characters (byte b has id b), six merges and a special token.
func gpt2StyleJSON(t *testing.T) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	extra := []string{"Ġt", "he", "Ġthe", "aa", "ĠĠ", "ĠĊ"}
	for i, s := range extra {
		vocab[s] = 256 + i
	}
	doc := map[string]any{
		"version":    "1.0",
		"truncation": nil,
		"padding":    nil,
		"added_tokens": []any{map[string]any{
			"id": 262, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true,
		}},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
			"vocab":  vocab,
			"merges": []any{"Ġ t", "h e", []any{"Ġt", "he"}, "a a", "Ġ Ġ", "Ġ Ċ"},
		},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLoadHF(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, gpt2StyleJSON(t))
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	hf, ok := tok.(*HF)
	if !ok || hf.Kind() != "hf-tokenizer-json" {
		t.Fatalf("Load gave %T, want *HF", tok)
	}
	if hf.VocabSize() != 263 || !reflect.DeepEqual(hf.SpecialIDs(), []int{262}) {
		t.Fatalf("VocabSize %d SpecialIDs %v", hf.VocabSize(), hf.SpecialIDs())
	}
	// Expected ids, by hand. Merge ranks: 0 "Ġ t"→256 "Ġt", 1 "h e"→257
	// "he", 2 "Ġt he"→258 "Ġthe", 3 "a a"→259, 4 "Ġ Ġ"→260, 5 "Ġ Ċ"→261.
	const h, e, l, o, a, b, sp, nl = 'h', 'e', 'l', 'o', 'a', 'b', 32, 10
	for _, tc := range []struct {
		name, text string
		want       []int
	}{
		{"empty", "", nil},
		// Pre-tokens "the", " the": t|he (no "t he" merge), then Ġthe.
		{"the the", "the the", []int{'t', 257, 258}},
		// Equal-rank merges go leftmost first: aa|aa|a, not aa|a|aa.
		{"leftmost ties", "aaaaa", []int{259, 259, a}},
		// `\s+(?!\S)`: "a", "  ", " the".
		{"space run", "a   the", []int{a, 260, 258}},
		// "a", " ", "\n", "b": the space and newline are separate pre-tokens,
		// so the "Ġ Ċ" merge must not apply.
		{"space newline", "a \nb", []int{a, sp, nl, b}},
		{"leading spaces", "  the", []int{sp, 258}},
		{"trailing spaces", "hello  ", []int{257, l, l, o, 260}},
		{"special", "the<|endoftext|>the", []int{'t', 257, 262, 't', 257}},
		{"multibyte", "naïve 東京 🚀", bytesOf("naïve 東京 🚀")},
		{"invalid utf8", "a\xffb", []int{a, 0xff, b}},
		{"digits", "h1e 22", []int{h, '1', e, sp, '2', '2'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, err := hf.Encode(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Fatalf("Encode(%q) = %v, want %v", tc.text, ids, tc.want)
			}
			want := strings.ReplaceAll(tc.text, "<|endoftext|>", "")
			if tc.name == "invalid utf8" {
				want = "a\uFFFDb"
			}
			if got := hf.Decode(ids); got != want {
				t.Fatalf("Decode(%v) = %q, want %q", ids, got, want)
			}
		})
	}
	if got := hf.Decode([]int{258, 9999, 262, 'x'}); got != " thex" {
		t.Fatalf("Decode with unknown and special ids = %q", got)
	}
}

// The HF implementation reading Horizon's description gives ByteLevel's ids.
func TestHFReadsByteLevelJSONFaithfully(t *testing.T) {
	eos := []int{300, 257}
	data := writeJSON(t, 320, eos)
	tok, err := parse("horizon", data, true)
	if err != nil {
		t.Fatal(err)
	}
	hf := tok.(*HF)
	bl := NewByteLevel(320, eos)
	if hf.VocabSize() != 320 || !reflect.DeepEqual(hf.SpecialIDs(), []int{257, 300}) {
		t.Fatalf("HF view: vocab %d specials %v", hf.VocabSize(), hf.SpecialIDs())
	}
	for _, s := range []string{"", "Hello, world!", "naïve 東京 🚀", "  lead and trail  ", "a\n\n\tb", "'s 're x'll", "\x00\x01\xff\xfe"} {
		want, _ := bl.Encode(s)
		got, _ := hf.Encode(s)
		if len(want) != 0 || len(got) != 0 {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Encode(%q): HF %v, ByteLevel %v", s, got, want)
			}
		}
		if hd, bd := hf.Decode(want), bl.Decode(want); hd != bd {
			t.Errorf("Decode(%v): HF %q, ByteLevel %q", want, hd, bd)
		}
	}
	ids := []int{'a', 300, 0xE6, 257, 299, 'b', 256}
	if hd, bd := hf.Decode(ids), bl.Decode(ids); hd != bd {
		t.Errorf("Decode(%v): HF %q, ByteLevel %q", ids, hd, bd)
	}
}

func TestLoadErrors(t *testing.T) {
	missing := t.TempDir()
	_, err := Load(missing)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(missing, "tokenizer.json")) {
		t.Fatalf("missing file: %v", err)
	}

	bpe := func(extra string) string {
		return `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]` + extra + `}}`
	}
	for _, tc := range []struct {
		name, data string
		want       []string
		unsup      bool
	}{
		{"truncated", `{"model": {"type": "BPE", "vocab": {`, []string{"invalid JSON", "unexpected end"}, false},
		{"syntax", "{\n  \"model\": {,}\n}", []string{"invalid JSON", "line 2"}, false},
		{"not an object", `[1, 2]`, []string{"invalid JSON"}, false},
		{"wrong type", `{"added_tokens": {"a": 1}}`, []string{"invalid JSON"}, false},
		{"no model", `{"version": "1.0"}`, []string{"no \"model\" section"}, false},
		{"wordpiece", `{"model": {"type": "WordPiece", "vocab": {"a": 0}}}`, []string{`model type "WordPiece"`}, true},
		{"unigram", `{"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}`, []string{`model type "Unigram"`}, true},
		{"merge not in vocab", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}`, []string{"merges[0]"}, false},
		{"bad merge", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}}`, []string{"merges[0]"}, false},
		{"dup id", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}`, []string{"id 0"}, false},
		{"decoder", `{"decoder": {"type": "WordPiece"}, ` + bpe("")[1:], []string{`decoder type "WordPiece"`}, true},
		{"pre-tokenizer", `{"pre_tokenizer": {"type": "Metaspace"}, ` + bpe("")[1:], []string{`pre_tokenizer type "Metaspace"`}, true},
		{"lookbehind", `{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?<=a)b"}, "behavior": "Isolated", "invert": false}, ` + bpe("")[1:], []string{"look-around"}, true},
		{"normalizer", `{"normalizer": {"type": "Precompiled"}, ` + bpe("")[1:], []string{`normalizer type "Precompiled"`}, true},
		{"dropout", bpe(`, "dropout": 0.1`), []string{"dropout"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeFile(t, dir, []byte(tc.data))
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, p) {
				t.Errorf("error %q does not name %s", msg, p)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if errors.Is(err, ErrUnsupported) != tc.unsup {
				t.Errorf("errors.Is(%q, ErrUnsupported) = %v", msg, !tc.unsup)
			}
		})
	}
}

func preTok(t *testing.T, section string) preTokenizer {
	t.Helper()
	p, err := newPreTokenizer(json.RawMessage(section))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// unByteLevel turns byte-level pieces back into text for readable tables.
func unByteLevel(pieces []string) []string {
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = string(appendByteLevelToken(nil, p))
	}
	return out
}

const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

func TestPreTokenize(t *testing.T) {
	gpt2 := preTok(t, `{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}`)
	gpt2Prefix := preTok(t, `{"type": "ByteLevel", "add_prefix_space": true}`)
	qwenJSON, _ := json.Marshal(qwenPattern)
	qwen := preTok(t, `{"type": "Sequence", "pretokenizers": [
		{"type": "Split", "pattern": {"Regex": `+string(qwenJSON)+`}, "behavior": "Isolated", "invert": false},
		{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}`)
	digits := preTok(t, `{"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
		{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}`)
	for _, tc := range []struct {
		name string
		p    preTokenizer
		in   string
		want []string
	}{
		{"gpt2 words", gpt2, "Hello world", []string{"Hello", " world"}},
		{"gpt2 contraction", gpt2, "I'll don't", []string{"I", "'ll", " don", "'t"}},
		{"gpt2 double space", gpt2, "a  b", []string{"a", " ", " b"}},
		{"gpt2 trailing", gpt2, "a  ", []string{"a", "  "}},
		{"gpt2 newlines", gpt2, "a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"gpt2 space newline", gpt2, "a \n b", []string{"a", " \n", " b"}},
		{"gpt2 unicode space", gpt2, "a\u3000\u3000b", []string{"a", "\u3000", "\u3000", "b"}},
		{"gpt2 numbers punct", gpt2, "x=12.5!!", []string{"x", "=", "12", ".", "5", "!!"}},
		{"gpt2 prefix", gpt2Prefix, "Hi", []string{" Hi"}},
		{"qwen", qwen, "Hello world 123", []string{"Hello", " world", " ", "1", "2", "3"}},
		{"qwen case-insensitive", qwen, "I'LL GO", []string{"I", "'LL", " GO"}},
		{"qwen newline", qwen, "x;\n\n  y", []string{"x", ";\n\n", " ", " y"}},
		{"qwen space lines", qwen, "a  \n\tb", []string{"a", "  \n", "\tb"}},
		{"qwen trailing", qwen, "end.   ", []string{"end", ".", "   "}},
		{"digits", digits, "ab12c", []string{"ab", "1", "2", "c"}},
		{"multibyte", gpt2, "東京 🚀", []string{"東京", " 🚀"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unByteLevel(tc.p.preTokenize([]string{tc.in}))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("pre-tokenize %q = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSplitBehaviors(t *testing.T) {
	m := literalMatcher("-")
	for _, tc := range []struct {
		b      splitBehavior
		invert bool
		want   []string
	}{
		{behaviorRemoved, false, []string{"a", "b", "c"}},
		{behaviorIsolated, false, []string{"a", "-", "b", "-", "-", "c", "-"}},
		{behaviorMergedWithPrevious, false, []string{"a-", "b-", "-", "c-"}},
		{behaviorMergedWithNext, false, []string{"a", "-b", "-", "-c", "-"}},
		{behaviorContiguous, false, []string{"a", "-", "b", "--", "c", "-"}},
		{behaviorRemoved, true, []string{"-", "-", "-", "-"}},
	} {
		s := "a-b--c-"
		if got := splitBy(s, m.find(s), tc.b, tc.invert); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("behavior %d invert %v: %q, want %q", tc.b, tc.invert, got, tc.want)
		}
	}
}

// A Qwen-like file: NFC normalizer, Split+ByteLevel pre-tokenizer, added
// tokens (special and not) whose ids follow the model vocabulary.
func TestHFQwenLike(t *testing.T) {
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["Ã©"] = 256 // "é" as byte characters
	pat, _ := json.Marshal(qwenPattern)
	data := `{"added_tokens": [
		{"id": 257, "content": "<|im_start|>", "special": true, "normalized": false},
		{"id": 258, "content": "<tool_call>", "special": false, "normalized": false},
		{"id": 259, "content": "<|im_end|>", "special": true, "normalized": false}],
	  "normalizer": {"type": "NFC"},
	  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
		{"type": "Split", "pattern": {"Regex": ` + string(pat) + `}, "behavior": "Isolated", "invert": false},
		{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
	  "decoder": {"type": "ByteLevel"},
	  "model": {"type": "BPE", "vocab": ` + mustJSON(t, vocab) + `, "merges": [["Ã", "©"]]}}`
	tok, err := parse("qwen-like", []byte(data), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want []int
		dec  string
	}{
		{"<|im_start|>caf\u00e9<|im_end|>", []int{257, 'c', 'a', 'f', 256, 259}, "café"},
		{"cafe\u0301", []int{'c', 'a', 'f', 256}, "café"}, // NFC composes e + U+0301
		{"x<tool_call>y", []int{'x', 258, 'y'}, "x<tool_call>y"},
	} {
		ids, _ := tok.Encode(tc.in)
		if !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.in, ids, tc.want)
		}
		if got := tok.Decode(ids); got != tc.dec {
			t.Errorf("Decode(%v) = %q, want %q", ids, got, tc.dec)
		}
	}
}

func TestAddedTokenOptions(t *testing.T) {
	toks := []*addedToken{
		{content: "<s>", id: 1, lstrip: true, rstrip: true},
		{content: "<s>x", id: 2},
		{content: "cat", id: 3, singleWord: true},
	}
	m := newAddedMatcher(toks)
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"a <s> b", "a|#1|b"},
		{"<s>xy", "#2|y"}, // longest match wins
		{"cat concat cat.", "#3| concat |#3|."},
	} {
		var parts []string
		for _, s := range m.split(tc.in) {
			if s.tok != nil {
				parts = append(parts, "#"+itoa(s.tok.id))
			} else {
				parts = append(parts, s.text)
			}
		}
		if got := strings.Join(parts, "|"); got != tc.want {
			t.Errorf("split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHFConcurrent(t *testing.T) {
	tok, err := parse("gpt2", gpt2StyleJSON(t), false)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tok.Encode("the the aaaaa a   the")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if got, _ := tok.Encode("the the aaaaa a   the"); !reflect.DeepEqual(got, want) {
					t.Errorf("concurrent Encode = %v, want %v", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
