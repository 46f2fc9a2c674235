package verifier

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// TestArchivedEditionsVerify: every edition kept as an archive under
// results/ (results/<run>/<edition>.tar.xz: an edition re-made on the GPU
// whose raw records, routing traces included, are too large to keep
// unpacked in the tree) unpacks to an edition that verifies with 0 errors,
// its routing traces replayed. So the archived GPU evidence stays checked
// by every CI run, like the committed editions. (Logs kept beside them are
// .tgz, never .tar.xz.)
func TestArchivedEditionsVerify(t *testing.T) {
	archives, err := filepath.Glob(filepath.Join("..", "results", "*", "*.tar.xz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(archives) == 0 {
		t.Skip("results/ holds no edition archive")
	}
	schemas := fixtureSchemas(t)
	for _, arc := range archives {
		name, _ := filepath.Rel(filepath.Join("..", "results"), arc)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ed, err := unpackEdition(arc, dir)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(ed, Options{Schemas: schemas})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed() {
				t.Fatalf("%s:\n%s", arc, findingsText(rep.Findings))
			}
			if rep.Has(IDReplayUnverified) {
				t.Fatalf("%s: its raw records carry no routing traces to replay", arc)
			}
		})
	}
}

// unpackEdition extracts the tar.xz archive into dir and returns the
// directory of the one edition it holds (the one with a manifest.json).
func unpackEdition(archive, dir string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zr, err := xz.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", archive, err)
	}
	tr := tar.NewReader(zr)
	var edition string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", archive, err)
		}
		clean := filepath.Clean(h.Name)
		if filepath.IsAbs(clean) || strings.HasPrefix(clean, "..") {
			return "", fmt.Errorf("%s: entry %q leaves the archive", archive, h.Name)
		}
		p := filepath.Join(dir, clean)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return "", err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return "", err
			}
			out, err := os.Create(p)
			if err != nil {
				return "", err
			}
			_, cerr := io.Copy(out, tr)
			if err := errors.Join(cerr, out.Close()); err != nil {
				return "", fmt.Errorf("%s: %s: %w", archive, h.Name, err)
			}
			if filepath.Base(clean) == "manifest.json" && filepath.Dir(filepath.Dir(clean)) == "." {
				edition = filepath.Dir(p)
			}
		default:
			return "", fmt.Errorf("%s: entry %q is not a file or a directory", archive, h.Name)
		}
	}
	if edition == "" {
		return "", fmt.Errorf("%s holds no edition (no <edition>/manifest.json)", archive)
	}
	return edition, nil
}
