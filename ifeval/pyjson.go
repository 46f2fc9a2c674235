package ifeval

// pyJSONValid reports whether Python's json.loads accepts s: one JSON value
// with optional surrounding whitespace (space, tab, newline, carriage
// return), where Python also accepts the constants NaN, Infinity and
// -Infinity, and rejects raw control characters inside strings (its strict
// mode). encoding/json's Valid rejects the three constants, hence this
// small validator. Nesting deeper than Python's default recursion limit
// (1000) is a RecursionError in the reference, not a verdict; here it is
// not followed.
func pyJSONValid(s string) bool {
	p := jsonParser{s: s}
	p.ws()
	if !p.value(0) {
		return false
	}
	p.ws()
	return p.i == len(p.s)
}

type jsonParser struct {
	s string
	i int
}

func (p *jsonParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) lit(w string) bool {
	if len(p.s)-p.i >= len(w) && p.s[p.i:p.i+len(w)] == w {
		p.i += len(w)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) bool {
	if p.i >= len(p.s) || depth > 1000 {
		return false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		p.i++
		p.ws()
		if p.lit("}") {
			return true
		}
		for {
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != '"' || !p.str() {
				return false
			}
			p.ws()
			if !p.lit(":") {
				return false
			}
			p.ws()
			if !p.value(depth + 1) {
				return false
			}
			p.ws()
			if p.lit("}") {
				return true
			}
			if !p.lit(",") {
				return false
			}
		}
	case c == '[':
		p.i++
		p.ws()
		if p.lit("]") {
			return true
		}
		for {
			p.ws()
			if !p.value(depth + 1) {
				return false
			}
			p.ws()
			if p.lit("]") {
				return true
			}
			if !p.lit(",") {
				return false
			}
		}
	case c == '"':
		return p.str()
	case c == 'n':
		return p.lit("null")
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'N':
		return p.lit("NaN")
	case c == 'I':
		return p.lit("Infinity")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return false
}

func (p *jsonParser) str() bool {
	p.i++ // opening quote
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			p.i++
			if p.i >= len(p.s) {
				return false
			}
			switch p.s[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				if len(p.s)-p.i < 5 {
					return false
				}
				for _, h := range p.s[p.i+1 : p.i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				p.i += 5
			default:
				return false
			}
		default:
			p.i++
		}
	}
	return false
}

func (p *jsonParser) digits() int {
	n := 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// number is Python's -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)? or -Infinity.
func (p *jsonParser) number() bool {
	if p.lit("-") && p.lit("Infinity") {
		return true
	}
	switch {
	case p.lit("0"):
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	// A fraction or exponent that does not complete is left unread, as
	// Python's number pattern leaves it; the caller then sees extra data.
	if save := p.i; p.lit(".") && p.digits() == 0 {
		p.i = save
	}
	if save := p.i; p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			p.i = save
		}
	}
	return true
}
