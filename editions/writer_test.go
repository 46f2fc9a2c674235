package editions

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/schemas"
)

// A writer refuses to write a document its own schema rejects.
func TestWriteDocValidates(t *testing.T) {
	dir := t.TempDir()
	good := &ClaimsDoc{Schema: SchemaClaims, Version: Version, Edition: "x", Claims: []Claim{}}
	if err := WriteDoc(filepath.Join(dir, "claims.json"), good); err != nil {
		t.Fatal(err)
	}
	bad := &ClaimsDoc{Schema: SchemaClaims, Version: Version, Edition: "Not An Id", Claims: []Claim{}}
	err := WriteDoc(filepath.Join(dir, "bad.json"), bad)
	if !errors.Is(err, schemas.ErrInvalid) {
		t.Fatalf("invalid document: %v, want schemas.ErrInvalid", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only claims.json", len(ents))
	}
}

func TestObsJSON(t *testing.T) {
	cases := []struct {
		o    Obs[int64]
		json string
	}{
		{Observed[int64](0), `0`},
		{Observed[int64](42), `42`},
		{UnknownObs[int64](), `"UNKNOWN"`},
		{UnsupportedObs[int64](), `"UNSUPPORTED"`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(tc.o)
		if err != nil || string(b) != tc.json {
			t.Errorf("%+v: %s %v, want %s", tc.o, b, err, tc.json)
		}
		var back Obs[int64]
		if err := json.Unmarshal(b, &back); err != nil || back != tc.o {
			t.Errorf("%s reads back as %+v %v", b, back, err)
		}
	}
	var o Obs[int64]
	if err := json.Unmarshal([]byte(`"N/A"`), &o); err == nil {
		t.Error(`"N/A" accepted as an observation`)
	}
}

func TestManifest(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "raw", "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "raw", "a", "block-1.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(dir, "report.md"), []byte("# r\n"), 0o644)
	m, err := BuildManifest(dir, "e", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ReadBuildInfo())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 2 || m.Files[0].Path != "raw/a/block-1.json" || m.Files[1].Path != "report.md" {
		t.Fatalf("files %+v", m.Files)
	}
	if err := WriteDoc(filepath.Join(dir, ManifestFile), &m); err != nil {
		t.Fatal(err)
	}
	if err := CheckManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "report.md"), []byte("# changed\n"), 0o644)
	if err := CheckManifest(dir, m); err == nil {
		t.Fatal("a changed file passed the manifest check")
	}
	os.WriteFile(filepath.Join(dir, "report.md"), []byte("# r\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "extra.txt"), nil, 0o644)
	if err := CheckManifest(dir, m); err == nil {
		t.Fatal("an unlisted file passed the manifest check")
	}
}
