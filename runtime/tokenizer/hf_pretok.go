package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// preTokenizer splits each piece of text into smaller pieces (and may
// rewrite them, as ByteLevel does).
type preTokenizer interface {
	preTokenize(pieces []string) []string
}

// gpt2Pattern is the split pattern of GPT-2, used by the ByteLevel
// pre-tokenizer when use_regex is true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

type preTokenizerSection struct {
	Type           string            `json:"type"`
	AddPrefixSpace *bool             `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Pattern        json.RawMessage   `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Individual     bool              `json:"individual_digits"`
}

// newPreTokenizer builds the pre-tokenizer of a tokenizer.json
// "pre_tokenizer" section; nil for null.
func newPreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var sec preTokenizerSection
	if err := json.Unmarshal(raw, &sec); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %v", err)
	}
	switch sec.Type {
	case "ByteLevel":
		bl := &byteLevelPre{addPrefixSpace: true}
		if sec.AddPrefixSpace != nil {
			bl.addPrefixSpace = *sec.AddPrefixSpace
		}
		if sec.UseRegex == nil || *sec.UseRegex {
			m, err := newRegexMatcher(gpt2Pattern)
			if err != nil {
				return nil, err
			}
			bl.split = m
		}
		return bl, nil
	case "Split":
		var pat struct {
			Regex  *string `json:"Regex"`
			String *string `json:"String"`
		}
		if err := json.Unmarshal(sec.Pattern, &pat); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: pattern: %v", err)
		}
		var m matcher
		switch {
		case pat.Regex != nil:
			rm, err := newRegexMatcher(*pat.Regex)
			if err != nil {
				return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
			}
			m = rm
		case pat.String != nil:
			m = literalMatcher(*pat.String)
		default:
			return nil, fmt.Errorf("pre_tokenizer Split: pattern has neither Regex nor String")
		}
		b, err := parseBehavior(sec.Behavior)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		return &splitPre{m: m, behavior: b, invert: sec.Invert}, nil
	case "Digits":
		b := behaviorContiguous
		if sec.Individual {
			b = behaviorIsolated
		}
		return &splitPre{m: funcMatcher(unicode.IsNumber), behavior: b}, nil
	case "Sequence":
		var seq sequencePre
		for i, r := range sec.Pretokenizers {
			p, err := newPreTokenizer(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	default:
		return nil, fmt.Errorf("%w: pre_tokenizer type %q", ErrUnsupported, sec.Type)
	}
}

type sequencePre []preTokenizer

func (s sequencePre) preTokenize(pieces []string) []string {
	for _, p := range s {
		pieces = p.preTokenize(pieces)
	}
	return pieces
}

// byteLevelPre is the ByteLevel pre-tokenizer: optional prefix space,
// optional GPT-2 split, then each byte becomes its GPT-2 character.
type byteLevelPre struct {
	addPrefixSpace bool
	split          matcher // nil: use_regex false
}

func (p *byteLevelPre) preTokenize(pieces []string) []string {
	var out []string
	for _, s := range pieces {
		if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		if p.split == nil {
			out = append(out, byteLevelChars(s))
			continue
		}
		for _, part := range splitBy(s, p.split.find(s), behaviorIsolated, false) {
			out = append(out, byteLevelChars(part))
		}
	}
	return out
}

// byteLevelChars replaces every byte of s by its GPT-2 character.
func byteLevelChars(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}

type splitPre struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

func (p *splitPre) preTokenize(pieces []string) []string {
	var out []string
	for _, s := range pieces {
		out = append(out, splitBy(s, p.m.find(s), p.behavior, p.invert)...)
	}
	return out
}

type splitBehavior int

const (
	behaviorRemoved splitBehavior = iota
	behaviorIsolated
	behaviorMergedWithPrevious
	behaviorMergedWithNext
	behaviorContiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Removed":
		return behaviorRemoved, nil
	case "Isolated":
		return behaviorIsolated, nil
	case "MergedWithPrevious":
		return behaviorMergedWithPrevious, nil
	case "MergedWithNext":
		return behaviorMergedWithNext, nil
	case "Contiguous":
		return behaviorContiguous, nil
	}
	return 0, fmt.Errorf("%w: split behavior %q", ErrUnsupported, s)
}

type span struct {
	start, end int
	match      bool
}

// splitBy cuts s at the matches (non-overlapping, increasing, non-empty
// [start, end) pairs) and combines the parts as the Rust library's
// SplitDelimiterBehavior does. Empty parts are dropped.
func splitBy(s string, matches [][2]int, behavior splitBehavior, invert bool) []string {
	var spans []span
	last := 0
	for _, m := range matches {
		if m[0] > last {
			spans = append(spans, span{last, m[0], invert})
		}
		spans = append(spans, span{m[0], m[1], !invert})
		last = m[1]
	}
	if last < len(s) || len(spans) == 0 {
		spans = append(spans, span{last, len(s), invert})
	}

	var out []span
	switch behavior {
	case behaviorIsolated:
		out = spans
	case behaviorRemoved:
		for _, sp := range spans {
			if !sp.match {
				out = append(out, sp)
			}
		}
	case behaviorMergedWithPrevious:
		prevMatch := false
		for _, sp := range spans {
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
	case behaviorMergedWithNext:
		prevMatch := false
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = sp.start
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	case behaviorContiguous:
		prevMatch := false
		for _, sp := range spans {
			if sp.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prevMatch = sp.match
		}
	}
	parts := make([]string, 0, len(out))
	for _, sp := range out {
		if sp.end > sp.start {
			parts = append(parts, s[sp.start:sp.end])
		}
	}
	return parts
}

// matcher finds non-overlapping, non-empty matches, leftmost first.
type matcher interface {
	find(s string) [][2]int
}

type literalMatcher string

func (l literalMatcher) find(s string) [][2]int {
	if l == "" {
		return nil
	}
	var out [][2]int
	for i := 0; ; {
		j := strings.Index(s[i:], string(l))
		if j < 0 {
			return out
		}
		out = append(out, [2]int{i + j, i + j + len(l)})
		i += j + len(l)
	}
}

// funcMatcher matches each single character for which the function is true.
type funcMatcher func(rune) bool

func (f funcMatcher) find(s string) [][2]int {
	var out [][2]int
	for i, r := range s {
		if f(r) {
			out = append(out, [2]int{i, i + utf8.RuneLen(r)})
		}
	}
	return out
}

// regexMatcher runs an Oniguruma pattern (the regex dialect of the Rust
// library) translated to Go's RE2. RE2 has no look-around; the one form that
// tokenizers use, a top-level alternative `\s+(?!\S)`, is emulated: it is
// compiled as `\s+` and a match of it that is followed by a non-space gives
// back its last character (the backtracking that the look-ahead forces); if
// nothing is left, the alternatives after it are tried at that position.
type regexMatcher struct {
	re       *regexp.Regexp
	laGroup  int            // submatch index of the look-ahead alternative; 0 if none
	fallback *regexp.Regexp // anchored alternatives after the look-ahead one; nil if none
}

const lookaheadAlt = `\s+(?!\S)`

func newRegexMatcher(pattern string) (*regexMatcher, error) {
	alts, err := topLevelAlternatives(pattern)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", pattern, err)
	}
	la := -1
	var parts []string
	for i, a := range alts {
		if a == lookaheadAlt && la < 0 {
			la = i
			parts = append(parts, `(?P<horizon_lookahead>`+whitespaceClass+`+)`)
			continue
		}
		t, err := translateOniguruma(a)
		if err != nil {
			return nil, fmt.Errorf("regex %q: %w", pattern, err)
		}
		parts = append(parts, "(?:"+t+")")
	}
	re, err := regexp.Compile(strings.Join(parts, "|"))
	if err != nil {
		return nil, fmt.Errorf("%w: regex %q: %v", ErrUnsupported, pattern, err)
	}
	m := &regexMatcher{re: re}
	if la >= 0 {
		m.laGroup = re.SubexpIndex("horizon_lookahead")
		if la+1 < len(parts) {
			m.fallback = regexp.MustCompile("^(?:" + strings.Join(parts[la+1:], "|") + ")")
		}
	}
	return m, nil
}

func (m *regexMatcher) find(s string) [][2]int {
	var out [][2]int
	for pos := 0; pos <= len(s); {
		var loc []int
		if m.laGroup > 0 {
			loc = m.re.FindStringSubmatchIndex(s[pos:])
		} else {
			loc = m.re.FindStringIndex(s[pos:])
		}
		if loc == nil {
			break
		}
		a, b := pos+loc[0], pos+loc[1]
		if m.laGroup > 0 && loc[2*m.laGroup] >= 0 && b < len(s) {
			// Followed by a non-space: `\s+(?!\S)` backtracks one character.
			_, w := utf8.DecodeLastRuneInString(s[a:b])
			b -= w
			if b == a && m.fallback != nil {
				if l := m.fallback.FindStringIndex(s[a:]); l != nil {
					b = a + l[1]
				}
			}
		}
		if b == a {
			// Empty match (or failed look-ahead): move on one character.
			if a >= len(s) {
				break
			}
			_, w := utf8.DecodeRuneInString(s[a:])
			pos = a + w
			continue
		}
		out = append(out, [2]int{a, b})
		pos = b
	}
	return out
}

// whitespaceClass is Oniguruma's Unicode \s (the White_Space property) as
// an RE2 class; RE2's own \s is ASCII only.
const (
	whitespaceClass     = `[\t-\r\x{85}\p{Z}]`
	whitespaceClassBody = `\t-\r\x{85}\p{Z}`
	wordClassBody       = `\p{L}\p{M}\p{Nd}\p{Pc}`
)

// topLevelAlternatives splits pattern at its top-level '|'.
func topLevelAlternatives(p string) ([]string, error) {
	var alts []string
	depth, inClass, start := 0, 0, 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case inClass > 0:
			if c == '[' {
				inClass++
			} else if c == ']' {
				inClass--
			}
		case c == '[':
			inClass = 1
			if i+1 < len(p) && p[i+1] == ']' {
				i++ // "[]...]": a leading ']' is literal
			} else if i+2 < len(p) && p[i+1] == '^' && p[i+2] == ']' {
				i += 2
			}
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ')'")
			}
		case c == '|' && depth == 0:
			alts = append(alts, p[start:i])
			start = i + 1
		}
	}
	if depth != 0 || inClass != 0 {
		return nil, fmt.Errorf("unbalanced '(' or '['")
	}
	return append(alts, p[start:]), nil
}

// translateOniguruma rewrites the escapes whose meaning differs between
// Oniguruma (Unicode-aware \s \d \w, \uHHHH) and RE2, and rejects
// look-around and anchors that a split on a substring cannot honour.
func translateOniguruma(p string) (string, error) {
	var b strings.Builder
	inClass := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' {
			if i+1 >= len(p) {
				return "", fmt.Errorf("%w: trailing backslash", ErrUnsupported)
			}
			i++
			e := p[i]
			switch e {
			case 's':
				if inClass > 0 {
					b.WriteString(whitespaceClassBody)
				} else {
					b.WriteString(whitespaceClass)
				}
			case 'S':
				if inClass > 0 {
					return "", fmt.Errorf("%w: \\S inside a character class", ErrUnsupported)
				}
				b.WriteString(`[^` + whitespaceClassBody + `]`)
			case 'd':
				b.WriteString(`\p{Nd}`)
			case 'D':
				b.WriteString(`\P{Nd}`)
			case 'w':
				if inClass > 0 {
					b.WriteString(wordClassBody)
				} else {
					b.WriteString(`[` + wordClassBody + `]`)
				}
			case 'W':
				if inClass > 0 {
					return "", fmt.Errorf("%w: \\W inside a character class", ErrUnsupported)
				}
				b.WriteString(`[^` + wordClassBody + `]`)
			case 'u':
				if i+4 >= len(p) {
					return "", fmt.Errorf("%w: short \\u escape", ErrUnsupported)
				}
				b.WriteString(`\x{` + p[i+1:i+5] + `}`)
				i += 4
			case 'A', 'z', 'Z', 'b', 'B', 'G', 'K':
				return "", fmt.Errorf("%w: anchor or \\%c", ErrUnsupported, e)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
			continue
		}
		switch {
		case inClass > 0:
			if c == '[' {
				if strings.HasPrefix(p[i:], "[:") {
					inClass++
				} else {
					return "", fmt.Errorf("%w: nested character class", ErrUnsupported)
				}
			} else if c == ']' {
				inClass--
			} else if c == '&' && i+1 < len(p) && p[i+1] == '&' {
				return "", fmt.Errorf("%w: class intersection", ErrUnsupported)
			}
		case c == '[':
			inClass = 1
			b.WriteByte(c)
			if strings.HasPrefix(p[i+1:], "^]") {
				b.WriteString("^]")
				i += 2
			} else if strings.HasPrefix(p[i+1:], "]") {
				b.WriteString("]")
				i++
			}
			continue
		case c == '(' && isLookaround(p[i:]):
			return "", fmt.Errorf("%w: look-around or atomic group (only a top-level `\\s+(?!\\S)` alternative is supported)", ErrUnsupported)
		case c == '^' || c == '$':
			return "", fmt.Errorf("%w: anchor %q", ErrUnsupported, c)
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

func isLookaround(p string) bool {
	for _, pre := range []string{"(?=", "(?!", "(?<=", "(?<!", "(?>"} {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}
