package campaigns

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// checkDestination refuses everything that is not an edition, with or
// without force, and says what it found; it replaces an edition only with
// force.
func TestCheckDestination(t *testing.T) {
	manifest := `{"schema":"horizon.manifest","version":1,"edition":"x","files":[]}`
	cases := []struct {
		name  string
		make  func(t *testing.T, p string)
		force bool
		want  error  // nil: allowed
		says  string // part of the message
	}{
		{"absent", func(*testing.T, string) {}, false, nil, ""},
		{"absent forced", func(*testing.T, string) {}, true, nil, ""},
		{"regular file", writeAt("notes\n"), false, ErrNotEdition, "regular file of 6 bytes"},
		{"regular file forced", writeAt("notes\n"), true, ErrNotEdition, "regular file"},
		{"empty directory forced", mkdirAt(nil), true, ErrNotEdition, "empty directory"},
		{"folder of other work forced", mkdirAt(map[string]string{"thesis.tex": "...", "data.csv": "1,2"}), true, ErrNotEdition, "2 entries without manifest.json"},
		{"foreign manifest forced", mkdirAt(map[string]string{editions.ManifestFile: `{"name":"npm"}`}), true, ErrNotEdition, "not a horizon manifest"},
		{"symlink to a file forced", symlinkAt(writeAt("x")), true, ErrNotEdition, "symlink"},
		{"symlink to an edition forced", symlinkAt(mkdirAt(map[string]string{editions.ManifestFile: manifest})), true, ErrNotEdition, "symlink"},
		{"edition", mkdirAt(map[string]string{editions.ManifestFile: manifest}), false, ErrEditionExists, "pass --force"},
		{"edition forced", mkdirAt(map[string]string{editions.ManifestFile: manifest}), true, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "out")
			c.make(t, p)
			before := snapshot(t, p)
			err := checkDestination(p, c.force)
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
				t.Errorf("message %q should say %q on one line", err, c.says)
			}
			if after := snapshot(t, p); after != before {
				t.Errorf("destination changed: %q -> %q", before, after)
			}
		})
	}
}

func writeAt(content string) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mkdirAt(files map[string]string) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(p, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func symlinkAt(target func(*testing.T, string)) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		tp := p + ".target"
		target(t, tp)
		if err := os.Symlink(tp, p); err != nil {
			t.Skip(err)
		}
	}
}

// snapshot lists a path's entries and contents (not following symlinks).
func snapshot(t *testing.T, p string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		b.WriteString(q + ":" + d.Type().String())
		if d.Type().IsRegular() {
			c, _ := os.ReadFile(q)
			b.Write(c)
		}
		if d.Type()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(q)
			b.WriteString("->" + l)
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}
