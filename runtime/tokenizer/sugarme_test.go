//go:build sugarme

// Cross-checks against github.com/sugarme/tokenizer v0.3.0. Its pretrained
// package needs github.com/emirpasic/gods and github.com/patrickmn/go-cache,
// which go.mod does not list, so these tests are behind a build tag:
//
//	go test -tags sugarme ./runtime/tokenizer/   (after adding both modules to go.mod)
//
// TestSugarmeReadsByteLevelJSON checks that a third-party loader reads
// Horizon's byte-level description with ByteLevel's ids. TestSugarmeDivergences
// records where the library departs from the Rust `tokenizers` semantics,
// which is why the HF path does not use it; it logs, and fails only if a
// recorded bug stops reproducing (then the package comment should be revised).
package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	sugar "github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/normalizer"
	"github.com/sugarme/tokenizer/pretrained"
)

func sugarmeLoad(t *testing.T, data []byte) (tk *sugar.Tokenizer, err error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return pretrained.FromFile(p)
}

func sugarmeEncode(tk *sugar.Tokenizer, s string) (ids []int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	en, err := tk.EncodeSingle(s, false)
	if err != nil {
		return nil, err
	}
	return en.Ids, nil
}

func TestSugarmeReadsByteLevelJSON(t *testing.T) {
	eos := []int{300, 257}
	tk, err := sugarmeLoad(t, writeJSON(t, 320, eos))
	if err != nil {
		t.Fatal(err)
	}
	bl := NewByteLevel(320, eos)
	for _, s := range []string{"Hello, world!", "naïve 東京 🚀", "a\n\n\tb", "tab\there"} {
		want, _ := bl.Encode(s)
		got, err := sugarmeEncode(tk, s)
		if err != nil {
			t.Fatalf("sugarme Encode(%q): %v", s, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("sugarme Encode(%q) = %v, ByteLevel %v", s, got, want)
		}
		if d := tk.Decode(want, true); d != s {
			t.Errorf("sugarme Decode(%v) = %q, want %q", want, d, s)
		}
	}
	for _, id := range eos {
		if got, ok := tk.TokenToId(byteLevelNameOf(id, eos)); !ok || got != id {
			t.Errorf("sugarme id of eos %d = %d, %v", id, got, ok)
		}
	}
}

func byteLevelNameOf(id int, eos []int) string { n, _ := byteLevelTokenName(id, eos); return n }

func TestSugarmeDivergences(t *testing.T) {
	reproduced := 0
	note := func(format string, args ...any) {
		reproduced++
		t.Logf("sugarme bug: "+format, args...)
	}

	tk, err := sugarmeLoad(t, gpt2StyleJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	ours, _ := parse("gpt2", gpt2StyleJSON(t), false)
	for _, s := range []string{"aaaaa", "aaaaaaa", "a \nb", "a\n\nb", "the<|endoftext|>the"} {
		want, _ := ours.Encode(s)
		got, err := sugarmeEncode(tk, s)
		if err != nil || !reflect.DeepEqual(got, want) {
			note("Encode(%q) = %v (err %v), Rust semantics give %v", s, got, err, want)
		}
	}

	// Added-token ids: the file puts the added tokens at 300 and 301, after
	// a gap above the 256-entry model vocabulary.
	gap := []byte(`{"added_tokens": [
		{"id": 300, "content": "<|a|>", "special": false, "normalized": false},
		{"id": 301, "content": "<|b|>", "special": true, "normalized": false}],
	  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
	  "decoder": {"type": "ByteLevel"},
	  "model": {"type": "BPE", "vocab": ` + mustJSON(t, byteVocab()) + `, "merges": []}}`)
	if tk, err := sugarmeLoad(t, gap); err != nil {
		note("load with added tokens: %v", err)
	} else if id, ok := tk.TokenToId("<|a|>"); !ok || id != 300 {
		note("added token <|a|> (id 300 in the file) gets id %d", id)
	}

	// Qwen's Split pattern uses a look-ahead.
	pat := mustJSON(t, qwenPattern)
	qwen := []byte(`{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": ` + pat + `}, "behavior": "Isolated", "invert": false},
	  "model": {"type": "BPE", "vocab": ` + mustJSON(t, byteVocab()) + `, "merges": []}}`)
	if _, err := sugarmeLoad(t, qwen); err != nil {
		note("Qwen Split pattern: %v", err)
	}

	// Decoding an added token whose characters are not byte characters.
	ws := []byte(`{"added_tokens": [{"id": 256, "content": "  ", "special": false, "normalized": true}],
	  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
	  "decoder": {"type": "ByteLevel"},
	  "model": {"type": "BPE", "vocab": ` + mustJSON(t, byteVocab()) + `, "merges": []}}`)
	if tk, err := sugarmeLoad(t, ws); err == nil {
		if d := tk.Decode([]int{'a', 256, 'b'}, false); d != "a  b" {
			note("Decode of added token \"  \" = %q, want %q", d, "a  b")
		}
	}

	// NFC.
	n, _ := normalizer.NewNFC().Normalize(normalizer.NewNormalizedFrom("cafe\u0301"))
	if got := n.GetNormalized(); got != "caf\u00e9" {
		note("NFC(%+q) = %+q, want %+q", "cafe\u0301", got, "caf\u00e9")
	}

	if reproduced == 0 {
		t.Fatal("no recorded sugarme divergence reproduces; revise the package comment")
	}
}

func byteVocab() map[string]int {
	v := map[string]int{}
	for b := 0; b < 256; b++ {
		v[string(byteToRune[b])] = b
	}
	return v
}
