package ifeval

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Kwargs are one instruction's arguments, as in the "kwargs" objects of
// input_data.jsonl. A nil pointer is an argument the row does not give.
type Kwargs struct {
	Language         *string  `json:"language,omitempty"`
	NumSentences     *int     `json:"num_sentences,omitempty"`
	Relation         *string  `json:"relation,omitempty"`
	NumPlaceholders  *int     `json:"num_placeholders,omitempty"`
	NumBullets       *int     `json:"num_bullets,omitempty"`
	NumHighlights    *int     `json:"num_highlights,omitempty"`
	SectionSpliter   *string  `json:"section_spliter,omitempty"`
	NumSections      *int     `json:"num_sections,omitempty"`
	NumParagraphs    *int     `json:"num_paragraphs,omitempty"`
	NthParagraph     *int     `json:"nth_paragraph,omitempty"`
	FirstWord        *string  `json:"first_word,omitempty"`
	PostscriptMarker *string  `json:"postscript_marker,omitempty"`
	Keywords         []string `json:"keywords,omitempty"`
	Keyword          *string  `json:"keyword,omitempty"`
	Frequency        *int     `json:"frequency,omitempty"`
	NumWords         *int     `json:"num_words,omitempty"`
	ForbiddenWords   []string `json:"forbidden_words,omitempty"`
	PromptToRepeat   *string  `json:"prompt_to_repeat,omitempty"`
	EndPhrase        *string  `json:"end_phrase,omitempty"`
	Letter           *string  `json:"letter,omitempty"`
	LetFrequency     *int     `json:"let_frequency,omitempty"`
	LetRelation      *string  `json:"let_relation,omitempty"`
	CapitalFrequency *int     `json:"capital_frequency,omitempty"`
	CapitalRelation  *string  `json:"capital_relation,omitempty"`
}

// A Checker says whether one response follows one instruction. It is a
// pure function of the response: it never panics and keeps no state.
type Checker func(response string) bool

// ErrUnknownInstruction is returned for an instruction id outside the
// reference registry.
var ErrUnknownInstruction = errors.New("unknown instruction id")

// ErrBadKwargs is returned for a missing or invalid argument. Where the
// reference would draw a random value, this scorer refuses instead, so that
// a score is a function of its inputs.
var ErrBadKwargs = errors.New("bad instruction arguments")

type builder func(k Kwargs) (Checker, error)

// registry maps each of the 25 instruction ids of the reference registry to
// its checker's constructor.
var registry = map[string]builder{
	"keywords:existence":                            buildKeywordExistence,
	"keywords:frequency":                            buildKeywordFrequency,
	"keywords:forbidden_words":                      buildForbiddenWords,
	"keywords:letter_frequency":                     buildLetterFrequency,
	"language:response_language":                    buildResponseLanguage,
	"length_constraints:number_sentences":           buildNumberSentences,
	"length_constraints:number_paragraphs":          buildNumberParagraphs,
	"length_constraints:number_words":               buildNumberWords,
	"length_constraints:nth_paragraph_first_word":   buildNthParagraphFirstWord,
	"detectable_content:number_placeholders":        buildPlaceholders,
	"detectable_content:postscript":                 buildPostscript,
	"detectable_format:number_bullet_lists":         buildBulletLists,
	"detectable_format:constrained_response":        buildConstrainedResponse,
	"detectable_format:number_highlighted_sections": buildHighlights,
	"detectable_format:multiple_sections":           buildSections,
	"detectable_format:json_format":                 buildJSONFormat,
	"detectable_format:title":                       buildTitle,
	"combination:two_responses":                     buildTwoResponses,
	"combination:repeat_prompt":                     buildRepeatPrompt,
	"startend:end_checker":                          buildEndChecker,
	"startend:quotation":                            buildQuotation,
	"change_case:capital_word_frequency":            buildCapitalWordFrequency,
	"change_case:english_capital":                   buildEnglishCapital,
	"change_case:english_lowercase":                 buildEnglishLowercase,
	"punctuation:no_comma":                          buildNoComma,
}

// InstructionIDs returns the 25 instruction ids, sorted.
func InstructionIDs() []string {
	ids := make([]string, 0, len(registry))
	for id := range registry {
		ids = append(ids, id)
	}
	sortStrings(ids)
	return ids
}

// Category is the part of an instruction id before the colon
// ("keywords" for "keywords:existence"), the reference's first tier.
func Category(id string) string {
	c, _, _ := strings.Cut(id, ":")
	return c
}

// NewChecker builds the checker of instruction id with its arguments.
func NewChecker(id string, k Kwargs) (Checker, error) {
	b, ok := registry[id]
	if !ok {
		return nil, fmt.Errorf("%q: %w", id, ErrUnknownInstruction)
	}
	c, err := b(k)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	return c, nil
}

func need[T any](p *T, name string) (T, error) {
	if p == nil {
		var zero T
		return zero, fmt.Errorf("%s missing: %w", name, ErrBadKwargs)
	}
	return *p, nil
}

// relation returns the comparison "less than" (n < threshold) or
// "at least" (n >= threshold).
func relation(p *string, name string) (func(n, threshold int) bool, error) {
	r, err := need(p, name)
	if err != nil {
		return nil, err
	}
	switch r {
	case "less than":
		return func(n, t int) bool { return n < t }, nil
	case "at least":
		return func(n, t int) bool { return n >= t }, nil
	}
	return nil, fmt.Errorf("%s %q is neither \"less than\" nor \"at least\": %w", name, r, ErrBadKwargs)
}

func nonNegative(p *int, name string) (int, error) {
	n, err := need(p, name)
	if err == nil && n < 0 {
		err = fmt.Errorf("%s %d < 0: %w", name, n, ErrBadKwargs)
	}
	return n, err
}

// pyRegexp compiles a pattern taken from the kwargs, which the reference
// hands to Python's re: case-insensitive where asked, with Python's `\s` and
// `\d`. A pattern RE2 cannot compile is matched as a literal string.
func pyRegexp(pattern string, fold bool) *regexp.Regexp {
	p := strings.NewReplacer(`\s`, pySpaceClass, `\d`, pyDigitClass).Replace(pattern)
	if fold {
		p = "(?i)" + p
	}
	re, err := regexp.Compile(p)
	if err != nil {
		lit := regexp.QuoteMeta(pattern)
		if fold {
			lit = "(?i)" + lit
		}
		re = regexp.MustCompile(lit)
	}
	return re
}

// keywords:existence — every keyword occurs, case-insensitively (the
// keyword is a Python regular expression, as in the reference).
func buildKeywordExistence(k Kwargs) (Checker, error) {
	if len(k.Keywords) == 0 {
		return nil, fmt.Errorf("keywords missing: %w", ErrBadKwargs)
	}
	res := make([]*regexp.Regexp, len(k.Keywords))
	for i, w := range k.Keywords {
		res[i] = pyRegexp(w, true)
	}
	return func(v string) bool {
		for _, re := range res {
			if !re.MatchString(v) {
				return false
			}
		}
		return true
	}, nil
}

// keywords:frequency — the number of non-overlapping case-insensitive
// matches of the keyword against the threshold.
func buildKeywordFrequency(k Kwargs) (Checker, error) {
	kw, err := need(k.Keyword, "keyword")
	if err != nil {
		return nil, err
	}
	if pyStrip(kw) == "" {
		return nil, fmt.Errorf("keyword empty: %w", ErrBadKwargs)
	}
	f, err := nonNegative(k.Frequency, "frequency")
	if err != nil {
		return nil, err
	}
	cmp, err := relation(k.Relation, "relation")
	if err != nil {
		return nil, err
	}
	re := pyRegexp(pyStrip(kw), true)
	return func(v string) bool { return cmp(len(re.FindAllStringIndex(v, -1)), f) }, nil
}

// keywords:forbidden_words — no forbidden word occurs as a whole word,
// case-insensitively. Word boundaries are Python's Unicode `\b` (between a
// pyIsWord character and a non-word one), which RE2's ASCII `\b` is not.
func buildForbiddenWords(k Kwargs) (Checker, error) {
	if len(k.ForbiddenWords) == 0 {
		return nil, fmt.Errorf("forbidden_words missing: %w", ErrBadKwargs)
	}
	res := make([]*regexp.Regexp, len(k.ForbiddenWords))
	for i, w := range k.ForbiddenWords {
		res[i] = pyRegexp(w, true)
	}
	return func(v string) bool {
		for _, re := range res {
			if hasWholeWordMatch(re, v) {
				return false
			}
		}
		return true
	}, nil
}

// hasWholeWordMatch reports a match of re in v with a Python `\b` on both
// sides, trying every start position as a backtracking engine would.
func hasWholeWordMatch(re *regexp.Regexp, v string) bool {
	for start := 0; start <= len(v); {
		loc := re.FindStringIndex(v[start:])
		if loc == nil {
			return false
		}
		b, e := start+loc[0], start+loc[1]
		if pyWordBoundary(v, b) && pyWordBoundary(v, e) {
			return true
		}
		start = b + 1
		for start < len(v) && !utf8RuneStart(v[start]) {
			start++
		}
	}
	return false
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// buildLetterFrequency: keywords:letter_frequency — occurrences of the
// letter in the lowercased response against the threshold, as
// collections.Counter counts them.
//
// Rule LetterNotALetter: the reference keeps the kwarg only when it is one
// character whose lowercase is an ASCII letter; otherwise (keys 1122 "#" and
// 1129 "!"; also "", "é", "ab") it draws random.choice(string.ascii_letters)
// when the instruction is built, which after lowercasing is each of a..z
// with probability 1/26, and then applies the count relation to that letter.
// Its verdict is a coin with P(followed) = k/26, k the number of letters
// a..z for which the relation holds, and the deterministic verdict that
// agrees with it most often is the likelier side: followed when k > 13, not
// followed when k <= 13 (at k = 13 both sides agree half the time). That is
// this rule. Counting the given character itself, the rule of ifeval-go-v1,
// follows the prompt's wording but has no relation to what the reference
// computes. The loose score applies the rule to each variant and ORs the
// results; the reference draws one letter for all eight variants, so for
// "at least" this is its likelier loose verdict exactly (the response itself
// holds the most of every letter) and for "less than" it can claim followed
// where the reference more likely says not. A one-character kwarg whose
// lowercase is two characters (U+0130) makes the reference raise, and is an
// error here.
func buildLetterFrequency(k Kwargs) (Checker, error) {
	l, err := need(k.Letter, "letter")
	if err != nil {
		return nil, err
	}
	f, err := nonNegative(k.LetFrequency, "let_frequency")
	if err != nil {
		return nil, err
	}
	cmp, err := relation(k.LetRelation, "let_relation")
	if err != nil {
		return nil, err
	}
	var letter rune // 0: the reference draws one
	if rs := []rune(l); len(rs) == 1 {
		lower := []rune(pyLower(l))
		if len(lower) != 1 {
			return nil, fmt.Errorf("letter %q lowercases to %q: %w", l, string(lower), ErrBadKwargs)
		}
		if lower[0] >= 'a' && lower[0] <= 'z' {
			letter = lower[0]
		}
	}
	if letter != 0 {
		return func(v string) bool {
			n := 0
			for _, r := range pyLower(v) {
				if r == letter {
					n++
				}
			}
			return cmp(n, f)
		}, nil
	}
	return func(v string) bool {
		var counts [26]int
		for _, r := range pyLower(v) {
			if r >= 'a' && r <= 'z' {
				counts[r-'a']++
			}
		}
		k := 0
		for _, n := range counts {
			if cmp(n, f) {
				k++
			}
		}
		return 2*k > len(counts)
	}, nil
}

// language:response_language — the detected language is the one asked; a
// detection error counts as followed (see detectLanguage).
func buildResponseLanguage(k Kwargs) (Checker, error) {
	lang, err := need(k.Language, "language")
	if err != nil {
		return nil, err
	}
	return func(v string) bool {
		got, ok := detectLanguage(v)
		return !ok || got == lang
	}, nil
}

// length_constraints:number_sentences — Punkt sentence count against the
// threshold.
func buildNumberSentences(k Kwargs) (Checker, error) {
	n, err := nonNegative(k.NumSentences, "num_sentences")
	if err != nil {
		return nil, err
	}
	cmp, err := relation(k.Relation, "relation")
	if err != nil {
		return nil, err
	}
	return func(v string) bool { return cmp(countSentences(v), n) }, nil
}

var reParagraphRule = regexp.MustCompile(pySpaceClass + `?\*\*\*` + pySpaceClass + `?`)

// splitRe is Python's re.split for a pattern that never matches empty.
func splitRe(re *regexp.Regexp, v string) []string {
	var out []string
	last := 0
	for _, m := range re.FindAllStringIndex(v, -1) {
		out = append(out, v[last:m[0]])
		last = m[1]
	}
	return append(out, v[last:])
}

// length_constraints:number_paragraphs — exactly n paragraphs separated by
// `***` lines; an empty paragraph is allowed only first or last.
func buildNumberParagraphs(k Kwargs) (Checker, error) {
	n, err := nonNegative(k.NumParagraphs, "num_paragraphs")
	if err != nil {
		return nil, err
	}
	return func(v string) bool {
		ps := splitRe(reParagraphRule, v)
		count := len(ps)
		for i, p := range ps {
			if pyStrip(p) == "" {
				if i == 0 || i == len(ps)-1 {
					count--
				} else {
					return false
				}
			}
		}
		return count == n
	}, nil
}

// length_constraints:number_words — `\w+` token count against the threshold.
func buildNumberWords(k Kwargs) (Checker, error) {
	n, err := nonNegative(k.NumWords, "num_words")
	if err != nil {
		return nil, err
	}
	cmp, err := relation(k.Relation, "relation")
	if err != nil {
		return nil, err
	}
	return func(v string) bool { return cmp(pyCountWords(v), n) }, nil
}

// length_constraints:nth_paragraph_first_word — exactly num_paragraphs
// non-empty paragraphs separated by "\n\n", and the nth's first word
// (leading quotes dropped, cut at the first of . , ? ! ' ") is first_word,
// case-insensitively.
func buildNthParagraphFirstWord(k Kwargs) (Checker, error) {
	num, err := nonNegative(k.NumParagraphs, "num_paragraphs")
	if err != nil {
		return nil, err
	}
	nth, err := need(k.NthParagraph, "nth_paragraph")
	if err != nil {
		return nil, err
	}
	if nth <= 0 || nth > num {
		return nil, fmt.Errorf("nth_paragraph %d outside 1..%d: %w", nth, num, ErrBadKwargs)
	}
	fw, err := need(k.FirstWord, "first_word")
	if err != nil {
		return nil, err
	}
	want := pyLower(fw)
	return func(v string) bool {
		ps := strings.Split(v, "\n\n")
		count := len(ps)
		for _, p := range ps {
			if pyStrip(p) == "" {
				count--
			}
		}
		if nth > count {
			return false
		}
		p := pyStrip(ps[nth-1])
		if p == "" {
			return false
		}
		word := pyFields(p)[0]
		word = strings.TrimLeft(word, "'")
		word = strings.TrimLeft(word, `"`)
		var got strings.Builder
		for _, r := range word {
			if strings.ContainsRune(`.,?!'"`, r) {
				break
			}
			got.WriteString(pyLower(string(r)))
		}
		return count == num && got.String() == want
	}, nil
}

var rePlaceholder = regexp.MustCompile(`\[.*?\]`)

// detectable_content:number_placeholders — at least n `[...]` placeholders
// on one line each.
func buildPlaceholders(k Kwargs) (Checker, error) {
	n, err := nonNegative(k.NumPlaceholders, "num_placeholders")
	if err != nil {
		return nil, err
	}
	return func(v string) bool { return len(rePlaceholder.FindAllStringIndex(v, -1)) >= n }, nil
}

// detectable_content:postscript — a line of the lowercased response holds
// the marker: "P.S." allows "p. s.", "P.P.S" allows "p. p. s"; any other
// marker is used, lowercased, as a Python regular expression.
func buildPostscript(k Kwargs) (Checker, error) {
	m, err := need(k.PostscriptMarker, "postscript_marker")
	if err != nil {
		return nil, err
	}
	m = pyStrip(m)
	var re *regexp.Regexp
	switch m {
	case "P.P.S":
		re = pyRegexp(`(?m)\s*p\.\s?p\.\s?s.*$`, false)
	case "P.S.":
		re = pyRegexp(`(?m)\s*p\.\s?s\..*$`, false)
	default:
		re = pyRegexp(`(?m)\s*`+pyLower(m)+`.*$`, false)
	}
	return func(v string) bool { return re.MatchString(pyLower(v)) }, nil
}

var (
	reBulletStar = regexp.MustCompile(`(?m)^` + pySpaceClass + `*\*[^*].*$`)
	reBulletDash = regexp.MustCompile(`(?m)^` + pySpaceClass + `*-.*$`)
)

// detectable_format:number_bullet_lists — exactly n lines starting with
// "* " (not "**") or "-".
func buildBulletLists(k Kwargs) (Checker, error) {
	n, err := nonNegative(k.NumBullets, "num_bullets")
	if err != nil {
		return nil, err
	}
	return func(v string) bool {
		return len(reBulletStar.FindAllStringIndex(v, -1))+len(reBulletDash.FindAllStringIndex(v, -1)) == n
	}, nil
}

// detectable_format:constrained_response — contains one of the three
// answers "My answer is yes." / "no." / "maybe.".
func buildConstrainedResponse(Kwargs) (Checker, error) {
	return func(v string) bool {
		v = pyStrip(v)
		for _, a := range []string{"My answer is yes.", "My answer is no.", "My answer is maybe."} {
			if strings.Contains(v, a) {
				return true
			}
		}
		return false
	}, nil
}

var (
	reHighlight       = regexp.MustCompile(`\*[^\n*]*\*`)
	reDoubleHighlight = regexp.MustCompile(`\*\*[^\n*]*\*\*`)
)

// detectable_format:number_highlighted_sections — at least n non-empty
// highlights: *single* ones and, in a second scan, **double** ones (the
// single scan sees "**x**" as two empty "**", so a double one counts once).
func buildHighlights(k Kwargs) (Checker, error) {
	n, err := nonNegative(k.NumHighlights, "num_highlights")
	if err != nil {
		return nil, err
	}
	return func(v string) bool {
		count := 0
		for _, h := range reHighlight.FindAllString(v, -1) {
			if pyStrip(strings.Trim(h, "*")) != "" {
				count++
			}
		}
		for _, h := range reDoubleHighlight.FindAllString(v, -1) {
			h = strings.TrimSuffix(strings.TrimPrefix(h, "**"), "**")
			if pyStrip(h) != "" {
				count++
			}
		}
		return count >= n
	}, nil
}

// detectable_format:multiple_sections — at least n "<spliter> <digits>"
// section markers.
func buildSections(k Kwargs) (Checker, error) {
	s, err := need(k.SectionSpliter, "section_spliter")
	if err != nil {
		return nil, err
	}
	n, err := nonNegative(k.NumSections, "num_sections")
	if err != nil {
		return nil, err
	}
	re := pyRegexp(`\s?`+pyStrip(s)+`\s?\d+\s?`, false)
	return func(v string) bool { return len(re.FindAllStringIndex(v, -1)) >= n }, nil
}

// detectable_format:json_format — the response, stripped of one ```json
// (or ```Json, ```JSON, ```) fence, parses as JSON by Python's json.loads.
func buildJSONFormat(Kwargs) (Checker, error) {
	return func(v string) bool {
		v = pyStrip(v)
		for _, p := range []string{"```json", "```Json", "```JSON", "```"} {
			v = strings.TrimPrefix(v, p)
		}
		v = pyStrip(strings.TrimSuffix(v, "```"))
		return pyJSONValid(v)
	}, nil
}

var reTitle = regexp.MustCompile(`<<[^\n]+>>`)

// detectable_format:title — a non-blank <<title>> on one line.
func buildTitle(Kwargs) (Checker, error) {
	return func(v string) bool {
		for _, t := range reTitle.FindAllString(v, -1) {
			if pyStrip(strings.TrimRight(strings.TrimLeft(t, "<"), ">")) != "" {
				return true
			}
		}
		return false
	}, nil
}

// combination:two_responses — exactly two different non-blank responses
// separated by "******" (blank parts only at the ends).
func buildTwoResponses(Kwargs) (Checker, error) {
	return func(v string) bool {
		parts := strings.Split(v, "******")
		var valid []string
		for i, p := range parts {
			if pyStrip(p) == "" {
				if i != 0 && i != len(parts)-1 {
					return false
				}
			} else {
				valid = append(valid, p)
			}
		}
		return len(valid) == 2 && pyStrip(valid[0]) != pyStrip(valid[1])
	}, nil
}

// combination:repeat_prompt — starts with prompt_to_repeat, ignoring case
// and surrounding whitespace.
func buildRepeatPrompt(k Kwargs) (Checker, error) {
	p, err := need(k.PromptToRepeat, "prompt_to_repeat")
	if err != nil || p == "" {
		return nil, fmt.Errorf("prompt_to_repeat missing: %w", ErrBadKwargs)
	}
	want := pyLower(pyStrip(p))
	return func(v string) bool { return strings.HasPrefix(pyLower(pyStrip(v)), want) }, nil
}

// startend:end_checker — ends with end_phrase, ignoring case, surrounding
// whitespace and then surrounding double quotes.
func buildEndChecker(k Kwargs) (Checker, error) {
	e, err := need(k.EndPhrase, "end_phrase")
	if err != nil {
		return nil, err
	}
	want := pyLower(pyStrip(e))
	return func(v string) bool {
		return strings.HasSuffix(pyLower(strings.Trim(pyStrip(v), `"`)), want)
	}, nil
}

// startend:quotation — wrapped in double quotes after stripping.
func buildQuotation(Kwargs) (Checker, error) {
	return func(v string) bool {
		v = pyStrip(v)
		return len(v) > 1 && v[0] == '"' && v[len(v)-1] == '"'
	}, nil
}

// change_case:capital_word_frequency — the number of word_tokenize tokens
// that are all capitals (str.isupper) against the threshold.
func buildCapitalWordFrequency(k Kwargs) (Checker, error) {
	f, err := nonNegative(k.CapitalFrequency, "capital_frequency")
	if err != nil {
		return nil, err
	}
	cmp, err := relation(k.CapitalRelation, "capital_relation")
	if err != nil {
		return nil, err
	}
	return func(v string) bool {
		n := 0
		for _, w := range wordTokenize(v) {
			if pyIsUpper(w) {
				n++
			}
		}
		return cmp(n, f)
	}, nil
}

// change_case:english_capital — str.isupper and detected English; a
// detection error counts as followed.
func buildEnglishCapital(Kwargs) (Checker, error) {
	return func(v string) bool {
		if !pyIsUpper(v) {
			return false // Python's "and" never calls langdetect here
		}
		got, ok := detectLanguage(v)
		return !ok || got == "en"
	}, nil
}

// change_case:english_lowercase — str.islower and detected English; a
// detection error counts as followed.
func buildEnglishLowercase(Kwargs) (Checker, error) {
	return func(v string) bool {
		if !pyIsLower(v) {
			return false // Python's "and" never calls langdetect here
		}
		got, ok := detectLanguage(v)
		return !ok || got == "en"
	}, nil
}

// punctuation:no_comma — no ASCII comma.
func buildNoComma(Kwargs) (Checker, error) {
	return func(v string) bool { return !strings.Contains(v, ",") }, nil
}
