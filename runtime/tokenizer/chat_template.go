package tokenizer

// Chat templates: the prompt format of an instruction-tuned checkpoint.
//
// A Hugging Face checkpoint carries its prompt format as a Jinja2 template
// (tokenizer_config.json "chat_template", or a chat_template.jinja file).
// transformers renders it with apply_chat_template(tokenize=False); Render
// renders the same template the same way, so that a campaign feeds the engine
// exactly the string transformers would feed the model. A checkpoint without a
// template has no prompt format: LoadChatTemplate returns (nil, nil) and the
// caller uses the raw prompt and declares that it did.
//
// # What transformers does, and what Render mirrors
//
// transformers compiles the template in jinja2's ImmutableSandboxedEnvironment
// with trim_blocks=True (the first newline after a block tag or comment is
// dropped) and lstrip_blocks=True (spaces and tabs before a block tag on its
// line are dropped), the loopcontrols extension ({% break %}, {% continue %})
// and its own {% generation %} tag, and renders it with:
//
//	messages               the conversation: a list of {"role", "content"} dicts
//	add_generation_prompt  bool
//	tools, documents       None (Render leaves them undefined, see below)
//	bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
//	mask_token             the special tokens that are set, as strings
//	raise_exception(msg)   global: rendering fails with msg
//	strftime_now(fmt)      global: datetime.now().strftime(fmt)
//	tojson                 filter: json.dumps(x, ensure_ascii=False, indent=None,
//	                       separators=None, sort_keys=False)
//
// Render uses github.com/nikolalohinski/gonja/v2 configured the same way
// (TrimBlocks, LeftStripBlocks, no autoescape, one trailing newline of the
// template dropped as jinja2's keep_trailing_newline=False does). The loader
// holds only the template, as jinja2's from_string has none, so {% include %}
// and {% import %} fail instead of reading files.
//
// # gonja against jinja2: what is worked around
//
// Found by rendering the same templates and probes with both (the cases under
// testdata/chat keep the ones that matter checked):
//
//   - tojson: gonja's is encoding/json with "'" escaped and no separators or
//     sort_keys; it is replaced by a json.dumps reimplementation.
//   - raise_exception, strftime_now and {% generation %} do not exist in
//     gonja; they are added. {% do %} and {% trans %} exist in gonja but not
//     in transformers' environment; they are parse errors here too.
//   - String literals: gonja decodes escapes with Go's rules (\s or
//     \<newline> are syntax errors, \0 needs three digits) and takes the
//     quote after an escaped backslash ('a\\') for escaped. Each literal is
//     rewritten before parsing into a form gonja reads as the string jinja2
//     reads (canonicalLiterals); Source and SHA256 keep the original text.
//   - x[-len(x)] (messages[-1] of a one-message conversation,
//     s.split(sep)[-1] when sep does not occur) finds nothing in gonja. The
//     messages variable, the results of split, rsplit and splitlines, and of
//     the list filters (list, select, map, sort, ...) are lists with a correct
//     lookup (pyList).
//   - str.replace requires gonja's count argument; str.split() splits on " "
//     instead of on runs of whitespace; |reverse sorts a list before reversing
//     it. All three are replaced.
//   - gonja can panic on input it does not expect; parse and render recover
//     into errors.
//
// # What is not worked around
//
//   - gonja has no Undefined distinct from None: a missing variable is none,
//     "x is defined" is false for a variable that is none, "undefined is
//     none" is true (false in jinja2), and {{ none }} prints "" ("None" in
//     jinja2). Render passes no none-valued variable: tools and documents,
//     None in transformers, are left undefined, and null special tokens are
//     left out as transformers leaves them out. The difference then shows
//     only in a template that tests "tools is defined" without testing the
//     value, or prints none.
//   - gonja is lenient where jinja2 raises: "a" + 1 concatenates, an
//     undefined value |tojson is null, an unknown filter fails when it is
//     reached rather than at parse time.
//   - Python's "%" string formatting, dictsort on a dict literal and
//     whitespace control inside {% raw %} are not supported; 2 ** 3 is 8.0;
//     dict.items() and "for k, v in dict" run in key order, not insertion
//     order; s[i] indexes bytes, not characters; lists built by the template
//     itself ([...] literals, +) keep gonja's x[-len(x)] miss.
//   - Error texts are gonja's, not jinja2's; raise_exception's message is
//     verbatim (*TemplateError).
//
// Special tokens come from tokenizer_config.json only (strings, AddedToken
// objects or null). transformers also fills tokens the config does not name
// from the tokenizer class's defaults (GPTNeoXTokenizerFast defaults unk_token
// to "<|endoftext|>", for example), for configs without added_tokens_decoder
// from special_tokens_map.json, and passes additional_special_tokens as a
// list; a template that uses such a token renders it empty here.
//
// # Where the template comes from
//
// LoadChatTemplate follows transformers' tokenizer loader (4.47 and later):
// chat_template.jinja (named "default") and additional_chat_templates/*.jinja
// (named by file stem), when any exist, replace the chat_template of
// tokenizer_config.json; otherwise that key is used, a string or a list of
// {"name", "template"} of which "default" is taken. chat_template.json is a
// processor's legacy file (ProcessorMixin reads it, AutoTokenizer does not):
// it is used only when the tokenizer has no template, and Origin says so.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// Message is one turn of a conversation. Role is "system", "user",
// "assistant" or whatever else the template accepts.
type Message struct {
	Role, Content string
}

// ChatTemplate is a parsed chat template with the special tokens it is
// rendered with. It is safe for concurrent use.
type ChatTemplate struct {
	source  string            // the Jinja2 text, byte for byte as stored
	origin  string            // where source came from (file and key), "" from ParseChatTemplate
	special map[string]string // special-token variables: "bos_token" -> "<s>", ...
	tmpl    *exec.Template
	now     func() time.Time // strftime_now's clock; time.Now outside tests
}

// File names in a checkpoint directory, as transformers spells them.
const (
	tokenizerConfigFile     = "tokenizer_config.json"
	chatTemplateFile        = "chat_template.jinja"
	chatTemplateDir         = "additional_chat_templates"
	processorChatTemplateFS = "chat_template.json"
)

// specialTokenKeys are the special-token attributes transformers passes to
// the template (SPECIAL_TOKENS_ATTRIBUTES less additional_special_tokens).
var specialTokenKeys = []string{
	"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
}

// TemplateError is the error of a template that called raise_exception.
// Message is the argument, verbatim.
type TemplateError struct {
	Message string
}

func (e *TemplateError) Error() string { return "raise_exception: " + e.Message }

// LoadChatTemplate reads the chat template and special tokens of the
// checkpoint directory dir (see the file comment for the precedence of
// chat_template.jinja, tokenizer_config.json and chat_template.json). It
// returns (nil, nil) when dir has no template: the caller then uses the raw
// prompt and must declare that it did.
func LoadChatTemplate(dir string) (*ChatTemplate, error) {
	special := map[string]string{}
	var configTemplate json.RawMessage
	path := filepath.Join(dir, tokenizerConfigFile)
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("chat template: %w", err)
	default:
		var cfg map[string]json.RawMessage
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, fmt.Errorf("chat template: %s: %w", path, err)
		}
		for _, key := range specialTokenKeys {
			tok, ok, err := specialToken(cfg[key])
			if err != nil {
				return nil, fmt.Errorf("chat template: %s: %s: %w", path, key, err)
			}
			if ok {
				special[key] = tok
			}
		}
		configTemplate = cfg["chat_template"]
	}

	src, origin, err := templateFiles(dir)
	if err != nil {
		return nil, err
	}
	if origin == "" && len(configTemplate) > 0 && string(configTemplate) != "null" {
		src, origin, err = selectTemplate(configTemplate, tokenizerConfigFile+" chat_template")
		if err != nil {
			return nil, fmt.Errorf("chat template: %s: %w", path, err)
		}
	}
	if origin == "" {
		src, origin, err = processorTemplate(dir)
		if err != nil {
			return nil, err
		}
	}
	if origin == "" {
		return nil, nil
	}
	t, err := parseChatTemplate(src, special)
	if err != nil {
		return nil, fmt.Errorf("chat template: %s: %w", filepath.Join(dir, strings.Fields(origin)[0]), err)
	}
	t.origin = origin
	return t, nil
}

// templateFiles reads chat_template.jinja and additional_chat_templates/*.jinja.
// origin is "" when neither exists.
func templateFiles(dir string) (src, origin string, err error) {
	named := map[string]string{}
	extra, err := filepath.Glob(filepath.Join(dir, chatTemplateDir, "*.jinja"))
	if err != nil {
		return "", "", fmt.Errorf("chat template: %w", err)
	}
	for _, p := range extra {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", "", fmt.Errorf("chat template: %w", err)
		}
		named[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(b)
	}
	b, err := os.ReadFile(filepath.Join(dir, chatTemplateFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", "", fmt.Errorf("chat template: %w", err)
	default:
		named["default"] = string(b)
	}
	if len(named) == 0 {
		return "", "", nil
	}
	src, ok := named["default"]
	if !ok {
		return "", "", fmt.Errorf("chat template: %s: %w", filepath.Join(dir, chatTemplateDir), noDefault(named))
	}
	if len(named) == 1 {
		return src, chatTemplateFile, nil
	}
	return src, chatTemplateFile + " (default of " + strings.Join(sortedKeys(named), ", ") + ")", nil
}

// processorTemplate reads chat_template.json ({"chat_template": ...}).
func processorTemplate(dir string) (src, origin string, err error) {
	path := filepath.Join(dir, processorChatTemplateFS)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("chat template: %w", err)
	}
	var doc struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", "", fmt.Errorf("chat template: %s: %w", path, err)
	}
	if len(doc.ChatTemplate) == 0 || string(doc.ChatTemplate) == "null" {
		return "", "", fmt.Errorf("chat template: %s: no chat_template key", path)
	}
	src, origin, err = selectTemplate(doc.ChatTemplate, processorChatTemplateFS+" chat_template")
	if err != nil {
		return "", "", fmt.Errorf("chat template: %s: %w", path, err)
	}
	return src, origin, nil
}

// selectTemplate decodes a chat_template value: a string, or a list of
// {"name", "template"} objects (or a {name: template} object) of which the
// one named "default" is used.
func selectTemplate(raw json.RawMessage, origin string) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, origin, nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	named := map[string]string{}
	if err := json.Unmarshal(raw, &list); err == nil {
		for i, e := range list {
			if e.Name == nil || e.Template == nil {
				return "", "", fmt.Errorf(`chat_template[%d] lacks "name" or "template"`, i)
			}
			named[*e.Name] = *e.Template // a repeated name: the last one wins, as in transformers' dict
		}
	} else if err := json.Unmarshal(raw, &named); err != nil {
		// transformers also takes a {name: template} object, though it
		// saves the list form.
		return "", "", errors.New(`chat_template is neither a string nor a list of {"name", "template"} objects`)
	}
	src, ok := named["default"]
	if !ok {
		return "", "", noDefault(named)
	}
	return src, origin + ` (name "default" of ` + strings.Join(sortedKeys(named), ", ") + ")", nil
}

func noDefault(named map[string]string) error {
	return fmt.Errorf(`no template is named "default" (available: %s); the checkpoint must name the one to use "default"`, strings.Join(sortedKeys(named), ", "))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// specialToken decodes a special-token value: a string, an AddedToken object
// ({"content": ..., "lstrip": ..., ...}, with or without "__type"), or null.
func specialToken(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", false, errors.New(`want a string, an AddedToken object with "content", or null`)
	}
	return *obj.Content, true, nil
}

// ParseChatTemplate parses the Jinja2 text src. special maps variable names
// ("bos_token", "eos_token", ...) to the token strings the template sees; it
// is copied.
func ParseChatTemplate(src string, special map[string]string) (*ChatTemplate, error) {
	t, err := parseChatTemplate(src, special)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return t, nil
}

// parseChatTemplate is ParseChatTemplate with errors that start "parse: ".
func parseChatTemplate(src string, special map[string]string) (*ChatTemplate, error) {
	env := chatEnvironment()
	canon, err := canonicalLiterals(src)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	const name = "/chat_template.jinja"
	loader, err := loaders.NewMemoryLoader(map[string]string{name: canon})
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	cfg.AutoEscape = false
	cfg.KeepTrailingNewline = false
	tmpl, err := parseGuarded(name, cfg, loader, env)
	if err != nil {
		return nil, fmt.Errorf("parse: %s", oneLine(parseCause(err)))
	}
	sp := make(map[string]string, len(special))
	for k, v := range special {
		sp[k] = v
	}
	return &ChatTemplate{source: src, special: sp, tmpl: tmpl, now: time.Now}, nil
}

// parseGuarded runs gonja's parser, turning a panic on malformed input into
// an error.
func parseGuarded(name string, cfg *config.Config, loader loaders.Loader, env *exec.Environment) (t *exec.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return exec.NewTemplate(name, cfg, loader, env)
}

// parseCause strips gonja's wrapper, whose message repeats the whole template
// source, keeping the syntax error (message, line, column).
func parseCause(err error) error {
	var syn *parser.SyntaxError
	if errors.As(err, &syn) {
		return syn
	}
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}

// oneLine makes an error message printable on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", `\n`)), " ")
}

// Source returns the template text, byte for byte.
func (t *ChatTemplate) Source() string { return t.source }

// SHA256 returns the hex SHA-256 of the template text (what an edition
// records to identify the prompt format).
func (t *ChatTemplate) SHA256() string {
	sum := sha256.Sum256([]byte(t.source))
	return hex.EncodeToString(sum[:])
}

// Origin says where LoadChatTemplate found the template, e.g.
// `tokenizer_config.json chat_template` or `chat_template.jinja`; it is ""
// for a template from ParseChatTemplate.
func (t *ChatTemplate) Origin() string { return t.origin }

// SpecialTokens returns a copy of the special-token variables.
func (t *ChatTemplate) SpecialTokens() map[string]string {
	sp := make(map[string]string, len(t.special))
	for k, v := range t.special {
		sp[k] = v
	}
	return sp
}

// Render renders the conversation msgs as transformers'
// apply_chat_template(msgs, tokenize=False, add_generation_prompt=...) does.
// A template that calls raise_exception fails with a *TemplateError.
func (t *ChatTemplate) Render(msgs []Message, addGenerationPrompt bool) (out string, err error) {
	var raised *TemplateError
	data := make(map[string]any, len(t.special)+4)
	for k, v := range t.special {
		data[k] = v
	}
	for k, v := range map[string]any{
		"messages":              messageValues(msgs),
		"add_generation_prompt": addGenerationPrompt,
		"raise_exception": func(args *exec.VarArgs) (any, error) {
			msg := ""
			if len(args.Args) > 0 {
				msg = args.Args[0].String()
			}
			if raised == nil {
				raised = &TemplateError{Message: msg}
			}
			return nil, raised
		},
		"strftime_now": func(args *exec.VarArgs) (any, error) {
			if len(args.Args) != 1 || !args.Args[0].IsString() {
				return nil, errors.New("strftime_now takes one string argument")
			}
			return strftime(t.now(), args.Args[0].String()), nil
		},
	} {
		data[k] = v
	}
	defer func() {
		// gonja's evaluator can panic on input it does not expect; a chat
		// template is data, so that is a rendering error, not a crash.
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat template: render: %s", oneLine(fmt.Errorf("%v", r)))
		}
	}()
	out, err = t.tmpl.ExecuteToString(exec.NewContext(data))
	if raised != nil {
		// jinja2 aborts at raise_exception; gonja may carry on past an error
		// value in some positions, so the flag, not err, decides.
		return "", fmt.Errorf("chat template: %w", raised)
	}
	if err != nil {
		return "", fmt.Errorf("chat template: render: %s", oneLine(err))
	}
	return out, nil
}

// messageValues turns msgs into the list of dicts the template iterates.
// Each is an ordered gonja Dict with keys role then content, so that
// message|tojson and message.items() list them in the order a Python caller's
// {"role": ..., "content": ...} literal has.
func messageValues(msgs []Message) pyList {
	out := make(pyList, len(msgs))
	for i, m := range msgs {
		out[i] = &exec.Dict{Pairs: []*exec.Pair{
			{Key: exec.AsValue("role"), Value: exec.AsValue(m.Role)},
			{Key: exec.AsValue("content"), Value: exec.AsValue(m.Content)},
		}}
	}
	return out
}

var (
	envOnce sync.Once
	env     *exec.Environment
)

// chatEnvironment is gonja's default environment adjusted to transformers':
// tojson and reverse replaced, str.replace and str.split fixed, a generation
// tag added, do and trans removed. It is
// built once and only read afterwards.
func chatEnvironment() *exec.Environment {
	envOnce.Do(func() {
		filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
		for _, name := range listFilters {
			if f, ok := filters.Get(name); ok {
				if err := filters.Replace(name, pyListFilter(f)); err != nil {
					panic(err)
				}
			}
		}
		for name, f := range map[string]exec.FilterFunction{"tojson": filterToJSON, "reverse": filterReverse} {
			if err := filters.Replace(name, f); err != nil {
				panic(err) // gonja has both
			}
		}
		structures := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(builtins.ControlStructures)
		structures = withoutStructures(structures, "do", "trans")
		if err := structures.Register("generation", generationParser); err != nil {
			panic(err)
		}
		env = &exec.Environment{
			Context:           exec.EmptyContext().Update(builtins.GlobalFunctions),
			Filters:           filters,
			Tests:             exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests),
			ControlStructures: structures,
			Methods:           chatMethods(),
		}
	})
	return env
}
