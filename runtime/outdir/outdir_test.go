package outdir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckEmptyOrAbsent(t *testing.T) {
	root := t.TempDir()
	full := filepath.Join(root, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		path    string
		wantErr bool
	}{
		{"absent", filepath.Join(root, "nope"), false},
		{"empty dir", empty, false},
		{"non-empty dir", full, true},
		{"a file", file, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckEmptyOrAbsent(c.path)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if c.wantErr && !errors.Is(err, ErrNotEmpty) {
				t.Fatalf("err = %v, want ErrNotEmpty", err)
			}
		})
	}
}

func TestTempSibling(t *testing.T) {
	out := filepath.Join(t.TempDir(), "a", "b", "result")
	tmp, err := TempSibling(out, "result.tmp-")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(tmp) != filepath.Dir(out) || st.Mode().Perm() != 0o755 || !st.IsDir() {
		t.Fatalf("temp %s (%v) is not a 0755 directory beside %s", tmp, st.Mode(), out)
	}
}
