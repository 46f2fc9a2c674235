package verifier

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// JSON pointers (RFC 6901) over documents decoded into the generic form
// (map[string]any, []any, json.Number, string, bool, nil).

var errPointer = errors.New("json pointer")

// resolve returns the value at pointer p in doc.
func resolve(doc any, p string) (any, error) {
	if p == "" {
		return doc, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("%w %q: must be empty or start with '/'", errPointer, p)
	}
	cur := doc
	for _, raw := range strings.Split(p[1:], "/") {
		tok, err := unescapeToken(raw)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", errPointer, p, err)
		}
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, fmt.Errorf("%w %q: no member %q", errPointer, p, tok)
			}
			cur = next
		case []any:
			i, err := arrayIndex(tok, len(v))
			if err != nil {
				return nil, fmt.Errorf("%w %q: %v", errPointer, p, err)
			}
			cur = v[i]
		default:
			return nil, fmt.Errorf("%w %q: %q indexes a %s", errPointer, p, tok, jsonKind(cur))
		}
	}
	return cur, nil
}

func unescapeToken(t string) (string, error) {
	if !strings.Contains(t, "~") {
		return t, nil
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] != '~' {
			b.WriteByte(t[i])
			continue
		}
		if i+1 >= len(t) || (t[i+1] != '0' && t[i+1] != '1') {
			return "", errors.New("'~' must be followed by 0 or 1")
		}
		if t[i+1] == '0' {
			b.WriteByte('~')
		} else {
			b.WriteByte('/')
		}
		i++
	}
	return b.String(), nil
}

// arrayIndex parses an RFC 6901 array index: "0" or digits without a leading
// zero; "-" (past the end) never resolves to a value.
func arrayIndex(tok string, n int) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, fmt.Errorf("array index %q", tok)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, fmt.Errorf("array index %q", tok)
		}
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i >= n {
		return 0, fmt.Errorf("array index %s out of range (length %d)", tok, n)
	}
	return i, nil
}

// ptr builds a JSON pointer from tokens (strings and ints), escaping '~'
// and '/'.
func ptr(tokens ...any) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		switch v := t.(type) {
		case string:
			b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(v))
		case int:
			b.WriteString(strconv.Itoa(v))
		default:
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}
