package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ErrUnsupported is wrapped by errors for tokenizer.json features this
// package does not implement.
var ErrUnsupported = errors.New("unsupported")

// HF is a byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json
// (e.g. OLMoE's or Qwen's). It is safe for concurrent use.
type HF struct {
	norm      func(string) string // nil: no normalizer
	pre       preTokenizer        // nil: the whole text is one word
	model     *bpeModel
	byteLevel bool // ByteLevel decoder; otherwise tokens are joined with " "

	added       []*addedToken
	addedByID   map[int]*addedToken
	rawAdded    *addedMatcher // tokens with normalized=false
	normAdded   *addedMatcher // tokens with normalized=true, matched after normalization
	vocabSize   int
	specialByID map[int]string
}

var _ Tokenizer = (*HF)(nil)

// Kind returns "hf-tokenizer-json".
func (t *HF) Kind() string { return KindHF }

// VocabSize returns one more than the largest id of the model vocabulary and
// the added tokens.
func (t *HF) VocabSize() int { return t.vocabSize }

// TokenID returns the id of an added token or model vocabulary entry.
func (t *HF) TokenID(token string) (int, bool) {
	for _, a := range t.added {
		if a.content == token {
			return a.id, true
		}
	}
	id, ok := t.model.vocab[token]
	return id, ok
}

// SpecialIDs returns the ids of the special added tokens, ascending.
func (t *HF) SpecialIDs() []int {
	var ids []int
	for id := range t.specialByID {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

// Encode returns the ids of text: added tokens found in text get their ids;
// the rest is normalized, pre-tokenized and split by the BPE model. No
// special tokens are added (the post_processor is not applied). It does not
// fail: characters outside the vocabulary map to unk, or are dropped when the
// model has no unk token, as in the Rust library.
func (t *HF) Encode(text string) ([]int, error) {
	var ids []int
	for _, seg := range t.rawAdded.split(text) {
		if seg.tok != nil {
			ids = append(ids, seg.tok.id)
			continue
		}
		s := seg.text
		if t.norm != nil {
			s = t.norm(s)
		}
		for _, seg2 := range t.normAdded.split(s) {
			if seg2.tok != nil {
				ids = append(ids, seg2.tok.id)
				continue
			}
			pieces := []string{seg2.text}
			if t.pre != nil {
				pieces = t.pre.preTokenize(pieces)
			}
			for _, p := range pieces {
				ids = append(ids, t.model.tokenize(p)...)
			}
		}
	}
	return ids, nil
}

// Decode returns the text of ids, skipping special tokens and ids that are
// neither added tokens nor in the model vocabulary.
func (t *HF) Decode(ids []int) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		if a, ok := t.addedByID[id]; ok {
			if !a.special {
				tokens = append(tokens, a.content)
			}
			continue
		}
		if s, ok := t.model.vocabR[id]; ok {
			tokens = append(tokens, s)
		}
	}
	if !t.byteLevel {
		return strings.Join(tokens, " ")
	}
	var buf []byte
	for _, tok := range tokens {
		buf = appendByteLevelToken(buf, tok)
	}
	return lossyUTF8(buf)
}

// appendByteLevelToken appends the bytes a ByteLevel token stands for: the
// byte of each character if every character is a GPT-2 byte character, the
// token's own UTF-8 otherwise (as the Rust ByteLevel decoder does).
func appendByteLevelToken(buf []byte, tok string) []byte {
	n := len(buf)
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return append(buf[:n], tok...)
		}
		buf = append(buf, b)
	}
	return buf
}

// hfFile is a tokenizer.json.
type hfFile struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// newHF builds the HF tokenizer of a parsed tokenizer.json.
func newHF(f *hfFile) (*HF, error) {
	if isNull(f.Model) {
		return nil, fmt.Errorf("no \"model\" section")
	}
	var ms hfModelSection
	if err := json.Unmarshal(f.Model, &ms); err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	if typ := ms.modelType(); typ != "BPE" {
		return nil, fmt.Errorf("%w: model type %q (only BPE is supported)", ErrUnsupported, typ)
	}
	model, err := newBPEModel(&ms)
	if err != nil {
		return nil, err
	}
	t := &HF{model: model, addedByID: map[int]*addedToken{}, specialByID: map[int]string{}}

	if t.norm, err = newNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = newPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if !isNull(f.Decoder) {
		var d struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(f.Decoder, &d); err != nil {
			return nil, fmt.Errorf("decoder: %v", err)
		}
		if d.Type != "ByteLevel" {
			return nil, fmt.Errorf("%w: decoder type %q (only ByteLevel is supported)", ErrUnsupported, d.Type)
		}
		t.byteLevel = true
	}

	for id := range model.vocabR {
		t.vocabSize = max(t.vocabSize, id+1)
	}
	var raw, normed []*addedToken
	for i, at := range f.AddedTokens {
		if at.Content == "" {
			continue // the Rust library ignores empty added tokens
		}
		a := &addedToken{
			content: at.Content, id: at.ID, special: at.Special,
			lstrip: at.LStrip, rstrip: at.RStrip, singleWord: at.SingleWord,
			normalized: !at.Special,
		}
		if at.Normalized != nil {
			a.normalized = *at.Normalized
		}
		// Like the Rust library, a token already in the model vocabulary
		// keeps its model id.
		if id, ok := model.vocab[a.content]; ok {
			a.id = id
		}
		if a.id < 0 {
			return nil, fmt.Errorf("added_tokens[%d] %q has negative id %d", i, a.content, a.id)
		}
		if prev, dup := t.addedByID[a.id]; dup {
			return nil, fmt.Errorf("added_tokens: id %d is used by both %q and %q", a.id, prev.content, a.content)
		}
		t.addedByID[a.id] = a
		t.added = append(t.added, a)
		if a.special {
			t.specialByID[a.id] = a.content
		}
		t.vocabSize = max(t.vocabSize, a.id+1)
		if a.normalized {
			m := *a
			if t.norm != nil {
				m.content = t.norm(m.content)
			}
			if m.content != "" {
				normed = append(normed, &m)
			}
		} else {
			raw = append(raw, a)
		}
	}
	t.rawAdded = newAddedMatcher(raw)
	t.normAdded = newAddedMatcher(normed)
	return t, nil
}

// newNormalizer builds a tokenizer.json "normalizer" section; nil for null.
func newNormalizer(raw json.RawMessage) (func(string) string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var sec struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
		Prepend     string            `json:"prepend"`
		Left        *bool             `json:"strip_left"`
		Right       *bool             `json:"strip_right"`
		Content     string            `json:"content"`
		Pattern     struct {
			String *string `json:"String"`
		} `json:"pattern"`
	}
	if err := json.Unmarshal(raw, &sec); err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	switch sec.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Prepend":
		return func(s string) string {
			if s == "" {
				return s
			}
			return sec.Prepend + s
		}, nil
	case "Strip":
		left, right := sec.Left == nil || *sec.Left, sec.Right == nil || *sec.Right
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	case "Replace":
		if sec.Pattern.String == nil {
			return nil, fmt.Errorf("%w: normalizer Replace with a Regex pattern", ErrUnsupported)
		}
		from, to := *sec.Pattern.String, sec.Content
		return func(s string) string { return strings.ReplaceAll(s, from, to) }, nil
	case "Sequence":
		var fs []func(string) string
		for i, r := range sec.Normalizers {
			f, err := newNormalizer(r)
			if err != nil {
				return nil, fmt.Errorf("normalizer Sequence[%d]: %w", i, err)
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	default:
		return nil, fmt.Errorf("%w: normalizer type %q", ErrUnsupported, sec.Type)
	}
}

type addedToken struct {
	content                             string
	id                                  int
	special, lstrip, rstrip, singleWord bool
	normalized                          bool
}

// addedMatcher finds added tokens in text, leftmost-longest, like the
// Aho-Corasick automaton of the Rust library.
type addedMatcher struct {
	byFirst map[byte][]*addedToken // longest first
}

func newAddedMatcher(toks []*addedToken) *addedMatcher {
	m := &addedMatcher{byFirst: map[byte][]*addedToken{}}
	for _, a := range toks {
		m.byFirst[a.content[0]] = append(m.byFirst[a.content[0]], a)
	}
	for _, l := range m.byFirst {
		sort.SliceStable(l, func(i, j int) bool { return len(l[i].content) > len(l[j].content) })
	}
	return m
}

// segment is a piece of text, or an added token when tok is not nil.
type segment struct {
	text string
	tok  *addedToken
}

func (m *addedMatcher) split(s string) []segment {
	if len(m.byFirst) == 0 {
		if s == "" {
			return nil
		}
		return []segment{{text: s}}
	}
	var out []segment
	done := 0 // end of the last emitted token
	for i := 0; i < len(s); {
		var tok *addedToken
		for _, a := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], a.content) {
				tok = a
				break
			}
		}
		if tok == nil {
			i++
			continue
		}
		start, stop := i, i+len(tok.content)
		i = stop
		if tok.singleWord {
			before, _ := utf8.DecodeLastRuneInString(s[:start])
			after, _ := utf8.DecodeRuneInString(s[stop:])
			if (start > 0 && isWordChar(before)) || (stop < len(s) && isWordChar(after)) {
				continue
			}
		}
		if tok.lstrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), done)
		}
		if tok.rstrip {
			stop = len(s) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
			i = stop
		}
		if start > done {
			out = append(out, segment{text: s[done:start]})
		}
		out = append(out, segment{tok: tok})
		done = stop
	}
	if done < len(s) {
		out = append(out, segment{text: s[done:]})
	}
	return out
}

func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r)
}
