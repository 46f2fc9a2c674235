package ifeval

import (
	"errors"
	"testing"
)

func ip(n int) *int       { return &n }
func sp(s string) *string { return &s }

// TestCheckers runs each checker on a passing and a failing response, and
// the edge cases where Python semantics matter.
func TestCheckers(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		k        Kwargs
		resp     string
		want     bool
	}{
		{"existence pass", "keywords:existence", Kwargs{Keywords: []string{"Brown", "fox"}}, "the brown FOX", true},
		{"existence fail", "keywords:existence", Kwargs{Keywords: []string{"brown", "dog"}}, "the brown fox", false},
		{"existence substring counts", "keywords:existence", Kwargs{Keywords: []string{"cat"}}, "concatenate", true},
		{"frequency at least pass", "keywords:frequency", Kwargs{Keyword: sp("la"), Frequency: ip(3), Relation: sp("at least")}, "La la LA", true},
		{"frequency at least fail", "keywords:frequency", Kwargs{Keyword: sp("la"), Frequency: ip(4), Relation: sp("at least")}, "La la LA", false},
		{"frequency less than non-overlapping", "keywords:frequency", Kwargs{Keyword: sp("aa"), Frequency: ip(2), Relation: sp("less than")}, "aaa", true},
		{"forbidden pass", "keywords:forbidden_words", Kwargs{ForbiddenWords: []string{"cat"}}, "concatenate dogs", true},
		{"forbidden fail", "keywords:forbidden_words", Kwargs{ForbiddenWords: []string{"cat"}}, "a CAT.", false},
		{"forbidden unicode boundary", "keywords:forbidden_words", Kwargs{ForbiddenWords: []string{"caf"}}, "café", true},
		{"forbidden later occurrence", "keywords:forbidden_words", Kwargs{ForbiddenWords: []string{"cat"}}, "cats and a cat", false},
		{"letter pass", "keywords:letter_frequency", Kwargs{Letter: sp("z"), LetFrequency: ip(2), LetRelation: sp("at least")}, "Zebra zone", true},
		{"letter fail", "keywords:letter_frequency", Kwargs{Letter: sp("z"), LetFrequency: ip(2), LetRelation: sp("less than")}, "Zebra zone", false},
		{"letter capital kwarg", "keywords:letter_frequency", Kwargs{Letter: sp("Z"), LetFrequency: ip(2), LetRelation: sp("at least")}, "Zebra zone", true},
		{"letter not a letter: 26 of 26 letters pass, no '!' needed", "keywords:letter_frequency", Kwargs{Letter: sp("!"), LetFrequency: ip(1), LetRelation: sp("at least")}, "The quick brown fox jumps over the lazy dog", true},
		{"letter not a letter: 0 of 26 pass, many '!'", "keywords:letter_frequency", Kwargs{Letter: sp("!"), LetFrequency: ip(2), LetRelation: sp("at least")}, "Hi! Yes!!!", false},
		{"letter not a letter: 13 of 26 is not followed", "keywords:letter_frequency", Kwargs{Letter: sp("#"), LetFrequency: ip(1), LetRelation: sp("at least")}, "abcdefghijklm", false},
		{"letter not a letter: 14 of 26 is followed", "keywords:letter_frequency", Kwargs{Letter: sp("#"), LetFrequency: ip(1), LetRelation: sp("at least")}, "ABCDEFGHIJKLMN", true},
		{"letter not a letter: less than", "keywords:letter_frequency", Kwargs{Letter: sp("#"), LetFrequency: ip(1), LetRelation: sp("less than")}, "abc", true},
		{"letter two characters is drawn", "keywords:letter_frequency", Kwargs{Letter: sp(" a"), LetFrequency: ip(1), LetRelation: sp("at least")}, "aaaa", false},
		{"letter empty is drawn", "keywords:letter_frequency", Kwargs{Letter: sp(""), LetFrequency: ip(1), LetRelation: sp("less than")}, "aaaa", true},
		{"letter non-ASCII is drawn", "keywords:letter_frequency", Kwargs{Letter: sp("é"), LetFrequency: ip(1), LetRelation: sp("at least")}, "ééé", false},
		{"language pass", "language:response_language", Kwargs{Language: sp("de")}, "Das ist ein kurzer Text auf Deutsch, und er ist gut zu lesen.", true},
		{"language fail", "language:response_language", Kwargs{Language: sp("de")}, "This is a short English text, and it reads well enough.", false},
		{"language no letters is followed", "language:response_language", Kwargs{Language: sp("de")}, "1234 !!! https://example.com", true},
		{"language swahili", "language:response_language", Kwargs{Language: sp("sw")}, "Habari za leo? Mimi ni mwalimu wa shule na ninapenda kazi yangu sana.", true},
		{"language hindi", "language:response_language", Kwargs{Language: sp("hi")}, "भारत एक विशाल देश है और यहाँ अनेक भाषाएँ बोली जाती हैं।", true},
		{"sentences less than pass", "length_constraints:number_sentences", Kwargs{NumSentences: ip(3), Relation: sp("less than")}, "One here. Two there.", true},
		{"sentences at least fail", "length_constraints:number_sentences", Kwargs{NumSentences: ip(3), Relation: sp("at least")}, "One here. Two there.", false},
		{"sentences abbreviation", "length_constraints:number_sentences", Kwargs{NumSentences: ip(2), Relation: sp("less than")}, "Mr. Smith went to Washington.", true},
		{"paragraphs pass", "length_constraints:number_paragraphs", Kwargs{NumParagraphs: ip(2)}, "one\n***\ntwo", true},
		{"paragraphs fail inner empty", "length_constraints:number_paragraphs", Kwargs{NumParagraphs: ip(2)}, "one\n***\n***\ntwo", false},
		{"paragraphs empty ends allowed", "length_constraints:number_paragraphs", Kwargs{NumParagraphs: ip(1)}, "***\none\n***", true},
		{"words at least pass", "length_constraints:number_words", Kwargs{NumWords: ip(3), Relation: sp("at least")}, "snake_case and 42", true},
		{"words less than fail", "length_constraints:number_words", Kwargs{NumWords: ip(3), Relation: sp("less than")}, "don't stop now", false},
		{"words combining marks split", "length_constraints:number_words", Kwargs{NumWords: ip(2), Relation: sp("at least")}, "हिन्दी", true},
		{"nth paragraph pass", "length_constraints:nth_paragraph_first_word", Kwargs{NumParagraphs: ip(2), NthParagraph: ip(2), FirstWord: sp("Then")}, "First.\n\n\"Then, more.", true},
		{"nth paragraph wrong count", "length_constraints:nth_paragraph_first_word", Kwargs{NumParagraphs: ip(3), NthParagraph: ip(2), FirstWord: sp("then")}, "First.\n\nThen more.", false},
		{"placeholders pass", "detectable_content:number_placeholders", Kwargs{NumPlaceholders: ip(2)}, "[name] at [address]", true},
		{"placeholders fail", "detectable_content:number_placeholders", Kwargs{NumPlaceholders: ip(2)}, "[name] at [\naddress]", false},
		{"postscript pass", "detectable_content:postscript", Kwargs{PostscriptMarker: sp("P.S.")}, "Body.\n\np. s. bye", true},
		{"postscript fail", "detectable_content:postscript", Kwargs{PostscriptMarker: sp("P.P.S")}, "Body.\nP.S. bye", false},
		{"bullets pass", "detectable_format:number_bullet_lists", Kwargs{NumBullets: ip(2)}, "* one\n- two\n**bold**", true},
		{"bullets fail", "detectable_format:number_bullet_lists", Kwargs{NumBullets: ip(3)}, "* one\n- two", false},
		{"constrained pass", "detectable_format:constrained_response", Kwargs{}, "Well. My answer is maybe.", true},
		{"constrained fail", "detectable_format:constrained_response", Kwargs{}, "My answer is yes", false},
		{"highlights pass", "detectable_format:number_highlighted_sections", Kwargs{NumHighlights: ip(2)}, "*one* and **two**", true},
		{"highlights double is one", "detectable_format:number_highlighted_sections", Kwargs{NumHighlights: ip(2)}, "**bold**", false},
		{"highlights fail blank", "detectable_format:number_highlighted_sections", Kwargs{NumHighlights: ip(1)}, "* * and **  **", false},
		{"sections pass", "detectable_format:multiple_sections", Kwargs{SectionSpliter: sp("Section"), NumSections: ip(2)}, "Section 1\na\nSection 2\nb", true},
		{"sections fail", "detectable_format:multiple_sections", Kwargs{SectionSpliter: sp("SECTION"), NumSections: ip(2)}, "SECTION 1\na\nSection 2", false},
		{"json pass fenced", "detectable_format:json_format", Kwargs{}, "```json\n{\"a\": [1, 2.5e3, NaN]}\n```", true},
		{"json fail", "detectable_format:json_format", Kwargs{}, "{'a': 1}", false},
		{"json fail trailing", "detectable_format:json_format", Kwargs{}, "{} x", false},
		{"title pass", "detectable_format:title", Kwargs{}, "<<A Title>>\ntext", true},
		{"title fail blank", "detectable_format:title", Kwargs{}, "<<  >> <<\n>>", false},
		{"two responses pass", "combination:two_responses", Kwargs{}, "one\n******\ntwo", true},
		{"two responses fail same", "combination:two_responses", Kwargs{}, "one\n******\n one ", false},
		{"repeat pass", "combination:repeat_prompt", Kwargs{PromptToRepeat: sp("Say hi.")}, "  say HI. hi", true},
		{"repeat fail", "combination:repeat_prompt", Kwargs{PromptToRepeat: sp("Say hi.")}, "hi", false},
		{"end pass quoted", "startend:end_checker", Kwargs{EndPhrase: sp("Any other questions?")}, "\"ok. any other questions?\"\n", true},
		{"end fail", "startend:end_checker", Kwargs{EndPhrase: sp("Any other questions?")}, "Any other questions? Yes.", false},
		{"quotation pass", "startend:quotation", Kwargs{}, " \"quoted\" ", true},
		{"quotation fail single quote char", "startend:quotation", Kwargs{}, "\"", false},
		{"capital words pass clitics", "change_case:capital_word_frequency", Kwargs{CapitalFrequency: ip(3), CapitalRelation: sp("at least")}, "DON'T go, NASA", true},
		{"capital words fail", "change_case:capital_word_frequency", Kwargs{CapitalFrequency: ip(2), CapitalRelation: sp("less than")}, "AI,ML and NLP", false},
		{"english capital pass", "change_case:english_capital", Kwargs{}, "THIS IS A LETTER WRITTEN ENTIRELY IN CAPITAL LETTERS FOR YOU.", true},
		{"english capital fail", "change_case:english_capital", Kwargs{}, "THIS IS NEARLY ALL CAPITALS, but not quite.", false},
		{"english lowercase pass", "change_case:english_lowercase", Kwargs{}, "this is a short note written in lowercase letters for you.", true},
		{"english lowercase fail titlecase", "change_case:english_lowercase", Kwargs{}, "this has a titlecase ǅ letter in it, which is not lower.", false},
		{"no comma pass", "punctuation:no_comma", Kwargs{}, "no commas here，only a wide one", true},
		{"no comma fail", "punctuation:no_comma", Kwargs{}, "a, b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewChecker(tc.id, tc.k)
			if err != nil {
				t.Fatal(err)
			}
			if got := c(tc.resp); got != tc.want {
				t.Errorf("%s(%q) = %v, want %v", tc.id, tc.resp, got, tc.want)
			}
		})
	}
}

func TestCheckerErrors(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		k        Kwargs
		want     error
	}{
		{"unknown id", "keywords:key_sentences", Kwargs{}, ErrUnknownInstruction},
		{"missing relation", "length_constraints:number_words", Kwargs{NumWords: ip(3)}, ErrBadKwargs},
		{"bad relation", "length_constraints:number_words", Kwargs{NumWords: ip(3), Relation: sp("at most")}, ErrBadKwargs},
		{"nth outside", "length_constraints:nth_paragraph_first_word", Kwargs{NumParagraphs: ip(2), NthParagraph: ip(3), FirstWord: sp("a")}, ErrBadKwargs},
		{"negative", "detectable_content:number_placeholders", Kwargs{NumPlaceholders: ip(-1)}, ErrBadKwargs},
		{"letter missing", "keywords:letter_frequency", Kwargs{LetFrequency: ip(1), LetRelation: sp("at least")}, ErrBadKwargs},
		{"letter lowercases to two", "keywords:letter_frequency", Kwargs{Letter: sp("İ"), LetFrequency: ip(1), LetRelation: sp("at least")}, ErrBadKwargs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewChecker(tc.id, tc.k); !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestPyText(t *testing.T) {
	for _, tc := range []struct {
		s            string
		upper, lower bool
		words        int
	}{
		{"", false, false, 0},
		{"123 !", false, false, 1},
		{"ABC 1", true, false, 2},
		{"abc ß", false, true, 2},
		{"Ǆ", true, false, 1},  // U+01C4 is Lu
		{"ǅ", false, false, 1}, // U+01C5 is Lt: neither
		{"ⅰ", false, true, 1},  // U+2170 small roman numeral one: Other_Lowercase, Nl
	} {
		if got := pyIsUpper(tc.s); got != tc.upper {
			t.Errorf("isupper(%q) = %v", tc.s, got)
		}
		if got := pyIsLower(tc.s); got != tc.lower {
			t.Errorf("islower(%q) = %v", tc.s, got)
		}
		if got := pyCountWords(tc.s); got != tc.words {
			t.Errorf("count_words(%q) = %d, want %d", tc.s, got, tc.words)
		}
	}
	if got := pyLower("ΟΔΟΣ İ"); got != "οδος i̇" {
		t.Errorf("lower = %q", got)
	}
	if got := pyStrip("\x1c\u00a0 a \u3000"); got != "a" {
		t.Errorf("strip = %q", got)
	}
}

func TestVariants(t *testing.T) {
	v := Variants("Sure!\n*body*\nBye")
	want := [8]string{"Sure!\n*body*\nBye", "Sure!\nbody\nBye", "*body*\nBye", "Sure!\n*body*", "*body*", "body\nBye", "Sure!\nbody", "body"}
	if v != want {
		t.Errorf("Variants = %q", v)
	}
	if v := Variants("one"); v[2] != "" || v[4] != "" {
		t.Errorf("one line: %q", v)
	}
}
