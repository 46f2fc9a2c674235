package schemas_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
	"github.com/horizon-runmap/horizon/schemas"
)

// schemaFile loads one schema file as a generic JSON value.
func schemaFile(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := schemas.Source(name)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// resolver follows $ref within and across the schema files.
type resolver struct {
	t     *testing.T
	files map[string]map[string]any // by file name
}

func (r *resolver) resolve(file string, node map[string]any) (string, map[string]any) {
	for {
		ref, ok := node["$ref"].(string)
		if !ok {
			return file, node
		}
		target, frag, _ := strings.Cut(ref, "#")
		if target != "" {
			file = target
		}
		doc, ok := r.files[file]
		if !ok {
			r.t.Fatalf("$ref %q: no schema file %s", ref, file)
		}
		node = doc
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			if tok == "" {
				continue
			}
			node, ok = node[tok].(map[string]any)
			if !ok {
				r.t.Fatalf("$ref %q does not resolve", ref)
			}
		}
	}
}

// objectBranch picks the object schema of a oneOf (e.g. null | object).
func (r *resolver) objectBranch(file string, node map[string]any) (string, map[string]any) {
	file, node = r.resolve(file, node)
	if alts, ok := node["oneOf"].([]any); ok {
		for _, a := range alts {
			f, n := r.resolve(file, a.(map[string]any))
			if _, ok := n["properties"]; ok {
				return f, n
			}
		}
	}
	return file, node
}

var (
	rawMessage = reflect.TypeOf(json.RawMessage{})
	obsInt     = reflect.TypeOf(editions.Obs[int64]{})
	obsFloat   = reflect.TypeOf(editions.Obs[float64]{})
)

// check compares a Go struct type with an object schema: the same property
// names as the JSON tags, closed (additionalProperties false), every
// non-omitempty field required; then recurses. raw maps a RawMessage field
// path to the Go type it holds.
func (r *resolver) check(path string, typ reflect.Type, file string, node map[string]any, raw map[string]reflect.Type) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == rawMessage {
		inner, ok := raw[path]
		if !ok {
			return // free-form (e.g. an artifact's config.json)
		}
		typ = inner
	}
	switch typ.Kind() {
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Struct || typ.Elem().Kind() == reflect.Pointer {
			file, node = r.resolve(file, node)
			items, ok := node["items"].(map[string]any)
			if !ok {
				r.t.Errorf("%s: array of %s has no items schema", path, typ.Elem())
				return
			}
			r.check(path+"[]", typ.Elem(), file, items, raw)
		}
		return
	case reflect.Struct:
	default:
		return
	}
	if typ == obsInt || typ == obsFloat {
		return
	}
	file, node = r.objectBranch(file, node)
	props, ok := node["properties"].(map[string]any)
	if !ok {
		r.t.Errorf("%s (%s): schema is not an object with properties", path, typ)
		return
	}
	if node["additionalProperties"] != false {
		r.t.Errorf("%s (%s): schema object is open; want additionalProperties false", path, typ)
	}
	required := map[string]bool{}
	reqList, _ := node["required"].([]any)
	for _, v := range reqList {
		required[v.(string)] = true
	}
	var goNames []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		goNames = append(goNames, name)
		sub, ok := props[name].(map[string]any)
		if !ok {
			r.t.Errorf("%s: Go field %s.%s (json %q) is not in the schema", path, typ.Name(), f.Name, name)
			continue
		}
		if !strings.Contains(opts, "omitempty") && !required[name] {
			r.t.Errorf("%s: json %q is always written but the schema does not require it", path, name)
		}
		r.check(path+"/"+name, f.Type, file, sub, raw)
	}
	for name := range props {
		if !slices.Contains(goNames, name) {
			r.t.Errorf("%s: schema property %q has no Go field in %s", path, name, typ)
		}
	}
	for name := range required {
		if !slices.Contains(goNames, name) {
			r.t.Errorf("%s: schema requires %q, which %s does not have", path, name, typ)
		}
	}
}

// Every Go document type and its schema list the same fields.
func TestSchemasMatchGoTypes(t *testing.T) {
	r := &resolver{t: t, files: map[string]map[string]any{"defs.schema.json": schemaFile(t, "defs")}}
	for _, n := range schemas.Names() {
		f := strings.TrimPrefix(n, "horizon.") + ".schema.json"
		r.files[f] = schemaFile(t, n)
	}
	cases := []struct {
		schema string
		typ    any
		raw    map[string]reflect.Type
	}{
		{"horizon.manifest", editions.Manifest{}, nil},
		{"horizon.raw", editions.RawRecord{}, nil},
		{"horizon.config", editions.ConfigDoc{}, nil},
		{"horizon.claims", editions.ClaimsDoc{}, nil},
		{"horizon.contract", editions.ContractDoc{}, map[string]reflect.Type{"/contract": reflect.TypeOf(contracts.Contract{})}},
		{"horizon.campaign", editions.CampaignDoc{}, map[string]reflect.Type{"/campaign": reflect.TypeOf(campaigns.Campaign{})}},
		{"horizon.synth", model.SynthInfo{}, nil},
		{"horizon.artifact", qpack.ArtifactMeta{}, map[string]reflect.Type{"/identity/source/synthetic": reflect.TypeOf(model.SynthInfo{})}},
		{"horizon.reproduction", editions.ReproductionDoc{}, nil},
		{"horizon.ifeval-contract", editions.ContractDoc{}, map[string]reflect.Type{"/contract": reflect.TypeOf(contracts.IFEval{})}},
		{"horizon.ifeval-shard", editions.IFEvalShard{}, nil},
		{"horizon.ifeval-config", editions.IFEvalConfig{}, nil},
		{"horizon.ifeval-claims", editions.IFEvalClaims{}, nil},
		{"horizon.fidelity-contract", editions.ContractDoc{}, map[string]reflect.Type{"/contract": reflect.TypeOf(contracts.Fidelity{})}},
		{"horizon.fidelity-shard", editions.FidelityShard{}, nil},
		{"horizon.fidelity-pair", editions.FidelityPair{}, nil},
		{"horizon.fidelity-claims", editions.FidelityClaims{}, nil},
	}
	var covered []string
	for _, tc := range cases {
		covered = append(covered, tc.schema)
		f := strings.TrimPrefix(tc.schema, "horizon.") + ".schema.json"
		r.check("", reflect.TypeOf(tc.typ), f, r.files[f], tc.raw)
	}
	sort.Strings(covered)
	if !slices.Equal(covered, schemas.Names()) {
		t.Errorf("schemas %v, Go types checked for %v", schemas.Names(), covered)
	}
}

// A real synthetic checkpoint and artifact validate.
func TestArtifactDocuments(t *testing.T) {
	dir := t.TempDir()
	ckpt, art := filepath.Join(dir, "ckpt"), filepath.Join(dir, "art")
	if _, err := model.Synthesize(model.SynthOptions{Arch: "qwen2moe-tiny", Seed: 3, OutDir: ckpt}); err != nil {
		t.Fatal(err)
	}
	if _, err := qpack.Prepare(qpack.PrepareOptions{Checkpoint: ckpt, Out: art}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(ckpt, model.SynthInfoName), filepath.Join(art, qpack.MetaFile)} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate(b); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]string{
		"no schema field":    `{"version": 1}`,
		"unknown schema":     `{"schema": "horizon.nope", "version": 1}`,
		"extra property":     `{"schema": "horizon.claims", "version": 1, "edition": "x", "claims": [], "extra": 1}`,
		"zero for UNKNOWN":   `{"schema": "horizon.claims", "version": 2, "edition": "x", "claims": []}`,
		"not JSON":           `{`,
		"edition not an id":  `{"schema": "horizon.claims", "version": 1, "edition": "Bad Name", "claims": []}`,
		"observation string": `{"schema": "horizon.manifest", "version": 1, "edition": "x", "created_at": "now", "tool": {}, "files": []}`,
	}
	for name, doc := range cases {
		if err := schemas.Validate([]byte(doc)); !errors.Is(err, schemas.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := schemas.Validate([]byte(`{"schema": "horizon.claims", "version": 1, "edition": "x", "claims": []}`)); err != nil {
		t.Errorf("minimal claims: %v", err)
	}
}
