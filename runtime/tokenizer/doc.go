// Package tokenizer turns text into token ids and back for Horizon's runtime.
//
// # Model
//
// A checkpoint directory carries one file, tokenizer.json, in the format of
// Hugging Face's `tokenizers` library (the file the Rust library and Python
// `tokenizers.Tokenizer.from_file` load). Load reads it and returns one of two
// implementations of the Tokenizer interface:
//
//   - *ByteLevel (Kind "byte-level-v1"): the tokenizer of Horizon's synthetic
//     checkpoints. Token id b in 0..255 is the byte b; ids from 256 up to the
//     vocabulary size are special tokens (end-of-sequence) or unused. Encoding
//     yields exactly one id per UTF-8 byte of the text.
//
//   - *HF (Kind "hf-tokenizer-json"): any other byte-level BPE tokenizer.json,
//     such as those shipped with OLMoE or Qwen checkpoints.
//
// # The byte-level description and how Load recognises it
//
// WriteByteLevelJSON writes a tokenizer.json that describes ByteLevel exactly,
// so that external tools (Python/Rust `tokenizers`, transformers) produce the
// same ids: a BPE model whose vocabulary maps the GPT-2 byte-to-unicode
// character of byte b to id b, with no merges, a ByteLevel pre-tokenizer
// (add_prefix_space false, use_regex false) and a ByteLevel decoder. Every id
// from 256 to vocabSize-1 is also in the model vocabulary, so the external
// vocabulary size equals vocabSize: the end-of-sequence ids carry
// "<|endoftext|>" (the first) or "<|eos_N|>" (the others, N being the id) and
// are listed in added_tokens as special tokens; unused ids carry "<|N|>".
//
// The file carries no Horizon-specific marker key. The Rust library's
// deserializer for the top-level object (and for the BPE model section) does
// not consume the values of keys it does not know, so serde_json fails on the
// next key with "expected `,` or `}`": an extra top-level "horizon" key would
// make the file unloadable there. Instead the description is its own marker:
// Load recognises a tokenizer.json as Horizon's byte-level tokenizer when its
// structure is exactly the one above (BPE, the 256 byte characters at their
// byte ids, no merges, ByteLevel pre-tokenizer without prefix space, ByteLevel
// decoder, no normalizer, ids >= 256 named as above with the end-of-sequence
// ones special). The vocabulary size is the size of the model vocabulary and
// the end-of-sequence ids are the special added tokens, in file order. Any
// other file goes to the HF implementation, which also loads Horizon's file
// faithfully (same ids), only with Kind "hf-tokenizer-json".
//
// One difference is inherent to the format: `tokenizers` (and the HF
// implementation) match added tokens in the input, so the literal text
// "<|endoftext|>" encodes to the first eos id there, while ByteLevel encodes
// it as its 13 bytes. Text that does not spell an eos name encodes the same.
//
// # The HF implementation
//
// The HF implementation is written in this package and follows the Rust
// `tokenizers` semantics for the pieces byte-level BPE files use: added
// (special) tokens matched before normalisation (leftmost-longest, with
// lstrip/rstrip/single_word), the NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// Prepend, Replace (string pattern) and Sequence normalizers,
// ByteLevel, Split, Digits and Sequence pre-tokenizers (Oniguruma patterns are
// translated to Go's RE2, including the `\s+(?!\S)` look-ahead used by GPT-2,
// Qwen and Llama 3 patterns), the BPE model (ranked merges, leftmost first
// among equal ranks, unk/fuse_unk, byte_fallback, continuing_subword_prefix,
// end_of_word_suffix, ignore_merges) and the ByteLevel decoder. Encode adds no
// special tokens (no BOS/EOS: post-processors are ignored); Decode skips
// special tokens, like skip_special_tokens=True.
//
// github.com/sugarme/tokenizer v0.3.0 is not used at run time. On byte-level
// BPE it gives wrong ids: equal-rank merges are not applied leftmost first
// ("aaaaa" with the merge "a a" gives aa|a|aa instead of aa|aa|a), its
// ByteLevel pre-tokenizer ignores use_regex and lacks the `\s+(?!\S)` rule,
// added-token ids in the file are ignored (ids are reassigned from the model
// vocabulary size, special tokens first) and special tokens in the text are
// dropped. It panics on the look-ahead in Qwen's and Llama 3's Split
// patterns, decodes added tokens whose characters are not GPT-2 byte
// characters (e.g. whitespace tokens) to NUL bytes, and its NFC normalizer
// returns NFD for text that is not already NFC. sugarme_test.go (build tag
// "sugarme") reproduces each of these.
package tokenizer

// Tokenizer turns text into token ids and back.
type Tokenizer interface {
	// Encode returns the ids of text. No special tokens are added.
	Encode(text string) ([]int, error)
	// Decode returns the text of ids. Special tokens are skipped.
	Decode(ids []int) string
	// Kind is "byte-level-v1" or "hf-tokenizer-json".
	Kind() string
}

// Kinds reported by Tokenizer.Kind.
const (
	KindByteLevel = "byte-level-v1"
	KindHF        = "hf-tokenizer-json"
)
