package editions_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/schemas"
)

// The committed smoke edition (make edition-smoke) is complete: its
// manifest lists exactly its files with their sizes and hashes, and every
// JSON document validates against its schema.
func TestSmokeEdition(t *testing.T) {
	dir := "smoke-cpu"
	b, err := os.ReadFile(filepath.Join(dir, editions.ManifestFile))
	if err != nil {
		t.Fatalf("the smoke edition is missing (make edition-smoke writes it): %v", err)
	}
	var m editions.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if err := editions.CheckManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range append(m.Files, editions.FileEntry{Path: editions.ManifestFile}) {
		if !strings.HasSuffix(f.Path, ".json") {
			continue
		}
		doc, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate(doc); err != nil {
			t.Errorf("%s: %v", f.Path, err)
		}
		n++
	}
	// campaign, contract, claims, manifest, 4 configs, 12 raw records.
	if n != 20 {
		t.Errorf("%d JSON documents, want 20", n)
	}
}
