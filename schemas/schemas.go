// Package schemas holds the JSON Schemas (draft 2020-12) of every JSON
// document Horizon writes, embedded in the binary, and validates documents
// against them.
//
// Each document names its schema in its "schema" field ("horizon.raw",
// "horizon.config", ...); the schema of "horizon.X" is X.schema.json in this
// directory. Shared definitions (hashes, observations that may be
// "UNKNOWN"/"UNSUPPORTED", build info, model and checkpoint identity) live
// in defs.schema.json. Every object is closed (additionalProperties: false),
// so a field the Go types gain must be added here too: the tests reflect the
// Go types against these files and fail on any drift.
//
// Writers validate their own output before writing it (editions.Marshal);
// the verifier validates what it reads.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

//go:embed *.schema.json
var files embed.FS

// baseURL is the $id prefix of every schema; nothing is fetched from it.
const baseURL = "https://horizon-runmap.github.io/schemas/"

// ErrInvalid marks a document that does not validate.
var ErrInvalid = errors.New("document does not match its schema")

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema // by document schema name
	initErr  error
)

// fileOf maps "horizon.raw" to "raw.schema.json".
func fileOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "horizon.")
	if !ok || rest == "" || rest == "defs" || strings.ContainsAny(rest, "/.") {
		return "", false
	}
	return rest + ".schema.json", true
}

func load() {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	ents, err := fs.ReadDir(files, ".")
	if err != nil {
		initErr = err
		return
	}
	var names []string
	for _, e := range ents {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			initErr = err
			return
		}
		if err := c.AddResource(baseURL+e.Name(), bytes.NewReader(b)); err != nil {
			initErr = fmt.Errorf("schema %s: %w", e.Name(), err)
			return
		}
		if n := strings.TrimSuffix(e.Name(), ".schema.json"); n != "defs" {
			names = append(names, "horizon."+n)
		}
	}
	compiled = map[string]*jsonschema.Schema{}
	for _, n := range names {
		f, _ := fileOf(n)
		s, err := c.Compile(baseURL + f)
		if err != nil {
			initErr = fmt.Errorf("compile schema %s: %w", f, err)
			return
		}
		compiled[n] = s
	}
}

// Names lists the document schemas, sorted ("horizon.artifact", ...).
func Names() []string {
	once.Do(load)
	out := make([]string, 0, len(compiled))
	for n := range compiled {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Source returns the text of a schema file by document schema name, or
// "defs" for the shared definitions.
func Source(name string) ([]byte, error) {
	f := "defs.schema.json"
	if name != "defs" {
		var ok bool
		if f, ok = fileOf(name); !ok {
			return nil, fmt.Errorf("no schema named %q", name)
		}
	}
	return files.ReadFile(f)
}

// Validate validates a JSON document against the schema its "schema" field
// names.
func Validate(doc []byte) error {
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return fmt.Errorf("%w: not a JSON object: %v", ErrInvalid, err)
	}
	if head.Schema == nil {
		return fmt.Errorf("%w: no \"schema\" field", ErrInvalid)
	}
	return ValidateAs(*head.Schema, doc)
}

// ValidateAs validates a JSON document against the named schema.
func ValidateAs(name string, doc []byte) error {
	once.Do(load)
	if initErr != nil {
		return initErr
	}
	s, ok := compiled[name]
	if !ok {
		return fmt.Errorf("%w: unknown schema %q (known: %s)", ErrInvalid, name, strings.Join(Names(), ", "))
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, name, describe(err))
	}
	return nil
}

// describe flattens a validation error into one line per leaf cause.
func describe(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			leaves = append(leaves, fmt.Sprintf("at %s: %s", loc, e.Message))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(leaves, "; ")
}
