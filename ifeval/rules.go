package ifeval

// RuleSet names this scorer's version and states, one line each, where it
// departs from or stands in for the Python reference, so that a contract can
// cite them.
type RuleSet struct {
	Version string            `json:"version"`
	Rules   map[string]string `json:"rules"`
}

// Rules are the rules of this scorer. Changing any verdict-affecting rule
// must change Version.
var Rules = RuleSet{
	Version: "ifeval-go-v2",
	Rules: map[string]string{
		"loose_variants":    "followed loosely if any of 8 variants passes: the response; '*' removed; first line removed; last line removed; both; and those three with '*' removed (lines split at \\n, removed-line variants stripped); blank variants never pass",
		"blank_response":    "a response that is blank after Python str.strip() follows no instruction",
		"sentence_split":    "number_sentences counts sentences with github.com/neurosnap/sentences (a Go port of NLTK Punkt) and its English parameters, base tokenizer without the port's english-package annotations",
		"word_tokenize":     "capital_word_frequency tokenizes with an approximation of nltk.word_tokenize: Treebank padding of , : ; @ # $ % & ? ! * brackets -- ... and double quotes, clitic and contraction splits, then whitespace split; tokens counted if Python str.isupper",
		"word_count":        "number_words counts maximal runs of Python's Unicode \\w: letters (L*), numbers (Nd, Nl, No) and '_'; combining marks end a word, as in Python",
		"language":          "langdetect 1.0.9 reimplemented (its algorithm, its 55 profiles and normalisation tables embedded byte for byte) with DetectorFactory.seed = 0, drawn as CPython 3.11's random.Random(0) draws (the reference leaves the seed unset); languages in profile file-name order; URLs and e-mails removed first; no n-gram feature = detection error = followed",
		"case":              "english_capital / english_lowercase use Python str.isupper / str.islower: at least one cased character, none lowercase (uppercase) or titlecase; the language is detected only if the case test passes",
		"lower":             "lowercasing is Python str.lower (full Unicode, final sigma), via golang.org/x/text/cases",
		"regex":             "patterns of the reference and from kwargs run on RE2 with Python's Unicode \\s and \\d; forbidden_words' \\b is Python's Unicode word boundary; a kwargs pattern RE2 cannot compile is matched literally",
		"json":              "json_format accepts what Python json.loads accepts, NaN, Infinity and -Infinity included; nesting deeper than 1000 is not followed",
		"letter_not_letter": "letter_frequency with a letter kwarg the reference does not keep (not one character whose lowercase is a..z: keys 1122 '#', 1129 '!'), where it draws a random letter a..z, is followed when the relation holds for more than 13 of the 26 letters: the reference's likelier verdict (loose: the rule per variant, ORed); a letter lowercasing to two characters is an error",
		"bad_kwargs":        "a missing or invalid kwarg, where the reference would draw a random value, is an error, not a verdict",
	},
}
