package verifier

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// maxDecimals bounds a claim's declared decimals: float64 carries about 15
// significant decimal digits.
const maxDecimals = 15

// Check 5: each claim's value is the value at its source pointer, rounded as
// declared; numerator and denominator resolve and divide to the source; the
// status fields hold valid values.
func checkClaims(v *view, fs *findings) {
	e := v.e
	const f = editions.ClaimsFile
	if e.entries[f] == nil {
		fs.add(IDClaimsMissing, f, "", "present", "absent", "the edition has no claims.json")
		return
	}
	cd := e.claims
	if cd == nil {
		return // does not parse or decode: reported by check 2
	}
	seen := map[string]int{}
	for i, c := range cd.Claims {
		p := ptr("claims", i)
		if strings.TrimSpace(c.ID) == "" {
			fs.add(IDClaimsDuplicateID, f, p+"/id", "a non-empty id", c.ID, "claim %d has no id", i)
		} else if j, dup := seen[c.ID]; dup {
			fs.add(IDClaimsDuplicateID, f, p+"/id", "a unique id", c.ID, "claim %d repeats the id of claim %d", i, j)
		} else {
			seen[c.ID] = i
		}
		for _, s := range []struct {
			field, value string
			valid        []string
		}{
			{"evidence", c.Evidence, editions.EvidenceLevels},
			{"validation", c.Validation, editions.ValidationStates},
			{"publication", c.Publication, editions.PublicationStates},
			{"reproduction", c.Reproduction, editions.ReproductionStates},
		} {
			if !slices.Contains(s.valid, s.value) {
				fs.add(IDClaimsStatus, f, p+"/"+s.field, s.valid, s.value, "claim %s: %s must be one of %s", c.ID, s.field, strings.Join(s.valid, ", "))
			}
		}
		decimalsOK := c.Decimals >= 0 && c.Decimals <= maxDecimals
		if !decimalsOK {
			fs.add(IDClaimsDecimals, f, p+"/decimals", "0.."+itoa(maxDecimals), c.Decimals, "claim %s: decimals out of range", c.ID)
		}

		src, ok := claimRef(v, fs, c, p+"/source", &c.Source, c.Value)
		if ok && decimalsOK {
			if want := roundHalfAway(src, c.Decimals); c.Value != want {
				fs.add(IDClaimsValue, f, p+"/value", want, c.Value,
					"claim %s: value must be %s at %s rounded half away from zero to %d decimals", c.ID, fmtFloat(src), c.Source.Pointer, c.Decimals)
			}
		}

		if iv := c.Interval; iv != nil {
			lo, lok := claimRef(v, fs, c, p+"/interval/lo", &iv.Lo, -1)
			hi, hok := claimRef(v, fs, c, p+"/interval/hi", &iv.Hi, -1)
			if lok && hok && lo > hi {
				fs.add(IDClaimsInterval, f, p+"/interval", "lo <= hi", []float64{lo, hi}, "claim %s: the interval's bounds are reversed", c.ID)
			}
		}
		if (c.Numerator == nil) != (c.Denominator == nil) {
			fs.add(IDClaimsRatioHalf, f, p, "numerator and denominator, or neither", nil, "claim %s has only half a ratio", c.ID)
			continue
		}
		if c.Numerator == nil {
			continue
		}
		n, nok := claimRef(v, fs, c, p+"/numerator", c.Numerator, -1)
		d, dok := claimRef(v, fs, c, p+"/denominator", c.Denominator, -1)
		if ok && nok && dok {
			if q := n / d; q != src {
				fs.add(IDClaimsRatio, f, p, num(q), src,
					"claim %s: numerator / denominator = %s / %s does not equal the source value", c.ID, fmtFloat(n), fmtFloat(d))
			}
		}
	}
}

// claimRef resolves a source reference of claim c and checks the value it
// recorded. claimValue is the claim's own value (for the zero-for-unknown
// rule), -1 for numerator and denominator. It returns the number found.
func claimRef(v *view, fs *findings, c editions.Claim, p string, ref *editions.SourceRef, claimValue float64) (float64, bool) {
	const f = editions.ClaimsFile
	d := v.e.docs[ref.File]
	if !cleanRelPath(ref.File) || d == nil || d.tree == nil {
		fs.add(IDClaimsUnresolved, f, p+"/file", "a JSON document of the edition", ref.File,
			"claim %s: source file %q is not a readable JSON document of the edition", c.ID, ref.File)
		return 0, false
	}
	x, err := resolve(d.tree, ref.Pointer)
	if err != nil {
		fs.add(IDClaimsUnresolved, f, p+"/pointer", "a pointer that resolves in "+ref.File, ref.Pointer, "claim %s: %v", c.ID, err)
		return 0, false
	}
	switch val := x.(type) {
	case json.Number:
		got, err := strconv.ParseFloat(string(val), 64)
		if err != nil {
			fs.add(IDClaimsNotNumber, ref.File, ref.Pointer, "a float64", string(val), "claim %s: %v", c.ID, err)
			return 0, false
		}
		if ref.Value != got {
			fs.add(IDClaimsSourceValue, f, p+"/value", got, ref.Value,
				"claim %s: the value recorded with the reference differs from %s#%s", c.ID, ref.File, ref.Pointer)
		}
		return got, true
	case string:
		if val == editions.Unknown || val == editions.Unsupported {
			if ref.Value == 0 || claimValue == 0 {
				fs.add(IDInvZeroForUnknown, f, p+"/value", val, 0,
					"claim %s: 0 written for an observation that is %s at %s#%s", c.ID, val, ref.File, ref.Pointer)
				return 0, false
			}
		}
	}
	fs.add(IDClaimsNotNumber, f, p+"/pointer", "a number", x, "claim %s: %s#%s is not a number", c.ID, ref.File, ref.Pointer)
	return 0, false
}

// roundHalfAway rounds x to d decimal places, halves away from zero, working
// on the shortest decimal representation of x (the digits a reader sees in
// the JSON), not on its binary expansion: 2.675 rounds to 2.68 although the
// float64 nearest 2.675 lies just below it. The result is the float64
// nearest the rounded decimal.
func roundHalfAway(x float64, d int) float64 {
	s := strconv.FormatFloat(x, 'f', -1, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	if len(frac) <= d {
		return x
	}
	digits := []byte(intPart + frac[:d])
	if frac[d] >= '5' {
		i := len(digits) - 1
		for ; i >= 0; i-- {
			if digits[i] < '9' {
				digits[i]++
				break
			}
			digits[i] = '0'
		}
		if i < 0 {
			digits = append([]byte{'1'}, digits...)
		}
	}
	ip := string(digits[:len(digits)-d])
	out := ip
	if d > 0 {
		out += "." + string(digits[len(digits)-d:])
	}
	if neg {
		out = "-" + out
	}
	r, _ := strconv.ParseFloat(out, 64)
	return r
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
