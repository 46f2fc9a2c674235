package ifeval

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// This file holds the Python string semantics the reference checkers rely
// on, written against Go's unicode tables (Unicode 15 in Go 1.26; CPython's
// own tables differ by at most a Unicode version, which no IFEval response
// exercises).

// pyIsSpace is Python's str.isspace for one character: the Unicode
// White_Space characters plus the ASCII information separators U+001C..U+001F,
// which Python counts as whitespace (bidirectional class B or S) and Go's
// unicode.IsSpace does not.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pySpaceClass is Python's regex `\s` on str patterns (it matches exactly the
// characters of str.isspace), as an RE2 character class. Go's `\s` is ASCII
// only and lacks \v.
const pySpaceClass = `[\t\n\v\f\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`

// pyDigitClass is Python's regex `\d` on str patterns: Unicode decimal digits.
const pyDigitClass = `\p{Nd}`

// pyStrip is Python's str.strip() with no argument.
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

// pyFields is Python's str.split() with no argument.
func pyFields(s string) []string { return strings.FieldsFunc(s, pyIsSpace) }

// pyIsWord is Python's regex `\w` on str patterns: str.isalnum() or '_'.
// isalnum is a letter (Lu, Ll, Lt, Lm, Lo) or a numeric character (Nd, Nl,
// No). Combining marks (Mn, Mc) are not word characters in Python, so a
// Devanagari word with vowel signs splits into several `\w+` tokens; this
// function keeps that behaviour.
func pyIsWord(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.In(r, unicode.Nd, unicode.Nl, unicode.No)
}

// pyCountWords is nltk's RegexpTokenizer(r"\w+") token count: the number of
// maximal runs of pyIsWord characters.
func pyCountWords(s string) int {
	n, in := 0, false
	for _, r := range s {
		w := pyIsWord(r)
		if w && !in {
			n++
		}
		in = w
	}
	return n
}

// Python's cased-character predicates: Uppercase and Lowercase are the
// derived properties (Lu plus Other_Uppercase, Ll plus Other_Lowercase);
// titlecase is Lt.
func pyUpperRune(r rune) bool { return unicode.In(r, unicode.Lu, unicode.Other_Uppercase) }
func pyLowerRune(r rune) bool { return unicode.In(r, unicode.Ll, unicode.Other_Lowercase) }
func pyTitleRune(r rune) bool { return unicode.Is(unicode.Lt, r) }

// pyIsUpper is Python's str.isupper: at least one cased character, and no
// lowercase or titlecase character.
func pyIsUpper(s string) bool {
	cased := false
	for _, r := range s {
		if pyLowerRune(r) || pyTitleRune(r) {
			return false
		}
		if pyUpperRune(r) {
			cased = true
		}
	}
	return cased
}

// pyIsLower is Python's str.islower: at least one cased character, and no
// uppercase or titlecase character.
func pyIsLower(s string) bool {
	cased := false
	for _, r := range s {
		if pyUpperRune(r) || pyTitleRune(r) {
			return false
		}
		if pyLowerRune(r) {
			cased = true
		}
	}
	return cased
}

// pyLower is Python's str.lower: full Unicode lowercasing, with the special
// cases (U+0130 to "i\u0307", a word-final capital sigma to ς) that
// strings.ToLower does not apply. x/text/cases implements both.
func pyLower(s string) string { return cases.Lower(language.Und).String(s) }

// pyWordBoundary is Python's `\b` at byte offset i of s: exactly one of the
// characters before and after i is a word character (pyIsWord).
func pyWordBoundary(s string, i int) bool {
	before, after := false, false
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		before = pyIsWord(r)
	}
	if i < len(s) {
		r, _ := utf8.DecodeRuneInString(s[i:])
		after = pyIsWord(r)
	}
	return before != after
}

func sortStrings(s []string) { sort.Strings(s) }
