package ifeval

import (
	"regexp"
	"strings"
	"sync"

	"github.com/neurosnap/sentences"
	"github.com/neurosnap/sentences/data"
)

// Sentence counting (length_constraints:number_sentences) uses
// github.com/neurosnap/sentences, a Go port of NLTK's Punkt sentence
// tokenizer, with the English parameters it ships (trained like NLTK's
// tokenizers/punkt/english.pickle, which the reference loads). The port's
// base tokenizer is used, not its english package, whose extra annotations
// (multi-period abbreviations, added abbreviations "sgt", "gov", "no")
// NLTK does not make. The port is not byte-identical to NLTK: the
// agreement on the GPT-4 responses is measured in reference_test.go.
var punkt = sync.OnceValue(func() *sentences.DefaultSentenceTokenizer {
	b, err := data.Asset("data/english.json")
	if err != nil {
		panic("ifeval: neurosnap/sentences english.json: " + err.Error())
	}
	training, err := sentences.LoadTraining(b)
	if err != nil {
		panic("ifeval: neurosnap/sentences english.json: " + err.Error())
	}
	return sentences.NewSentenceTokenizer(training)
})

var punktMu sync.Mutex

// countSentences is len(PunktSentenceTokenizer.tokenize(text)).
func countSentences(text string) int {
	punktMu.Lock() // the port keeps no per-call state, but is not documented as safe for concurrent use
	defer punktMu.Unlock()
	n := 0
	for _, s := range punkt().Tokenize(text) {
		if pyStrip(s.Text) != "" {
			n++
		}
	}
	return n
}

// wordTokenize approximates nltk.word_tokenize (Punkt sentences, then the
// NLTK Treebank word tokenizer) for the one use the reference makes of it:
// counting tokens that are str.isupper. It applies the Treebank rules that
// can change that count — padding , and : (not before a digit), ; @ # $ % &
// ? ! * brackets, "--", "...", and double quotes; splitting the clitics 's 'm
// 'd 'll 're 've n't (either case) and a trailing '; splitting cannot, gimme,
// gonna, gotta, lemme, wanna, 'tis, 'twas — and then splits on whitespace.
// It skips the rules that cannot (the sentence-final period, quote
// rewriting to “ and ”), and the Punkt pass, whose only effect on tokens
// is where a sentence-final period is split off.
func wordTokenize(text string) []string {
	t := " " + text + " "
	for _, r := range treebankRules {
		t = r.re.ReplaceAllString(t, r.repl)
	}
	return pyFields(t)
}

type rewrite struct {
	re   *regexp.Regexp
	repl string
}

var treebankRules = []rewrite{
	{regexp.MustCompile(`"`), ` " `},
	{regexp.MustCompile(`([:,])([^\p{Nd}])`), ` $1 $2`},
	{regexp.MustCompile(`([:,])$`), ` $1 `},
	{regexp.MustCompile(`\.{2,}`), ` $0 `},
	{regexp.MustCompile(`[;@#$%&?!*]`), ` $0 `},
	{regexp.MustCompile(`([^'])' `), `$1 ' `},
	{regexp.MustCompile(`[\]\[(){}<>]`), ` $0 `},
	{regexp.MustCompile(`--`), ` -- `},
	{regexp.MustCompile(`([^' ])('[sS]|'[mM]|'[dD]|') `), `$1 $2 `},
	{regexp.MustCompile(`([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) `), `$1 $2 `},
	{regexp.MustCompile(`(?i)\b(can)(not)\b`), ` $1 $2 `},
	{regexp.MustCompile(`(?i)\b(d)('ye)\b`), ` $1 $2 `},
	{regexp.MustCompile(`(?i)\b(gim|lem)(me)\b`), ` $1 $2 `},
	{regexp.MustCompile(`(?i)\b(gon|wan)(na)\b`), ` $1 $2 `},
	{regexp.MustCompile(`(?i)\b(got)(ta)\b`), ` $1 $2 `},
	{regexp.MustCompile(`(?i)\b(more)('n)\b`), ` $1 $2 `},
	{regexp.MustCompile(`(?i) ('t)(is|was)\b`), ` $1 $2 `},
}

// splitLines is Python's str.split("\n").
func splitLines(s string) []string { return strings.Split(s, "\n") }
