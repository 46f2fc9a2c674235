package tokenizer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// update rewrites the golden files and the case manifest under
// testdata/chat: go test ./runtime/tokenizer/ -run TestChatTemplate -update
var update = flag.Bool("update", false, "rewrite golden files under testdata/chat")

const chatTestdata = "testdata/chat"

// chatConversations are the conversations the golden cases render, by name.
// cases.json carries them to scripts/chat_template_hf.py.
var chatConversations = map[string][]Message{
	"single": {
		{"user", "Write a limerick about a lighthouse keeper. Do not use any commas in your response."},
	},
	"system-user": {
		{"system", "You are a careful assistant."},
		{"user", "List three prime numbers.\nAnswer in JSON."},
	},
	"multi-turn": {
		{"user", "Hello"},
		{"assistant", "Hi! How can I help?"},
		{"user", "Name a colour."},
	},
	"bad-order": {
		{"user", "First question"},
		{"user", "Second question"},
	},
	// Content is data: leading and trailing whitespace, quotes, backslashes,
	// Jinja delimiters and non-ASCII text must come out verbatim.
	"awkward": {
		{"user", "  leading spaces, a tab\tand quotes \" ' \\ {{ not_a_variable }} {% raw %} 東京 🚀\n\ntrailing newline\n"},
	},
}

// chatCase is one rendering of a template under testdata/chat.
//
// Exactly one of fixture (a checkpoint-like directory read by
// LoadChatTemplate) and template (Jinja text given to ParseChatTemplate with
// special) is set. The expected result is golden/<name>.txt for fixture
// cases and want for template cases; err, when set, is a substring the
// error must contain instead, at stage "load" (LoadChatTemplate) or
// "render". hfErr is the substring scripts/chat_template_hf.py expects in
// transformers' exception ("" when any exception will do).
type chatCase struct {
	name     string
	fixture  string
	template string
	special  map[string]string
	conv     string
	gen      bool
	want     string
	err      string
	stage    string
	hfErr    string
	absent   bool // the fixture has no template: LoadChatTemplate gives (nil, nil)
}

// How the expected strings were derived. Every golden file was written by
// -update and then checked, byte for byte, against jinja2 3.1.6 run with
// transformers' settings (scripts/chat_template_hf.py --jinja2); on a machine
// with transformers, scripts/chat_template_hf.py checks them against
// apply_chat_template itself. The whitespace reasoning behind each template
// is in the comment above its rows; TestChatTemplateHandDerived pins the
// IFEval-shaped cases (one user message, generation prompt) to strings
// written out by hand from that reasoning.
var chatCases = []chatCase{
	// allenai/OLMoE-1B-7B-0924-Instruct. Every block tag ({% for %},
	// {% if %}, {% elif %}, {% endif %}, {% endfor %}) ends its line, so
	// trim_blocks drops each of those newlines; the newline after each
	// {{ ... }} is not a block tag's and is output. A turn is therefore
	// "<|user|>\n" + content + "\n" (system likewise; assistant adds
	// eos_token before the "\n"), after bos_token ("<|endoftext|>") once,
	// and the generation prompt after the last turn is "<|assistant|>\n".
	{name: "olmoe-single-gen", fixture: "olmoe-1b-7b-0924-instruct", conv: "single", gen: true},
	{name: "olmoe-single-nogen", fixture: "olmoe-1b-7b-0924-instruct", conv: "single"},
	{name: "olmoe-system-user-gen", fixture: "olmoe-1b-7b-0924-instruct", conv: "system-user", gen: true},
	{name: "olmoe-multi-turn-gen", fixture: "olmoe-1b-7b-0924-instruct", conv: "multi-turn", gen: true},
	{name: "olmoe-multi-turn-nogen", fixture: "olmoe-1b-7b-0924-instruct", conv: "multi-turn"},
	{name: "olmoe-awkward-gen", fixture: "olmoe-1b-7b-0924-instruct", conv: "awkward", gen: true},

	// Qwen/Qwen1.5-MoE-A2.7B-Chat. The template has no text outside its
	// tags, so whitespace handling changes nothing: ChatML turns
	// "<|im_start|>" + role + "\n" + content + "<|im_end|>\n", preceded by
	// the default system turn "You are a helpful assistant" (no full stop)
	// when the first message is not a system message, then
	// "<|im_start|>assistant\n" with the generation prompt. bos_token is
	// null in the config and the template does not use it.
	{name: "qwen-single-gen", fixture: "qwen1.5-moe-a2.7b-chat", conv: "single", gen: true},
	{name: "qwen-single-nogen", fixture: "qwen1.5-moe-a2.7b-chat", conv: "single"},
	{name: "qwen-system-user-gen", fixture: "qwen1.5-moe-a2.7b-chat", conv: "system-user", gen: true},
	{name: "qwen-multi-turn-gen", fixture: "qwen1.5-moe-a2.7b-chat", conv: "multi-turn", gen: true},
	{name: "qwen-awkward-gen", fixture: "qwen1.5-moe-a2.7b-chat", conv: "awkward", gen: true},

	// mistralai/Mistral-7B-Instruct-v0.2 ("v1" template). Every tag opens
	// with {%- or {{-, which strips all whitespace before it, newlines and
	// indentation included, and the final "{%- endfor %}\n" newline goes to
	// trim_blocks: only the quoted strings are output. The system message
	// is folded into the first user turn as system + "\n\n" + content; the
	// template ignores add_generation_prompt. A user turn right after a
	// user turn calls raise_exception.
	{name: "mistral-system-user", fixture: "mistral-7b-instruct-v0.2", conv: "system-user", gen: true},
	{name: "mistral-multi-turn", fixture: "mistral-7b-instruct-v0.2", conv: "multi-turn"},
	{
		name: "mistral-bad-order", fixture: "mistral-7b-instruct-v0.2", conv: "bad-order", stage: "render",
		err:   "raise_exception: After the optional system message, conversation roles must alternate user/assistant/user/assistant/...",
		hfErr: "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...",
	},

	// The pre-v1 Mistral template with special tokens stored as AddedToken
	// objects: bos "<s>", eos "</s>" come from their "content". No text
	// outside tags: "<s>[INST] Hello [/INST]Hi! How can I help?</s>[INST] ...".
	// A system message at index 0 fails the alternation test first.
	{name: "added-token-multi-turn", fixture: "added-token-objects", conv: "multi-turn", gen: true},
	{
		name: "added-token-system-user", fixture: "added-token-objects", conv: "system-user", stage: "render",
		err:   "raise_exception: Conversation roles must alternate user/assistant/user/assistant/...",
		hfErr: "Conversation roles must alternate user/assistant/user/assistant/...",
	},

	// A list-form chat_template whose "default" entry is the Zephyr
	// template (HuggingFaceH4/zephyr-7b-beta): laid out like OLMoE's, so a
	// turn is "<|user|>\n" + content + eos_token + "\n" and the generation
	// prompt "<|assistant|>\n". The "tool_use" entry raises if it is used.
	{name: "list-form-single-gen", fixture: "list-form", conv: "single", gen: true},
	{name: "list-form-multi-turn-nogen", fixture: "list-form", conv: "multi-turn"},
	{
		name: "list-no-default", fixture: "list-no-default", conv: "single", stage: "load",
		err: `no template is named "default" (available: rag, tool_use)`, hfErr: "tool_use",
	},

	// chat_template.jinja (ChatML, as teknium/OpenHermes-2.5-Mistral-7B)
	// wins over the tokenizer_config.json chat_template, which raises if it
	// is used. No default system turn in this ChatML variant.
	{name: "jinja-file-single-gen", fixture: "jinja-file", conv: "single", gen: true},

	// A tokenizer_config.json without chat_template: no template, and
	// transformers' tokenizer.chat_template is None.
	{name: "no-template", fixture: "no-template", conv: "single", absent: true},

	// An unclosed {% for %}: gonja reports it at parse time (LoadChatTemplate),
	// jinja2 when transformers compiles the template.
	{name: "malformed", fixture: "malformed", conv: "single", stage: "load", err: "parse: Unexpected EOF, expected tag else or endfor", hfErr: ""},

	// Inline templates for the pieces of transformers' environment gonja
	// lacks or has differently. Each want is jinja2 3.1.6's output with
	// transformers' tojson, raise_exception and trim_blocks/lstrip_blocks
	// (checked with scripts/chat_template_hf.py --jinja2).
	{
		// json.dumps(ensure_ascii=False): ", " and ": " separators, keys in
		// insertion order (role, content), no HTML escaping, non-ASCII raw.
		name: "tojson-default", template: "{{ messages|tojson }}", conv: "multi-turn",
		want: `[{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi! How can I help?"}, {"role": "user", "content": "Name a colour."}]`,
	},
	{
		// indent=2: "," item separator, newline and indent per level.
		name: "tojson-indent", template: "{{ messages[0]|tojson(indent=2) }}", conv: "single",
		want: "{\n  \"role\": \"user\",\n  \"content\": \"Write a limerick about a lighthouse keeper. Do not use any commas in your response.\"\n}",
	},
	{
		// Escapes: \" \\ \n \t named, control characters as \u00XX, <>&' and
		// non-ASCII unescaped; sort_keys; separators; ensure_ascii=True
		// writes UTF-16 escapes (a surrogate pair for the emoji).
		name:     "tojson-options",
		template: `{{ messages[0].content|tojson }}|{{ {'b': 1, 'a': [true, none, 2.0]}|tojson(sort_keys=true) }}|{{ [1, {'x': {}}]|tojson(separators=(',', ':')) }}|{{ '東京🚀<&>'|tojson(ensure_ascii=true) }}`,
		conv:     "awkward",
		want:     `"  leading spaces, a tab\tand quotes \" ' \\ {{ not_a_variable }} {% raw %} 東京 🚀\n\ntrailing newline\n"|{"a": [true, null, 2.0], "b": 1}|[1,{"x":{}}]|"\u6771\u4eac\ud83d\ude80<&>"`,
	},
	{
		// {% break %}/{% continue %} (transformers loads loopcontrols) and
		// {% generation %}, which renders its body.
		name:     "loopcontrols-generation",
		template: "{% for m in messages %}{% if loop.index0 == 2 %}{% break %}{% endif %}{% if m.role == 'assistant' %}{% generation %}[{{ m.content }}]{% endgeneration %}{% continue %}{% endif %}{{ m.role }};{% endfor %}",
		conv:     "multi-turn",
		want:     "user;[Hi! How can I help?]",
	},
	{
		// messages[-1] of a one-message list, split()[-1] when the separator
		// is absent, str.replace without count, |reverse order: gonja alone
		// gets each of these wrong.
		name:     "indexing-methods",
		template: "{{ messages[-1]['content'][:5] }}|{{ 'no think'.split('</think>')[-1] }}|{{ ' a  b '.split() }}|{{ 'a-b-c'.replace('-', '+') }}|{{ (messages + [{'role': 'x'}])|reverse|map(attribute='role')|join(',') }}",
		conv:     "single",
		want:     "Write|no think|['a', 'b']|a+b+c|x,user",
	},
	{
		// String literals decode as Python's: \<newline> is dropped, an
		// unknown escape keeps its backslash, a literal may end in \\.
		name:     "string-literals",
		template: "{{ 'one \\\ntwo' }}|{{ '\\d+' }}|{{ 'ends in \\\\' }}|{{ \"it's \\\"quoted\\\"\" }}|{{ '\\x41\\u00e9\\101' }}",
		conv:     "single",
		want:     `one two|\d+|ends in \|it's "quoted"|AéA`,
	},
	{
		// lstrip_blocks strips the indentation before a block tag, not
		// before {{ }}; {%+ keeps it; trim_blocks drops the newline after a
		// block tag and a comment, {{- and -}} strip all whitespace around;
		// jinja2 drops one trailing newline of the template.
		name:     "whitespace",
		template: "  {% if true %}\n  yes\n  {% endif %}\n  {{ 'v' }}\n{# c #}\nx {%+ if true %}k{% endif %}\n {{- ' d ' -}} \ne\n",
		conv:     "single",
		want:     "  yes\n  v\nx k d e",
	},
	{
		// raise_exception's message is the error, verbatim.
		name: "raise", template: "{{ raise_exception('bad: ' ~ messages[0].role) }}", conv: "single", stage: "render",
		err: "raise_exception: bad: user", hfErr: "bad: user",
	},
	{
		// jinja2 without the do extension (transformers does not load it)
		// rejects {% do %}; gonja has it, Render must not.
		name: "no-do-tag", template: "{% do messages.append(1) %}x", conv: "single", stage: "load",
		err: "Encountered unknown tag 'do'", hfErr: "do",
	},
}

// chatSpecialDefault is the special-token map of the inline cases.
var chatSpecialDefault = map[string]string{"bos_token": "<s>", "eos_token": "</s>"}

func goldenPath(name string) string { return filepath.Join(chatTestdata, "golden", name+".txt") }

// loadCase returns the template a case renders.
func loadCase(c chatCase) (*ChatTemplate, error) {
	if c.fixture != "" {
		return LoadChatTemplate(filepath.Join(chatTestdata, c.fixture))
	}
	return ParseChatTemplate(c.template, chatSpecialDefault)
}

func TestChatTemplateGolden(t *testing.T) {
	for _, c := range chatCases {
		t.Run(c.name, func(t *testing.T) {
			msgs, ok := chatConversations[c.conv]
			if !ok {
				t.Fatalf("no conversation %q", c.conv)
			}
			tmpl, err := loadCase(c)
			if c.absent {
				if err != nil || tmpl != nil {
					t.Fatalf("LoadChatTemplate = %v, %v; want nil, nil", tmpl, err)
				}
				return
			}
			if c.stage == "load" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("load error = %v, want one containing %q", err, c.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tmpl == nil {
				t.Fatal("no template")
			}
			got, err := tmpl.Render(msgs, c.gen)
			if c.stage == "render" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("render error = %v (output %q), want one containing %q", err, got, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.template != "" {
				if got != c.want {
					t.Fatalf("Render = %q\nwant     %q", got, c.want)
				}
				return
			}
			path := goldenPath(c.name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("Render = %q\ngolden   %q (%s)", got, want, path)
			}
		})
	}
}

// TestChatTemplateHandDerived pins the IFEval-shaped renderings (one user
// message, generation prompt) to strings written out from the whitespace
// reasoning in the chatCases comments, independently of -update.
func TestChatTemplateHandDerived(t *testing.T) {
	user := chatConversations["single"][0].Content
	for _, tc := range []struct{ name, want string }{
		{"olmoe-single-gen", "<|endoftext|><|user|>\n" + user + "\n<|assistant|>\n"},
		{"olmoe-single-nogen", "<|endoftext|><|user|>\n" + user + "\n"},
		{"qwen-single-gen", "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen-system-user-gen", "<|im_start|>system\nYou are a careful assistant.<|im_end|>\n<|im_start|>user\nList three prime numbers.\nAnswer in JSON.<|im_end|>\n<|im_start|>assistant\n"},
		{"mistral-system-user", "<s> [INST] You are a careful assistant.\n\nList three prime numbers.\nAnswer in JSON. [/INST]"},
		{"added-token-multi-turn", "<s>[INST] Hello [/INST]Hi! How can I help?</s>[INST] Name a colour. [/INST]"},
		{"list-form-single-gen", "<|user|>\n" + user + "</s>\n<|assistant|>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := os.ReadFile(goldenPath(tc.name))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("golden %q\nhand   %q", got, tc.want)
			}
		})
	}
}

// chatManifest is testdata/chat/cases.json: the cases in a form
// scripts/chat_template_hf.py reads.
type chatManifest struct {
	Comment       string                           `json:"comment"`
	Conversations map[string][]chatManifestMessage `json:"conversations"`
	Cases         []chatManifestCase               `json:"cases"`
}

// chatManifestMessage keeps role before content, the order of a Python
// caller's {"role": ..., "content": ...}, which message|tojson shows.
type chatManifestMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatManifestCase struct {
	Name                string            `json:"name"`
	Fixture             string            `json:"fixture,omitempty"`
	Template            string            `json:"template,omitempty"`
	Special             map[string]string `json:"special,omitempty"`
	Conversation        string            `json:"conversation"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Golden              string            `json:"golden,omitempty"`
	Want                *string           `json:"want,omitempty"`
	Error               *string           `json:"error,omitempty"`
	NoTemplate          bool              `json:"no_template,omitempty"`
}

func buildChatManifest() chatManifest {
	m := chatManifest{
		Comment:       "Generated by go test ./runtime/tokenizer/ -run TestChatTemplate -update; read by scripts/chat_template_hf.py.",
		Conversations: map[string][]chatManifestMessage{},
	}
	for name, msgs := range chatConversations {
		var list []chatManifestMessage
		for _, msg := range msgs {
			list = append(list, chatManifestMessage{msg.Role, msg.Content})
		}
		m.Conversations[name] = list
	}
	for _, c := range chatCases {
		mc := chatManifestCase{Name: c.name, Fixture: c.fixture, Template: c.template, Conversation: c.conv, AddGenerationPrompt: c.gen}
		if c.template != "" {
			mc.Special = chatSpecialDefault
		}
		switch {
		case c.absent:
			mc.NoTemplate = true
		case c.stage != "":
			e := c.hfErr
			mc.Error = &e
		case c.template != "":
			w := c.want
			mc.Want = &w
		default:
			mc.Golden = filepath.ToSlash(filepath.Join("golden", c.name+".txt"))
		}
		m.Cases = append(m.Cases, mc)
	}
	return m
}

func TestChatTemplateManifest(t *testing.T) {
	want, err := json.MarshalIndent(buildChatManifest(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := filepath.Join(chatTestdata, "cases.json")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with chatCases: run go test ./runtime/tokenizer/ -run TestChatTemplate -update", path)
	}
}

// writeDir makes a checkpoint-like directory holding files (path -> content).
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadChatTemplate(t *testing.T) {
	const chatml = `{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}`
	for _, tc := range []struct {
		name    string
		files   map[string]string
		nilTmpl bool   // want (nil, nil)
		err     string // want an error containing this
		source  string // want this template text
		origin  string
		special map[string]string
	}{
		{name: "empty directory", files: map[string]string{}, nilTmpl: true},
		{name: "config without chat_template", files: map[string]string{"tokenizer_config.json": `{"eos_token": "</s>"}`}, nilTmpl: true},
		{name: "chat_template null", files: map[string]string{"tokenizer_config.json": `{"chat_template": null}`}, nilTmpl: true},
		{
			name:    "string template and special tokens",
			files:   map[string]string{"tokenizer_config.json": `{"chat_template": "T", "bos_token": "<s>", "eos_token": {"__type": "AddedToken", "content": "</s>", "lstrip": false}, "pad_token": null, "unk_token": {"content": "<unk>"}, "sep_token": "<sep>", "additional_special_tokens": ["<x>"]}`},
			source:  "T",
			origin:  "tokenizer_config.json chat_template",
			special: map[string]string{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "<sep>"},
		},
		{
			name:   "list form picks default",
			files:  map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "tool_use", "template": "A"}, {"name": "default", "template": "B"}]}`},
			source: "B",
			origin: `tokenizer_config.json chat_template (name "default" of default, tool_use)`,
		},
		{
			name:  "list form without default",
			files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "tool_use", "template": "A"}, {"name": "rag", "template": "B"}]}`},
			err:   `no template is named "default" (available: rag, tool_use)`,
		},
		{
			name:   "object form picks default",
			files:  map[string]string{"tokenizer_config.json": `{"chat_template": {"rag": "R", "default": "D"}}`},
			source: "D",
			origin: `tokenizer_config.json chat_template (name "default" of default, rag)`,
		},
		{name: "list entry without template", files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "default"}]}`}, err: `chat_template[0] lacks "name" or "template"`},
		{name: "chat_template of another type", files: map[string]string{"tokenizer_config.json": `{"chat_template": 3}`}, err: "neither a string nor a list"},
		{name: "special token of another type", files: map[string]string{"tokenizer_config.json": `{"chat_template": "T", "eos_token": 2}`}, err: "eos_token: want a string, an AddedToken object"},
		{name: "AddedToken without content", files: map[string]string{"tokenizer_config.json": `{"chat_template": "T", "eos_token": {"lstrip": false}}`}, err: "eos_token: want a string"},
		{name: "config not JSON", files: map[string]string{"tokenizer_config.json": `{"chat_template": `}, err: "tokenizer_config.json: unexpected end of JSON input"},
		{name: "malformed template", files: map[string]string{"tokenizer_config.json": `{"chat_template": "{% if x %}"}`}, err: "tokenizer_config.json: parse: Unexpected EOF"},
		{
			// transformers: chat_template.jinja replaces the config's template.
			name:    "chat_template.jinja wins over the config",
			files:   map[string]string{"tokenizer_config.json": `{"chat_template": "config", "eos_token": "</s>"}`, "chat_template.jinja": chatml},
			source:  chatml,
			origin:  "chat_template.jinja",
			special: map[string]string{"eos_token": "</s>"},
		},
		{
			name:   "chat_template.jinja without a config",
			files:  map[string]string{"chat_template.jinja": "J\n"},
			source: "J\n",
			origin: "chat_template.jinja",
		},
		{
			name:   "additional_chat_templates beside chat_template.jinja",
			files:  map[string]string{"chat_template.jinja": "D", "additional_chat_templates/tool_use.jinja": "U", "tokenizer_config.json": `{"chat_template": "config"}`},
			source: "D",
			origin: "chat_template.jinja (default of default, tool_use)",
		},
		{
			name:  "additional_chat_templates without a default",
			files: map[string]string{"additional_chat_templates/tool_use.jinja": "U", "tokenizer_config.json": `{"chat_template": "config"}`},
			err:   `no template is named "default" (available: tool_use)`,
		},
		{
			// chat_template.json is the processor's file: used only when the
			// tokenizer itself has no template.
			name:    "chat_template.json when the tokenizer has none",
			files:   map[string]string{"chat_template.json": `{"chat_template": "P"}`, "tokenizer_config.json": `{"eos_token": "</s>"}`},
			source:  "P",
			origin:  "chat_template.json chat_template",
			special: map[string]string{"eos_token": "</s>"},
		},
		{
			name:   "chat_template.json ignored beside the config's template",
			files:  map[string]string{"chat_template.json": `{"chat_template": "P"}`, "tokenizer_config.json": `{"chat_template": "C"}`},
			source: "C",
			origin: "tokenizer_config.json chat_template",
		},
		{name: "chat_template.json without the key", files: map[string]string{"chat_template.json": `{}`}, err: "chat_template.json: no chat_template key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, tc.files)
			tmpl, err := LoadChatTemplate(dir)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error spans lines: %q", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tc.nilTmpl:
				if tmpl != nil {
					t.Fatalf("template %q, want none", tmpl.Source())
				}
				return
			case tmpl == nil:
				t.Fatal("no template")
			}
			if tmpl.Source() != tc.source {
				t.Errorf("Source = %q, want %q", tmpl.Source(), tc.source)
			}
			if tmpl.Origin() != tc.origin {
				t.Errorf("Origin = %q, want %q", tmpl.Origin(), tc.origin)
			}
			if tc.special == nil {
				tc.special = map[string]string{}
			}
			if got := tmpl.SpecialTokens(); !equalStringMaps(got, tc.special) {
				t.Errorf("SpecialTokens = %v, want %v", got, tc.special)
			}
		})
	}
}

func equalStringMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestLoadChatTemplateMissingDirectory(t *testing.T) {
	tmpl, err := LoadChatTemplate(filepath.Join(t.TempDir(), "no-such-directory"))
	if err != nil || tmpl != nil {
		t.Fatalf("missing directory: LoadChatTemplate = %v, %v; want nil, nil", tmpl, err)
	}
}

func TestChatTemplateSHA256(t *testing.T) {
	tmpl, err := LoadChatTemplate(filepath.Join(chatTestdata, "jinja-file"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(chatTestdata, "jinja-file", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if got, want := tmpl.SHA256(), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("SHA256 = %s, want %s (the file's bytes)", got, want)
	}
	// The digest is of the source as stored, not of the text gonja parses
	// (string literals are rewritten for gonja).
	src := `{{ 'a \\d' }}`
	p, err := ParseChatTemplate(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum = sha256.Sum256([]byte(src))
	if p.SHA256() != hex.EncodeToString(sum[:]) || p.Source() != src {
		t.Fatalf("SHA256/Source not of the given text")
	}
}

func TestChatTemplateRaiseError(t *testing.T) {
	tmpl, err := ParseChatTemplate(`{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools: ' + m.content) }}{% endif %}ok{% endfor %}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]Message{{"user", "u"}, {"tool", "t1"}, {"tool", "t2"}}, false)
	var te *TemplateError
	if !errors.As(err, &te) || te.Message != "no tools: t1" {
		t.Fatalf("error = %v, want a *TemplateError with the first message", err)
	}
	if got := err.Error(); got != "chat template: raise_exception: no tools: t1" {
		t.Fatalf("error text = %q", got)
	}
	out, err := tmpl.Render([]Message{{"user", "u"}}, false)
	if err != nil || out != "ok" {
		t.Fatalf("Render = %q, %v after a failed render; want \"ok\"", out, err)
	}
}

func TestChatTemplateStrftimeNow(t *testing.T) {
	// Expected strings are Python's datetime(2024, 7, 5, 14, 3, 9).strftime
	// of the same formats (glibc directives).
	tmpl, err := ParseChatTemplate(`{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%Y-%m-%d %H:%M:%S") }}|{{ strftime_now("%A %B %j %p %I %y %e %%") }}|{{ strftime_now is defined }}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.now = func() time.Time { return time.Date(2024, 7, 5, 14, 3, 9, 0, time.UTC) }
	got, err := tmpl.Render(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "05 Jul 2024|2024-07-05 14:03:09|Friday July 187 PM 02 24  5 %|True"; got != want {
		t.Fatalf("Render = %q, want %q", got, want)
	}
}

func TestParseChatTemplateErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, err string }{
		{"unclosed block", "{% if x %}a", "parse: Unexpected EOF"},
		{"bad expression", "{{ 'a' + }}", "parse:"},
		{"unclosed comment", "{# c", "parse:"},
		{"truncated escape", `{{ '\x4' }}`, `parse: string literal at byte 3: truncated \x escape`},
		{"malformed escape", `{{ 'a' ~ '\xzz' }}`, `parse: string literal at byte 9: malformed \x escape`},
		{"stray end tag", "{% endif %}", "parse:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseChatTemplate(tc.src, nil)
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error = %v, want one line containing %q", err, tc.err)
			}
		})
	}
}

// FuzzChatTemplateRender renders every committed template with arbitrary
// roles and content. Render must not panic, and for a user message the
// content must come out verbatim where the template puts it: the golden
// fixtures' single-user rendering with the content substituted.
func FuzzChatTemplateRender(f *testing.F) {
	var tmpls []*ChatTemplate
	for _, fx := range []string{"olmoe-1b-7b-0924-instruct", "qwen1.5-moe-a2.7b-chat", "mistral-7b-instruct-v0.2", "added-token-objects", "list-form", "jinja-file"} {
		tmpl, err := LoadChatTemplate(filepath.Join(chatTestdata, fx))
		if err != nil {
			f.Fatal(err)
		}
		tmpls = append(tmpls, tmpl)
	}
	const marker = "\x00MARKER\x00"
	type shape struct{ before, after string }
	shapes := make([]shape, len(tmpls))
	for i, tmpl := range tmpls {
		out, err := tmpl.Render([]Message{{"user", marker}}, true)
		if err != nil {
			f.Fatal(err)
		}
		before, after, ok := strings.Cut(out, marker)
		if !ok {
			f.Fatalf("%s: content not in output %q", tmpl.Origin(), out)
		}
		shapes[i] = shape{before, after}
	}
	f.Add("user", "hello")
	f.Add("system", "{{ 7*7 }}{% if %}{# #}")
	f.Add("assistant", "\\' \" \n\r\t\x00 é 🚀")
	f.Add("tool", "\xff\xfe invalid UTF-8")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, role, content string) {
		for i, tmpl := range tmpls {
			if _, err := tmpl.Render([]Message{{role, content}, {"user", content}}, true); err != nil {
				var te *TemplateError
				if !errors.As(err, &te) {
					t.Fatalf("%s: role %q: non-template error %v", tmpl.Origin(), role, err)
				}
			}
			out, err := tmpl.Render([]Message{{"user", content}}, true)
			if err != nil {
				t.Fatalf("%s: %v", tmpl.Origin(), err)
			}
			if want := shapes[i].before + content + shapes[i].after; out != want {
				t.Fatalf("%s: Render = %q, want %q", tmpl.Origin(), out, want)
			}
		}
	})
}

// TestChatTemplateConcurrentRender renders one template from several
// goroutines (run with -race): a campaign renders its prompts in parallel.
func TestChatTemplateConcurrentRender(t *testing.T) {
	tmpl, err := LoadChatTemplate(filepath.Join(chatTestdata, "mistral-7b-instruct-v0.2"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(chatConversations["system-user"], true)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				if got, err := tmpl.Render(chatConversations["system-user"], true); err != nil || got != want {
					errs <- errors.New("concurrent Render differs")
					return
				}
				if _, err := tmpl.Render(chatConversations["bad-order"], true); err == nil {
					errs <- errors.New("concurrent Render lost raise_exception")
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
