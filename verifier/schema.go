package verifier

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/horizon-runmap/horizon/schemas"
)

// SchemaSet validates an edition document against the JSON Schema its
// "schema" member names ("horizon.raw", "horizon.config", ...). doc is the
// generic decoded form, numbers as json.Number. Validate returns nil for a
// valid document, an error wrapping ErrNoSchema when the set has no schema
// of that name, and otherwise the violations: a *jsonschema.ValidationError,
// a SchemaViolations, or any other error (reported as one violation).
type SchemaSet interface {
	Validate(schemaName string, doc any) error
}

// ErrNoSchema is returned by a SchemaSet that has no schema of a name.
var ErrNoSchema = errors.New("no schema of that name")

// SchemaFunc adapts a validate function to SchemaSet.
type SchemaFunc func(schemaName string, doc any) error

// Validate implements SchemaSet.
func (f SchemaFunc) Validate(schemaName string, doc any) error { return f(schemaName, doc) }

// SchemaViolation is one place where a document breaks its schema.
type SchemaViolation struct {
	Pointer string // RFC 6901, into the document
	Message string
}

// SchemaViolations is a list of violations; it is an error.
type SchemaViolations []SchemaViolation

func (v SchemaViolations) Error() string {
	var parts []string
	for _, x := range v {
		parts = append(parts, x.Pointer+": "+x.Message)
	}
	return strings.Join(parts, "; ")
}

// violations flattens a validation error into leaf violations.
func violations(err error) []SchemaViolation {
	var sv SchemaViolations
	if errors.As(err, &sv) {
		return sv
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		var out []SchemaViolation
		var walk func(*jsonschema.ValidationError)
		walk = func(e *jsonschema.ValidationError) {
			if len(e.Causes) == 0 {
				out = append(out, SchemaViolation{Pointer: e.InstanceLocation, Message: e.Message})
				return
			}
			for _, c := range e.Causes {
				walk(c)
			}
		}
		walk(ve)
		return out
	}
	return []SchemaViolation{{Message: err.Error()}}
}

// compiledSchemas is a SchemaSet compiled with jsonschema/v5.
type compiledSchemas struct {
	byName map[string]*jsonschema.Schema
}

// schemaSource is one schema file: its base name and text.
type schemaSource struct {
	file string // e.g. "raw.schema.json"
	data []byte
}

// EmbeddedSchemas compiles the schemas embedded in package schemas (the
// ones the writers validate against) into a SchemaSet of the verifier's own,
// which reports every violation with its JSON pointer.
func EmbeddedSchemas() (SchemaSet, error) {
	var srcs []schemaSource
	for _, name := range append(schemas.Names(), "defs") {
		b, err := schemas.Source(name)
		if err != nil {
			return nil, fmt.Errorf("embedded schema %s: %w", name, err)
		}
		srcs = append(srcs, schemaSource{file: strings.TrimPrefix(name, "horizon.") + ".schema.json", data: b})
	}
	return compileSchemas("embedded", srcs)
}

// LoadSchemaDir compiles every *.json file of dir as a draft 2020-12 JSON
// Schema (a file without "$schema" is taken as 2020-12, and "format" is
// asserted, as package schemas does). A document's "schema" member
// "horizon.raw" finds the file raw.schema.json, raw.json,
// horizon.raw.schema.json or horizon.raw.json. Schemas $ref each other by
// $id or by file name; nothing outside dir is ever loaded.
func LoadSchemaDir(dir string) (SchemaSet, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("schemas: no *.json files in %s", dir)
	}
	sort.Strings(files)
	var srcs []schemaSource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, schemaSource{file: filepath.Base(f), data: data})
	}
	return compileSchemas(dir, srcs)
}

// schemaBase is the URL schema files without an absolute $id live under;
// nothing is ever fetched from it.
const schemaBase = "https://horizon-verify.invalid/schemas/"

func compileSchemas(origin string, srcs []schemaSource) (SchemaSet, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("schemas: refusing to load %s (only the schemas of %s are used)", s, origin)
	}
	type unit struct{ url, file string }
	var units []unit
	for _, src := range srcs {
		tree, err := parseTree(src.data)
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", src.file, err)
		}
		u := schemaBase + url.PathEscape(src.file)
		if m, ok := tree.(map[string]any); ok {
			id, _ := m["$id"].(string)
			id, _, _ = strings.Cut(id, "#") // resource URLs carry no fragment
			if pu, err := url.Parse(id); err == nil && pu.IsAbs() {
				u = id
			}
		}
		if err := c.AddResource(u, strings.NewReader(string(src.data))); err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", src.file, err)
		}
		units = append(units, unit{u, src.file})
	}
	s := &compiledSchemas{byName: map[string]*jsonschema.Schema{}}
	for _, u := range units {
		sch, err := c.Compile(u.url)
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", u.file, err)
		}
		for _, name := range schemaNames(u.file) {
			if _, dup := s.byName[name]; !dup {
				s.byName[name] = sch
			}
		}
	}
	return s, nil
}

// schemaNames are the document schema names a schema file answers to.
func schemaNames(file string) []string {
	base := strings.TrimSuffix(file, ".json")
	base = strings.TrimSuffix(base, ".schema")
	if strings.HasPrefix(base, "horizon.") {
		return []string{base}
	}
	return []string{"horizon." + base}
}

func (s *compiledSchemas) Validate(name string, doc any) error {
	sch, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrNoSchema, name)
	}
	return sch.Validate(doc)
}
