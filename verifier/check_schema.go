package verifier

import (
	"errors"
	"sort"

	"github.com/horizon-runmap/horizon/editions"
)

// maxViolationsPerFile bounds schema.invalid findings for one document; a
// document that is wrong everywhere says so in one line more.
const maxViolationsPerFile = 20

// Check 2: every JSON document is one well-formed object, carries the
// schema its path calls for and version 1, decodes into its Go type, and
// validates against its JSON Schema.
func checkSchemas(v *view, fs *findings) {
	e := v.e
	var paths []string
	for p := range e.docs {
		if p == editions.AttestationFile {
			continue // a DSSE envelope, not a horizon document (check signature reads it)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	unavailable := map[string]bool{}
	if v.opts.Schemas == nil {
		fs.add(IDSchemaUnavailable, "", "", "a schema set", "none",
			"no JSON Schemas were given (--schemas) or embedded; documents were not validated against schemas")
	}
	for _, p := range paths {
		d := e.docs[p]
		if d.parseErr != nil {
			fs.add(IDSchemaMalformed, p, "", "one JSON value", nil, "%s: %v", p, d.parseErr)
			continue
		}
		obj, ok := d.tree.(map[string]any)
		if !ok {
			fs.add(IDSchemaMalformed, p, "", "a JSON object", jsonKind(d.tree), "%s is not a JSON object", p)
			continue
		}
		name, _ := obj["schema"].(string)
		want := kindOfPath(p)
		if !knownSchema(name) {
			fs.add(IDSchemaUnknownName, p, "/schema", orAny(want), obj["schema"],
				"%s does not name a known schema (horizon.manifest, .raw, .config, .claims, .campaign, .contract)", p)
			continue
		}
		if want != "" && name != want {
			fs.add(IDSchemaWrongName, p, "/schema", want, name, "a document at %s must be a %s", p, want)
		}
		if name == editions.SchemaRaw {
			if ver, ok := asInt(obj["version"]); !ok || !editions.RawVersionKnown(int(ver)) {
				fs.add(IDSchemaVersion, p, "/version", editions.RawVersion, obj["version"],
					"this verifier knows versions 1..%d of %s", editions.RawVersion, name)
			}
		} else if ver, ok := asInt(obj["version"]); !ok || ver != editions.Version {
			fs.add(IDSchemaVersion, p, "/version", editions.Version, obj["version"],
				"this verifier knows version %d of %s", editions.Version, name)
		}
		if err := e.decodeErrs[p]; err != nil {
			fs.add(IDSchemaDecode, p, "", name, nil, "%s: %v", p, err)
		}
		if v.opts.Schemas == nil {
			continue
		}
		err := v.opts.Schemas.Validate(name, d.tree)
		switch {
		case err == nil:
		case errors.Is(err, ErrNoSchema):
			if !unavailable[name] {
				unavailable[name] = true
				fs.add(IDSchemaUnavailable, p, "", name, "no schema", "no JSON Schema named %s; %s documents were not validated", name, name)
			}
		default:
			vs := violations(err)
			for i, x := range vs {
				if i == maxViolationsPerFile {
					fs.add(IDSchemaInvalid, p, "", nil, nil, "... and %d more violations", len(vs)-i)
					break
				}
				fs.add(IDSchemaInvalid, p, x.Pointer, name, nil, "%s", x.Message)
			}
		}
	}
}

func knownSchema(name string) bool {
	switch name {
	case editions.SchemaManifest, editions.SchemaRaw, editions.SchemaConfig,
		editions.SchemaClaims, editions.SchemaCampaign, editions.SchemaContract:
		return true
	}
	return false
}

func orAny(s string) any {
	if s == "" {
		return "a horizon.* schema name"
	}
	return s
}

// checkSchemasByPath is the schema check of an edition kind whose every
// document's schema follows from its path (schemaOf: "" for a path the
// kind, named by kind as "an IFEval edition", does not have): each JSON
// document but the manifest (it has its own check) parses, names the
// schema its path calls for and validates against it.
func checkSchemasByPath(v *view, fs *findings, schemaOf func(string) string, kind string) {
	for _, p := range v.e.paths {
		d := v.e.docs[p]
		if d == nil || p == editions.ManifestFile {
			continue
		}
		if d.parseErr != nil {
			fs.add(IDSchemaMalformed, p, "", "one JSON value", nil, "%v", d.parseErr)
			continue
		}
		want := schemaOf(p)
		if want == "" {
			fs.add(IDSchemaUnknownName, p, "", "a document "+kind+" has", p, "%s is not a document of %s", p, kind)
			continue
		}
		if got := d.str("/schema"); got != want {
			fs.add(IDSchemaWrongName, p, "/schema", want, got, "%s must be a %s document", p, want)
			continue
		}
		if v.opts.Schemas == nil {
			fs.add(IDSchemaUnavailable, p, "", nil, nil, "no JSON Schema set: %s was not validated", p)
			continue
		}
		if err := v.opts.Schemas.Validate(want, d.tree); err != nil {
			for _, x := range violations(err) {
				fs.add(IDSchemaInvalid, p, x.Pointer, nil, nil, "%s", x.Message)
			}
		}
	}
}
