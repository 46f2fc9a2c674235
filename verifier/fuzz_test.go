package verifier

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// Fuzz targets for the loaders of the three documents an attacker (or a
// broken writer) is most likely to hand the verifier. Each input goes
// through the loader and then through a whole verification, with the input
// in place of that document of a valid edition: neither may panic, and no
// check may crash (an internal.panic finding fails the target, so the
// verifier's own recover cannot hide a bug). Seed corpora live under
// testdata/fuzz/<Target>/.

func fuzzDocument(f *testing.F, rel string, load func([]byte) error) {
	dir := newFixture(f)
	valid, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"schema": "horizon.raw", "version": 1, "requests": [{"n": -1, "token_ns": [], "token_ids": [1]}]}`))
	f.Add(valid[:len(valid)/2])
	schemas := fixtureSchemas(f)
	path := filepath.Join(dir, filepath.FromSlash(rel))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = load(b) // must not panic
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(dir, Options{Schemas: schemas})
		if err != nil && !rep.Unreadable() {
			t.Fatalf("Verify error without an unreadable report: %v", err)
		}
		for _, fd := range rep.Findings {
			if fd.ID == IDInternalPanic {
				t.Fatalf("a check crashed on this input: %s", fd.Message)
			}
		}
	})
}

func FuzzLoadManifest(f *testing.F) {
	fuzzDocument(f, editions.ManifestFile, func(b []byte) error { _, err := LoadManifest(b); return err })
}

func FuzzLoadRaw(f *testing.F) {
	fuzzDocument(f, editions.RawPath("tiny-c4", 1), func(b []byte) error { _, err := LoadRaw(b); return err })
}

func FuzzLoadClaims(f *testing.F) {
	fuzzDocument(f, editions.ClaimsFile, func(b []byte) error { _, err := LoadClaims(b); return err })
}

// FuzzCanonicalHash holds the verifier's canonical JSON to package
// contracts' on any JSON input.
func FuzzCanonicalHash(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseTree(b); err != nil {
			return
		}
		compareCanonical(t, b)
	})
}
