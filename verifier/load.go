package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/horizon-runmap/horizon/editions"
)

// The loaders turn the bytes of one edition document into its Go type from
// package editions. They accept exactly one JSON object (no trailing data)
// and return an error for anything else; they never panic, whatever the
// input (FuzzLoadManifest, FuzzLoadRaw and FuzzLoadClaims hold them to that).
// Unknown members are not an error here: the JSON Schemas decide what a
// document may hold, the loaders only need the fields the checks read.

// ErrNotObject is returned for a document that is valid JSON but not an
// object (null, an array, a number...).
var ErrNotObject = errors.New("document is not a JSON object")

// LoadManifest decodes manifest.json.
func LoadManifest(b []byte) (*editions.Manifest, error) {
	var m editions.Manifest
	if err := decodeObject(b, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return &m, nil
}

// LoadRaw decodes one raw worker record (raw/<config>/block-<k>.json).
func LoadRaw(b []byte) (*editions.RawRecord, error) {
	var r editions.RawRecord
	if err := decodeObject(b, &r); err != nil {
		return nil, fmt.Errorf("raw record: %w", err)
	}
	return &r, nil
}

// LoadConfig decodes one configuration aggregate (configs/<config>.json).
func LoadConfig(b []byte) (*editions.ConfigDoc, error) {
	var c editions.ConfigDoc
	if err := decodeObject(b, &c); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return &c, nil
}

// LoadClaims decodes claims.json.
func LoadClaims(b []byte) (*editions.ClaimsDoc, error) {
	var c editions.ClaimsDoc
	if err := decodeObject(b, &c); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	return &c, nil
}

func decodeObject(b []byte, v any) error {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		if json.Valid(b) {
			return ErrNotObject
		}
		return errors.New("not well-formed JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	return expectEOF(dec)
}

// parseTree decodes b into the generic form with numbers kept as
// json.Number, so that a value read through a JSON pointer is the exact
// number written.
func parseTree(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if err := expectEOF(dec); err != nil {
		return nil, err
	}
	return v, nil
}

func expectEOF(dec *json.Decoder) error {
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case err == io.EOF:
		return nil
	case err != nil:
		return fmt.Errorf("after the document: %w", err)
	}
	return errors.New("trailing data after the JSON document")
}
