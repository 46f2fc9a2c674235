package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"
)

// Canonical JSON, as package contracts documents it (and as editions'
// ContractDoc and CampaignDoc refer to): the value decoded generically and
// re-encoded with object keys sorted by byte order, no insignificant
// whitespace, no HTML escaping and numbers kept exactly as written. This is
// an implementation of that definition of its own, so that a bug in the
// writer's encoder cannot also hide here. Strings are escaped the way Go's
// encoding/json escapes them with HTML escaping off, which is what the
// definition produces:
//
//   - '"' and '\\' get a backslash; \b \f \n \r \t their short forms; other
//     bytes below 0x20 are \u00xx (lowercase hex);
//   - U+2028 and U+2029 are \u2028 and \u2029;
//   - everything else, '<', '>' and '&' included, is literal UTF-8.

// canonicalJSON appends the canonical form of v (generic tree with
// json.Number numbers) to b.
func canonicalJSON(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		if !json.Valid([]byte(x)) {
			return fmt.Errorf("invalid number %q", string(x))
		}
		b.WriteString(string(x))
	case string:
		canonicalString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonicalJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // byte order
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			canonicalString(b, k)
			b.WriteByte(':')
			if err := canonicalJSON(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("value of type %T is not generic JSON", v)
	}
	return nil
}

func canonicalString(b *bytes.Buffer, s string) {
	const hexdig = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\b':
				b.WriteString(`\b`)
			case c == '\f':
				b.WriteString(`\f`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte(hexdig[c>>4])
				b.WriteByte(hexdig[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == '\u2028':
			b.WriteString(`\u2028`)
		case r == '\u2029':
			b.WriteString(`\u2029`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// CanonicalHash is the lowercase hex SHA-256 of the canonical JSON of v (a
// generic tree). The frozen contract's hash is CanonicalHash of its
// "contract" member, the frozen campaign's of its "campaign" member.
func CanonicalHash(v any) (string, error) {
	var b bytes.Buffer
	if err := canonicalJSON(&b, v); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:]), nil
}
