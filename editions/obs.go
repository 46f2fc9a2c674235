// Package editions defines the edition format every tool agrees on: the
// documents an edition holds (raw worker records, per-configuration
// aggregates, claims, the manifest), their Go types and JSON shapes, and the
// rules for observations that were not made.
//
// An edition is a directory:
//
//	manifest.json              every other file: path, bytes, sha256; edition id; tool build info
//	campaign.json              the frozen campaign
//	contract.json              the frozen contract, with its canonical SHA-256
//	raw/<config>/block-<k>.json  one worker's raw record (RawRecord)
//	configs/<config>.json      aggregates of one configuration (ConfigDoc)
//	claims.json                claims with their sources (ClaimsDoc)
//	report.md, report.html, plots/*.png
//
// Every JSON document carries "schema" and "version" and validates against
// the JSON Schema of the same name under schemas/.
//
// An observation that was not made is the string "UNKNOWN"; one the platform
// or build cannot make is "UNSUPPORTED". Neither is ever written as 0: see
// Obs.
package editions

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The two non-numeric observation states.
const (
	Unknown     = "UNKNOWN"
	Unsupported = "UNSUPPORTED"
)

// Obs is an observed number, or the reason there is none. In JSON it is
// either a number or one of the strings "UNKNOWN" and "UNSUPPORTED".
type Obs[T int64 | float64] struct {
	Value  T
	Status string // "" when Value was observed, else Unknown or Unsupported
}

// Observed returns an observation of v.
func Observed[T int64 | float64](v T) Obs[T] { return Obs[T]{Value: v} }

// UnknownObs is an observation that was not made.
func UnknownObs[T int64 | float64]() Obs[T] { return Obs[T]{Status: Unknown} }

// UnsupportedObs is an observation the platform cannot make.
func UnsupportedObs[T int64 | float64]() Obs[T] { return Obs[T]{Status: Unsupported} }

// Ok reports whether the observation holds a number.
func (o Obs[T]) Ok() bool { return o.Status == "" }

// MarshalJSON implements json.Marshaler.
func (o Obs[T]) MarshalJSON() ([]byte, error) {
	switch o.Status {
	case "":
		return json.Marshal(o.Value)
	case Unknown, Unsupported:
		return json.Marshal(o.Status)
	}
	return nil, fmt.Errorf("observation status %q: want %q or %q", o.Status, Unknown, Unsupported)
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *Obs[T]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s != Unknown && s != Unsupported {
			return fmt.Errorf("observation %q: want a number, %q or %q", s, Unknown, Unsupported)
		}
		*o = Obs[T]{Status: s}
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("observation: %w", err)
	}
	*o = Obs[T]{Value: v}
	return nil
}
