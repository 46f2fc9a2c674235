package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// ByteLevel is the tokenizer of Horizon's synthetic checkpoints. Token id b
// (0..255) is byte b. Ids >= 256 are special tokens (e.g. EOS) or unused.
// A ByteLevel is immutable and safe for concurrent use.
type ByteLevel struct {
	vocabSize int
	eos       []int
}

var _ Tokenizer = (*ByteLevel)(nil)

// NewByteLevel returns the byte-level tokenizer with the given vocabulary
// size (which should be at least 256) and end-of-sequence ids. eosIDs is
// copied.
func NewByteLevel(vocabSize int, eosIDs []int) *ByteLevel {
	return &ByteLevel{vocabSize: vocabSize, eos: append([]int(nil), eosIDs...)}
}

// Kind returns "byte-level-v1".
func (t *ByteLevel) Kind() string { return KindByteLevel }

// VocabSize returns the vocabulary size given to NewByteLevel.
func (t *ByteLevel) VocabSize() int { return t.vocabSize }

// EOSIDs returns a copy of the end-of-sequence ids.
func (t *ByteLevel) EOSIDs() []int { return append([]int(nil), t.eos...) }

// IsEOS reports whether id is an end-of-sequence id.
func (t *ByteLevel) IsEOS(id int) bool {
	for _, e := range t.eos {
		if e == id {
			return true
		}
	}
	return false
}

// Encode returns one id per UTF-8 byte of text: the byte's value. It never
// fails. Text that spells a special token (e.g. "<|endoftext|>") is encoded
// as its bytes.
func (t *ByteLevel) Encode(text string) ([]int, error) {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i])
	}
	return ids, nil
}

// Decode concatenates the bytes of ids 0..255, renders end-of-sequence ids as
// "" and any other id as "<|id|>", then replaces invalid UTF-8 with U+FFFD
// (one per maximal invalid subsequence, as Rust's String::from_utf8_lossy
// and hence Hugging Face's ByteLevel decoder do).
func (t *ByteLevel) Decode(ids []int) string {
	buf := make([]byte, 0, len(ids))
	for _, id := range ids {
		switch {
		case id >= 0 && id < 256:
			buf = append(buf, byte(id))
		case t.IsEOS(id):
		default:
			buf = append(buf, "<|"...)
			buf = strconv.AppendInt(buf, int64(id), 10)
			buf = append(buf, "|>"...)
		}
	}
	return lossyUTF8(buf)
}

// byteLevelTokenName is the vocabulary entry of id >= 256 in the byte-level
// description: eos[0] is "<|endoftext|>", other eos ids "<|eos_N|>", unused
// ids "<|N|>".
func byteLevelTokenName(id int, eosIDs []int) (name string, special bool) {
	for i, e := range eosIDs {
		if e == id {
			if i == 0 {
				return "<|endoftext|>", true
			}
			return "<|eos_" + strconv.Itoa(id) + "|>", true
		}
	}
	return "<|" + strconv.Itoa(id) + "|>", false
}

func checkByteLevelArgs(vocabSize int, eosIDs []int) error {
	if vocabSize < 256 {
		return fmt.Errorf("byte-level vocabulary size %d is below 256", vocabSize)
	}
	seen := make(map[int]bool, len(eosIDs))
	for _, id := range eosIDs {
		if id < 256 || id >= vocabSize {
			return fmt.Errorf("byte-level eos id %d is outside [256, %d)", id, vocabSize)
		}
		if seen[id] {
			return fmt.Errorf("byte-level eos id %d is repeated", id)
		}
		seen[id] = true
	}
	return nil
}

// WriteByteLevelJSON writes an HF tokenizer.json (the format the Rust
// `tokenizers` library loads) describing exactly the ByteLevel tokenizer with
// the given vocabulary size and eos ids; see the package documentation for
// its content and for how Load recognises it. vocabSize must be at least 256
// and every eos id must lie in [256, vocabSize) without repetition; the first
// eos id is named "<|endoftext|>". The output is deterministic: the same
// arguments give byte-identical output.
func WriteByteLevelJSON(w io.Writer, vocabSize int, eosIDs []int) error {
	if err := checkByteLevelArgs(vocabSize, eosIDs); err != nil {
		return fmt.Errorf("tokenizer: WriteByteLevelJSON: %w", err)
	}
	bw := bufio.NewWriter(w)
	p := func(s string) { bw.WriteString(s) }

	p("{\n")
	p("  \"version\": \"1.0\",\n")
	p("  \"truncation\": null,\n")
	p("  \"padding\": null,\n")
	if len(eosIDs) == 0 {
		p("  \"added_tokens\": [],\n")
	} else {
		p("  \"added_tokens\": [\n")
		for i, id := range eosIDs {
			name, _ := byteLevelTokenName(id, eosIDs)
			p("    {\"id\": " + strconv.Itoa(id) + ", \"content\": " + jsonString(name) +
				", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}")
			if i < len(eosIDs)-1 {
				p(",")
			}
			p("\n")
		}
		p("  ],\n")
	}
	p("  \"normalizer\": null,\n")
	p("  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false},\n")
	p("  \"post_processor\": null,\n")
	p("  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false},\n")
	p("  \"model\": {\n")
	p("    \"type\": \"BPE\",\n")
	p("    \"dropout\": null,\n")
	p("    \"unk_token\": null,\n")
	p("    \"continuing_subword_prefix\": null,\n")
	p("    \"end_of_word_suffix\": null,\n")
	p("    \"fuse_unk\": false,\n")
	p("    \"vocab\": {\n")
	for id := 0; id < vocabSize; id++ {
		var name string
		if id < 256 {
			name = string(byteToRune[id])
		} else {
			name, _ = byteLevelTokenName(id, eosIDs)
		}
		p("      " + jsonString(name) + ": " + strconv.Itoa(id))
		if id < vocabSize-1 {
			p(",")
		}
		p("\n")
	}
	p("    },\n")
	p("    \"merges\": []\n")
	p("  }\n")
	p("}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("tokenizer: WriteByteLevelJSON: %w", err)
	}
	return nil
}

// jsonString quotes s as a JSON string without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a Go string always encodes
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// byteToRune is GPT-2's byte-to-unicode table: the printable bytes '!'..'~',
// '¡'..'¬' and '®'..'ÿ' stand for themselves; the other 68 bytes, in
// increasing order, get U+0100, U+0101, ... (so ' ' is 'Ġ' and '\n' is 'Ċ').
var byteToRune [256]rune

// runeToByte inverts byteToRune.
var runeToByte map[rune]byte

func init() {
	next := rune(256)
	runeToByte = make(map[rune]byte, 256)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// lossyUTF8 converts b to a string, replacing each maximal subpart of an
// ill-formed subsequence by U+FFFD (the Unicode "best practice" that Rust's
// String::from_utf8_lossy follows). Go's strings.ToValidUTF8 would replace a
// whole run of invalid bytes by a single U+FFFD instead.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			out = append(out, b[i:i+size]...)
			i += size
			continue
		}
		out = append(out, "\uFFFD"...)
		i += invalidPrefixLen(b[i:])
	}
	return string(out)
}

// invalidPrefixLen returns the length of the maximal subpart of an
// ill-formed UTF-8 sequence at the start of b (b[0:] does not start with a
// valid sequence).
func invalidPrefixLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for j := 1; j <= need && j < len(b); j++ {
		if j == 1 {
			if b[j] < lo || b[j] > hi {
				break
			}
		} else if b[j] < 0x80 || b[j] > 0xBF {
			break
		}
		n++
	}
	return n
}
