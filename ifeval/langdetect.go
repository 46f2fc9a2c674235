package ifeval

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/abadojack/whatlanggo"
)

// Language detection (language:response_language, change_case:english_capital,
// change_case:english_lowercase) stands in for the Python langdetect
// package, which the reference calls unseeded. The rules:
//
//   - Like langdetect, URLs and e-mail addresses are removed first.
//   - A text with no letter left is a detection error (langdetect raises
//     "No features in text"); the reference counts an error as followed.
//   - Otherwise github.com/abadojack/whatlanggo (trigram profiles, a port of
//     whatlang) picks among the languages langdetect also knows, and its
//     answer is mapped to langdetect's codes (ISO 639-1; zh-cn; fa for pes;
//     no for nob and nno).
//   - whatlanggo has no Swahili, which langdetect has and two IFEval prompts
//     ask for: a Latin-script text of which at least 20% of the words are
//     Swahili function words is detected as "sw".
//
// langdetect ignores the n-grams inside all-capital words, so on an
// all-capitals text it sees little more than word initials; whatlanggo
// lowercases nothing either but keeps every trigram. The two detectors can
// therefore part on short or all-capital texts: on the GPT-4 responses they
// part on three (keys 279, 3456, 3617; see testdata/gpt4_disagreements.golden).
// A fallback "an unreliable Latin-script text is English" was tried and
// dropped: it fixed two and broke four (the reference calls "YES", "A",
// "etchings" not English).
func detectLanguage(text string) (code string, ok bool) {
	text = reURL.ReplaceAllString(text, " ")
	text = reMail.ReplaceAllString(text, " ")
	if strings.IndexFunc(text, unicode.IsLetter) < 0 {
		return "", false
	}
	if looksSwahili(text) {
		return "sw", true
	}
	l := whatlanggo.DetectLangWithOptions(text, whatlanggo.Options{Whitelist: detectable})
	return langdetectCode[l], true
}

var (
	reURL  = regexp.MustCompile(`https?://[-_.?&~;+=/#0-9A-Za-z]+`) // langdetect bounds it at 2076 characters; RE2 at 1000
	reMail = regexp.MustCompile(`[-_.0-9A-Za-z]{1,64}@[-_0-9A-Za-z]{1,255}[-_.0-9A-Za-z]{1,255}`)
)

// langdetectCode maps whatlanggo's languages that langdetect also detects
// to langdetect's codes.
var langdetectCode = map[whatlanggo.Lang]string{
	whatlanggo.Afr: "af", whatlanggo.Arb: "ar", whatlanggo.Bul: "bg", whatlanggo.Ben: "bn",
	whatlanggo.Ces: "cs", whatlanggo.Dan: "da", whatlanggo.Deu: "de", whatlanggo.Ell: "el",
	whatlanggo.Eng: "en", whatlanggo.Spa: "es", whatlanggo.Est: "et", whatlanggo.Pes: "fa",
	whatlanggo.Fin: "fi", whatlanggo.Fra: "fr", whatlanggo.Guj: "gu", whatlanggo.Heb: "he",
	whatlanggo.Hin: "hi", whatlanggo.Hrv: "hr", whatlanggo.Hun: "hu", whatlanggo.Ind: "id",
	whatlanggo.Ita: "it", whatlanggo.Jpn: "ja", whatlanggo.Kan: "kn", whatlanggo.Kor: "ko",
	whatlanggo.Lit: "lt", whatlanggo.Lav: "lv", whatlanggo.Mkd: "mk", whatlanggo.Mal: "ml",
	whatlanggo.Mar: "mr", whatlanggo.Nep: "ne", whatlanggo.Nld: "nl", whatlanggo.Nob: "no",
	whatlanggo.Nno: "no", whatlanggo.Pan: "pa", whatlanggo.Pol: "pl", whatlanggo.Por: "pt",
	whatlanggo.Ron: "ro", whatlanggo.Rus: "ru", whatlanggo.Slv: "sl", whatlanggo.Som: "so",
	whatlanggo.Swe: "sv", whatlanggo.Tam: "ta", whatlanggo.Tel: "te", whatlanggo.Tha: "th",
	whatlanggo.Tgl: "tl", whatlanggo.Tur: "tr", whatlanggo.Ukr: "uk", whatlanggo.Urd: "ur",
	whatlanggo.Vie: "vi", whatlanggo.Cmn: "zh-cn",
}

var detectable = func() map[whatlanggo.Lang]bool {
	m := make(map[whatlanggo.Lang]bool, len(langdetectCode))
	for l := range langdetectCode {
		m[l] = true
	}
	return m
}()

// swahiliWords are frequent Swahili function words, none of them an
// English word.
var swahiliWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`na ya wa kwa ni za la cha vya katika kuwa hii hiyo huo yake wake
		pia lakini au kama sana kwamba watu mimi wewe yeye sisi ninyi wao hapa ndani juu bila zaidi
		baada kabla ili hivyo tu hata ambayo ambao ambaye hizi hayo haya wakati kila moja mbili
		kubwa nzuri habari jambo asante sasa leo kesho jana pamoja kutoka hadi mpaka ndiyo hapana`) {
		swahiliWords[w] = true
	}
}

func looksSwahili(text string) bool {
	words := strings.FieldsFunc(pyLower(text), func(r rune) bool { return !unicode.IsLetter(r) })
	if len(words) == 0 {
		return false
	}
	hits := 0
	for _, w := range words {
		for _, r := range w {
			if !unicode.Is(unicode.Latin, r) {
				return false
			}
		}
		if swahiliWords[w] {
			hits++
		}
	}
	return hits*5 >= len(words)
}
