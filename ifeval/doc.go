// Package ifeval scores responses to IFEval, the instruction-following
// benchmark of Zhou et al. (arXiv:2311.07911), as the Python reference
// (google-research instruction_following_eval) scores them.
//
// The model: an input (input_data.jsonl, embedded; 541 prompts) is a prompt
// with a list of verifiable instructions, each an instruction id of the
// reference registry ("keywords:existence", ...; 25 ids in 9 categories)
// and its kwargs. A Checker is a pure function of a response. A response is
// scored strictly (the response as is) and loosely (followed if any of the
// reference's eight variants passes, see Variants). Four accuracies come
// out: prompt-level (all of a prompt's instructions followed) and
// instruction-level, each strict and loose, with per-category and
// per-instruction breakdowns.
//
// Where the reference calls Python libraries (NLTK Punkt and word_tokenize,
// langdetect, str methods, the re module, json), this package matches their
// semantics in Go or approximates them; Rules lists every such rule under a
// version string ("ifeval-go-v2"), and reference_test.go measures the
// agreement with a reference run on the GPT-4 responses of the IFEval
// release (538/540 prompts strict, 540/540 loose). langdetect is
// reimplemented on its own profiles (data/langdetect) and checked against
// langdetect itself (langdetect_test.go). Known weak spots: the reference
// is unseeded where it draws at random (langdetect's sampling, the letter
// of letter_frequency when the kwarg is not a letter), so on short texts
// and those two prompts a fixed rule can only pick the reference's likelier
// answer; and Punkt is a port, not NLTK.
//
// The package imports nothing of the module.
package ifeval
