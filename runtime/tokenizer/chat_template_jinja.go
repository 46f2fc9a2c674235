package tokenizer

// The pieces of transformers' Jinja environment that gonja does not have or
// has differently (chat_template.go lists them): the tojson filter
// (json.dumps), strftime_now, the {% generation %} tag, the absence of the do
// and trans tags, Python's string-literal escapes (canonicalLiterals), lists
// whose x[-len(x)] works (pyList), str.replace, str.split and |reverse.

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// withoutStructures replaces the named tags with one that fails to parse,
// as jinja2 does for a tag it does not know. gonja's set has no removal.
func withoutStructures(set *exec.ControlStructureSet, names ...string) *exec.ControlStructureSet {
	for _, name := range names {
		unknown := func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
			return nil, p.Error(fmt.Sprintf("Encountered unknown tag '%s'", name), p.Current())
		}
		if err := set.Replace(name, unknown); err != nil {
			panic(err)
		}
	}
	return set
}

// generationStructure is transformers' {% generation %}...{% endgeneration %}
// (its AssistantTracker extension): with tokenize=False it renders the body,
// in a scope of its own like jinja2's call block.
type generationStructure struct {
	location *tokens.Token
	wrapper  *nodes.Wrapper
}

func (g *generationStructure) Position() *tokens.Token { return g.location }
func (g *generationStructure) String() string {
	return fmt.Sprintf("GenerationControlStructure(Line=%d Col=%d)", g.location.Line, g.location.Col)
}
func (g *generationStructure) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	return r.ExecuteWrapper(g.wrapper)
}

func generationParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	g := &generationStructure{location: p.Current()}
	if !args.End() {
		return nil, args.Error("generation takes no arguments", args.Current())
	}
	wrapper, endargs, err := p.WrapUntil("endgeneration")
	if err != nil {
		return nil, err
	}
	if !endargs.End() {
		return nil, endargs.Error("endgeneration takes no arguments", endargs.Current())
	}
	g.wrapper = wrapper
	return g, nil
}

// filterToJSON is transformers' tojson:
//
//	json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
//
// with the arguments in that order, positionally or by keyword. Unlike
// jinja2's own tojson it does not HTML-escape.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	opts := jsonOptions{}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(params.Args) > len(names) {
		return exec.AsValue(fmt.Errorf("tojson takes at most %d arguments, got %d", len(names), len(params.Args)))
	}
	args := map[string]*exec.Value{}
	for i, a := range params.Args {
		args[names[i]] = a
	}
	for k, v := range params.KwArgs {
		if _, dup := args[k]; dup {
			return exec.AsValue(fmt.Errorf("tojson got multiple values for argument '%s'", k))
		}
		known := false
		for _, n := range names {
			known = known || n == k
		}
		if !known {
			return exec.AsValue(fmt.Errorf("tojson got an unexpected keyword argument '%s'", k))
		}
		args[k] = v
	}
	if v, ok := args["ensure_ascii"]; ok {
		opts.ensureASCII = v.IsTrue()
	}
	opts.itemSep, opts.keySep = ", ", ": "
	if v, ok := args["indent"]; ok && !v.IsNil() {
		switch {
		case v.IsString():
			opts.indent = v.String()
		case v.IsInteger() && !v.IsBool():
			opts.indent = strings.Repeat(" ", max(v.Integer(), 0))
		default:
			return exec.AsValue(fmt.Errorf("tojson: indent must be an integer or a string, not %s", v.String()))
		}
		opts.indented = true
		opts.itemSep = ","
	}
	if v, ok := args["separators"]; ok && !v.IsNil() {
		if !v.IsList() || v.Len() != 2 || !v.Index(0).IsString() || !v.Index(1).IsString() {
			return exec.AsValue(fmt.Errorf("tojson: separators must be a pair of strings"))
		}
		opts.itemSep, opts.keySep = v.Index(0).String(), v.Index(1).String()
	}
	if v, ok := args["sort_keys"]; ok {
		opts.sortKeys = v.IsTrue()
	}
	var b strings.Builder
	if err := opts.encode(&b, in, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(b.String())
}

type jsonOptions struct {
	ensureASCII     bool
	indented        bool
	indent          string
	itemSep, keySep string
	sortKeys        bool
}

// encode writes v as Python's json.dumps does.
func (o *jsonOptions) encode(b *strings.Builder, v *exec.Value, depth int) error {
	if depth > 100 {
		return fmt.Errorf("tojson: nesting too deep")
	}
	switch {
	case v.IsError():
		return fmt.Errorf("tojson: %s", v.Error())
	case v.IsNil():
		b.WriteString("null")
	case v.IsBool():
		if v.Bool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInteger():
		b.WriteString(strconv.Itoa(v.Integer()))
	case v.IsFloat():
		b.WriteString(pyFloatJSON(v.Float()))
	case v.IsString():
		o.quote(b, v.String())
	case v.IsList():
		n := v.Len()
		if n == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			if err := o.encode(b, exec.ToValue(v.Index(i)), depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte(']')
	case v.IsDict():
		pairs := v.Items()
		if d, ok := v.Interface().(*exec.Dict); ok {
			pairs = d.Pairs
		} else if d, ok := v.Interface().(exec.Dict); ok {
			pairs = d.Pairs
		} else {
			// A Go map has no order; Python's dict would have insertion
			// order. Sort, so that output is at least deterministic.
			sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].Key.String() < pairs[j].Key.String() })
		}
		if o.sortKeys {
			pairs = append([]*exec.Pair(nil), pairs...)
			sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].Key.String() < pairs[j].Key.String() })
		}
		if len(pairs) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			key, err := jsonKey(p.Key)
			if err != nil {
				return err
			}
			o.quote(b, key)
			b.WriteString(o.keySep)
			if err := o.encode(b, exec.ToValue(p.Value), depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: object %s is not JSON serializable", v.String())
	}
	return nil
}

func (o *jsonOptions) newline(b *strings.Builder, depth int) {
	if !o.indented {
		return
	}
	b.WriteByte('\n')
	for i := 0; i < depth; i++ {
		b.WriteString(o.indent)
	}
}

// jsonKey is Python's conversion of a dict key for json.dumps.
func jsonKey(k *exec.Value) (string, error) {
	switch {
	case k.IsString():
		return k.String(), nil
	case k.IsNil():
		return "null", nil
	case k.IsBool():
		if k.Bool() {
			return "true", nil
		}
		return "false", nil
	case k.IsInteger():
		return strconv.Itoa(k.Integer()), nil
	case k.IsFloat():
		return pyFloatJSON(k.Float()), nil
	}
	return "", fmt.Errorf("tojson: keys must be str, int, float, bool or None, not %s", k.String())
}

// quote writes s as a JSON string the way Python's encoder does: ", \ and
// the control characters below U+0020 are escaped (\n, \r, \t, \b, \f by
// name, the rest as \u00XX); with ensure_ascii, so is everything above
// U+007E (as UTF-16 \uXXXX). Bytes that are not UTF-8 (a Python str cannot
// hold them) are written as U+FFFD.
func (o *jsonOptions) quote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case o.ensureASCII && r > 0x7e:
			if r > 0xffff {
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r) // utf8.RuneError for invalid bytes: U+FFFD
		}
	}
	b.WriteByte('"')
}

// pyFloatJSON is float.__repr__ as json.dumps writes it: the shortest
// round-trip digits, positional for exponents -4..15 with ".0" when
// integral, else d.ddde±XX; NaN and Infinity as JavaScript names.
func pyFloatJSON(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expPart, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expPart)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// strftime formats t as C's strftime (and so Python's datetime.strftime on
// glibc) does for the directives chat templates use; an unknown directive is
// written as is.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'n':
			b.WriteByte('\n')
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 't':
			b.WriteByte('\t')
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			fmt.Fprintf(&b, "%d", wd)
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday()))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// pythonStrMethods are the str methods a template can call. gonja keeps its
// method tables unexported, so chatMethods copies them by name.
var pythonStrMethods = []string{
	"capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find",
	"format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
	"isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
	"join", "ljust", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "rfind",
	"rindex", "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith",
	"strip", "swapcase", "title", "translate", "upper", "zfill",
}

// chatMethods is gonja's method set with str.replace fixed: gonja requires
// its count argument, Python's is optional (default: replace all).
func chatMethods() exec.Methods {
	m := builtins.Methods
	str := map[string]exec.Method[string]{}
	for _, name := range pythonStrMethods {
		if f, ok := m.Str.Get(name); ok {
			str[name] = f
		}
	}
	str["replace"] = strReplace
	str["split"] = strSplit(false)
	str["rsplit"] = strSplit(true)
	if f, ok := m.Str.Get("splitlines"); ok {
		str["splitlines"] = pyListResult(f)
	}
	m.Str = exec.NewMethodSet(str)
	return m
}

func strReplace(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.KwArgs) > 0 && !(len(args.KwArgs) == 1 && args.KwArgs["count"] != nil) {
		return nil, fmt.Errorf("replace() takes no keyword arguments but count")
	}
	if len(args.Args) < 2 || len(args.Args) > 3 {
		return nil, fmt.Errorf("replace() takes 2 or 3 arguments, got %d", len(args.Args))
	}
	if !args.Args[0].IsString() || !args.Args[1].IsString() {
		return nil, fmt.Errorf("replace() arguments must be strings")
	}
	count := -1
	c := args.KwArgs["count"]
	if len(args.Args) == 3 {
		c = args.Args[2]
	}
	if c != nil {
		if !c.IsInteger() {
			return nil, fmt.Errorf("replace() count must be an integer")
		}
		count = c.Integer()
	}
	if count < 0 {
		count = -1
	}
	return strings.Replace(self, args.Args[0].String(), args.Args[1].String(), count), nil
}

// canonicalLiterals rewrites every string literal inside the template's tags
// into a form gonja reads as the same string jinja2 reads, and leaves
// everything else byte for byte as it is.
//
// jinja2 decodes a literal as Python's unicode-escape does: \<newline> is
// dropped, \\ \' \" \a \b \f \n \r \t \v, \ooo (1 to 3 octal digits), \xhh,
// \uhhhh and \Uhhhhhhhh are decoded, any other backslash is kept with the
// character after it, and newlines in the literal are normalised to \n.
// gonja decodes with Go's escape rules instead (an unknown escape such as \s
// or \<newline> is a syntax error, \0 needs three digits) and its lexer takes
// the quote after an escaped backslash ('a\\') for escaped. The rewrite
// decodes each literal with Python's rules and writes it back with every
// character raw except the backslash and the quote, written as \x5c and
// \x27 or \x22, which both gonja's lexer and its decoder pass through to the
// same character. Newlines dropped from a literal (\<newline>) are put back
// after it, as whitespace inside the tag, so that line numbers in errors
// still match the source.
func canonicalLiterals(src string) (string, error) {
	var b strings.Builder
	b.Grow(len(src))
	i := 0
	for i < len(src) {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			b.WriteString(src[i:])
			break
		}
		j += i
		b.WriteString(src[i:j])
		switch src[j+1] {
		case '#': // comment: verbatim to its end
			end := strings.Index(src[j+2:], "#}")
			if end < 0 {
				b.WriteString(src[j:])
				return b.String(), nil
			}
			end += j + 4
			b.WriteString(src[j:end])
			i = end
		case '{', '%':
			if loc := rawStart.FindStringIndex(src[j:]); loc != nil && src[j+1] == '%' {
				endLoc := rawEnd.FindStringIndex(src[j+loc[1]:])
				if endLoc == nil {
					b.WriteString(src[j:])
					return b.String(), nil
				}
				end := j + loc[1] + endLoc[1]
				b.WriteString(src[j:end])
				i = end
				continue
			}
			closer := "}}"
			if src[j+1] == '%' {
				closer = "%}"
			}
			end, err := canonicalTag(&b, src, j+2, closer)
			if err != nil {
				return "", err
			}
			i = end
			continue
		default:
			b.WriteByte('{')
			i = j + 1
			continue
		}
	}
	return b.String(), nil
}

var (
	rawStart = regexp.MustCompile(`^\{%[-+]?\s*raw\s*[-+]?%\}`)
	rawEnd   = regexp.MustCompile(`\{%[-+]?\s*endraw\s*[-+]?%\}`)
)

// canonicalTag copies the tag opened at src[start-2:start] through its
// closer (at bracket depth 0, as jinja2's lexer balances brackets),
// rewriting string literals, and returns the index after the closer.
func canonicalTag(b *strings.Builder, src string, start int, closer string) (int, error) {
	b.WriteString(src[start-2 : start])
	depth := 0
	i := start
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\'' || c == '"':
			end := i + 1
			for end < len(src) && src[end] != c {
				if src[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(src) { // unterminated: leave it to the parser
				b.WriteString(src[i:])
				return len(src), nil
			}
			val, err := pyUnescape(src[i+1 : end])
			if err != nil {
				return 0, fmt.Errorf("string literal at byte %d: %w", i, err)
			}
			b.WriteByte(c)
			for k := 0; k < len(val); k++ {
				switch val[k] {
				case '\\':
					b.WriteString(`\x5c`)
				case c:
					fmt.Fprintf(b, `\x%02x`, c)
				default:
					b.WriteByte(val[k])
				}
			}
			b.WriteByte(c)
			lost := strings.Count(src[i:end], "\n") - strings.Count(val, "\n")
			for ; lost > 0; lost-- {
				b.WriteByte('\n')
			}
			i = end + 1
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			if depth == 0 && strings.HasPrefix(src[i:], closer) {
				b.WriteString(closer)
				return i + len(closer), nil
			}
			if depth > 0 {
				depth--
			}
		case depth == 0 && strings.HasPrefix(src[i:], closer):
			b.WriteString(closer)
			return i + len(closer), nil
		}
		b.WriteByte(c)
		i++
	}
	return i, nil
}

// pyUnescape decodes the body of a jinja2 string literal: newlines
// normalised, then Python's unicode-escape rules.
func pyUnescape(s string) (string, error) {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New(`\ at end of string`)
		}
		i++
		switch c := s[i]; c {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(c)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n, k := 0, 0
			for ; k < 3 && i+k < len(s) && s[i+k] >= '0' && s[i+k] <= '7'; k++ {
				n = n*8 + int(s[i+k]-'0')
			}
			b.WriteRune(rune(n))
			i += k - 1
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+width >= len(s) {
				return "", fmt.Errorf(`truncated \%c escape`, c)
			}
			n, err := strconv.ParseUint(s[i+1:i+1+width], 16, 32)
			if err != nil || n > unicode.MaxRune {
				return "", fmt.Errorf(`malformed \%c escape`, c)
			}
			b.WriteRune(rune(n))
			i += width
		case 'N':
			return "", errors.New(`\N{...} escapes are not supported`)
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// pyList is a list whose item lookup handles x[-len(x)]: gonja's own lookup
// misses that index (messages[-1] of a one-message conversation, or
// s.split(sep)[-1] when sep does not occur, would be none). Slices of a
// pyList keep the type. The messages variable, split results and reverse
// results are pyLists; other lists a template builds are gonja's own.
type pyList []any

func (l pyList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.ToValue(l[i]), true
}

// listFilters are the jinja2 filters that return a list; their results are
// made pyLists.
var listFilters = []string{
	"batch", "dictsort", "list", "map", "reject", "rejectattr", "select", "selectattr", "slice", "sort", "unique",
}

// pyListFilter wraps a filter so that a []any result becomes a pyList.
func pyListFilter(f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		out := f(e, in, params)
		if l, ok := out.Interface().([]any); ok {
			return &exec.Value{Val: reflect.ValueOf(pyList(l)), Safe: out.Safe}
		}
		return out
	}
}

// pyListResult wraps a str method that returns a slice so that it returns a
// pyList of its elements.
func pyListResult(f exec.Method[string]) exec.Method[string] {
	return func(self string, v *exec.Value, args *exec.VarArgs) (any, error) {
		out, err := f(self, v, args)
		if err != nil {
			return out, err
		}
		rv := reflect.ValueOf(out)
		if rv.Kind() != reflect.Slice {
			return out, nil
		}
		l := make(pyList, rv.Len())
		for i := range l {
			l[i] = exec.ToValue(rv.Index(i)).String()
		}
		return l, nil
	}
}

// strSplit is Python's str.split (or rsplit) with its optional sep and
// maxsplit, positionally or by keyword: without sep (or sep None) it splits
// on runs of whitespace and drops empty fields. gonja's split defaults sep to
// a single space.
func strSplit(fromRight bool) exec.Method[string] {
	name := "split"
	if fromRight {
		name = "rsplit"
	}
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) > 2 {
			return nil, fmt.Errorf("%s() takes at most 2 arguments, got %d", name, len(args.Args))
		}
		var sepV, maxV *exec.Value
		if len(args.Args) > 0 {
			sepV = args.Args[0]
		}
		if len(args.Args) > 1 {
			maxV = args.Args[1]
		}
		for k, v := range args.KwArgs {
			switch {
			case k == "sep" && sepV == nil:
				sepV = v
			case k == "maxsplit" && maxV == nil:
				maxV = v
			default:
				return nil, fmt.Errorf("%s() got an unexpected or repeated argument '%s'", name, k)
			}
		}
		maxsplit := -1
		if maxV != nil {
			if !maxV.IsInteger() {
				return nil, fmt.Errorf("%s() maxsplit must be an integer", name)
			}
			maxsplit = maxV.Integer()
		}
		var parts []string
		if sepV == nil || sepV.IsNil() {
			parts = splitWhitespace(self, maxsplit, fromRight)
		} else {
			if !sepV.IsString() {
				return nil, fmt.Errorf("%s() sep must be a string or None", name)
			}
			sep := sepV.String()
			if sep == "" {
				return nil, fmt.Errorf("%s(): empty separator", name)
			}
			n := -1
			if maxsplit >= 0 {
				n = maxsplit + 1
			}
			if !fromRight || n < 0 {
				parts = strings.SplitN(self, sep, n)
			} else {
				// rsplit: the last n-1 separators split.
				parts = []string{}
				rest := self
				for len(parts) < n-1 {
					k := strings.LastIndex(rest, sep)
					if k < 0 {
						break
					}
					parts = append([]string{rest[k+len(sep):]}, parts...)
					rest = rest[:k]
				}
				parts = append([]string{rest}, parts...)
			}
		}
		l := make(pyList, len(parts))
		for i, p := range parts {
			l[i] = p
		}
		return l, nil
	}
}

// pySpace is Python's str.isspace for one character.
func pySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// splitWhitespace is str.split()/rsplit() without a separator.
func splitWhitespace(s string, maxsplit int, fromRight bool) []string {
	if maxsplit < 0 {
		return strings.FieldsFunc(s, pySpace)
	}
	parts := []string{}
	if !fromRight {
		rest := strings.TrimLeftFunc(s, pySpace)
		for rest != "" {
			if len(parts) == maxsplit {
				return append(parts, rest)
			}
			k := strings.IndexFunc(rest, pySpace)
			if k < 0 {
				return append(parts, rest)
			}
			parts = append(parts, rest[:k])
			rest = strings.TrimLeftFunc(rest[k:], pySpace)
		}
		return parts
	}
	rest := strings.TrimRightFunc(s, pySpace)
	for rest != "" {
		if len(parts) == maxsplit {
			return append([]string{rest}, parts...)
		}
		k := strings.LastIndexFunc(rest, pySpace)
		if k < 0 {
			return append([]string{rest}, parts...)
		}
		_, size := utf8.DecodeRuneInString(rest[k:])
		parts = append([]string{rest[k+size:]}, parts...)
		rest = strings.TrimRightFunc(rest[:k], pySpace)
	}
	return parts
}

// filterReverse is jinja2's reverse: a string reversed by character, any
// other sequence in reverse order. (gonja's sorts a list before reversing.)
func filterReverse(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 || len(params.KwArgs) > 0 {
		return exec.AsValue(fmt.Errorf("reverse takes no arguments"))
	}
	switch {
	case in.IsString():
		r := []rune(in.String())
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return exec.AsValue(string(r))
	case in.IsList():
		n := in.Len()
		out := make(pyList, n)
		for i := 0; i < n; i++ {
			out[n-1-i] = exec.ToValue(in.Index(i)).Interface()
		}
		return exec.AsValue(out)
	}
	return exec.AsValue(fmt.Errorf("reverse: cannot reverse %s", in.String()))
}
