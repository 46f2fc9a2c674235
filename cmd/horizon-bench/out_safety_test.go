package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `run --out X --force` replaces editions only: a notes file, a folder of
// other work and a symlink are left exactly as they were, the command exits
// 2 with a one-line message saying what X holds, and no worker runs.
func TestRunOutRefusesWhatIsNotAnEdition(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T, p string)
		says string
	}{
		{"notes file", func(t *testing.T, p string) { mustWrite(t, p, "my notes\n") }, "regular file"},
		{"folder of work", func(t *testing.T, p string) {
			mustWrite(t, filepath.Join(p, "draft.md"), "draft\n")
			mustWrite(t, filepath.Join(p, "sub", "data.csv"), "1,2\n")
		}, "without manifest.json"},
		{"symlink", func(t *testing.T, p string) {
			mustWrite(t, p+".real", "target\n")
			if err := os.Symlink(p+".real", p); err != nil {
				t.Skip(err)
			}
		}, "symlink"},
	}
	for _, c := range cases {
		for _, force := range []bool{false, true} {
			name := c.name
			if force {
				name += " --force"
			}
			t.Run(name, func(t *testing.T) {
				tmp := t.TempDir()
				out := filepath.Join(tmp, "out")
				c.make(t, out)
				before := tree(t, tmp)
				args := []string{"run", miniCampaign, "--contract", miniContract, "--out", out, "--run-dir", filepath.Join(tmp, "run")}
				if force {
					args = append(args, "--force")
				}
				r := run(t, args...)
				if r.code != exitUsage {
					t.Fatalf("exit %d, want %d\n%s", r.code, exitUsage, r.stderr)
				}
				msg := strings.TrimSpace(r.stderr)
				if !strings.Contains(msg, c.says) || strings.Count(msg, "\n") != 0 {
					t.Errorf("stderr should be one line saying %q: %q", c.says, msg)
				}
				after := tree(t, tmp)
				// The run directory may be created; everything else is untouched.
				delete(after, "run")
				for k := range after {
					if strings.HasPrefix(k, "run/") {
						delete(after, k)
					}
				}
				if len(before) != len(after) {
					t.Fatalf("entries changed: %v -> %v", before, after)
				}
				for k, v := range before {
					if after[k] != v {
						t.Errorf("%s changed: %q -> %q", k, v, after[k])
					}
				}
			})
		}
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree maps every path under root to its content (links to their target).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			m[rel] = "-> " + l
		case d.Type().IsRegular():
			b, _ := os.ReadFile(p)
			m[rel] = string(b)
		default:
			m[rel] = "dir"
		}
		return nil
	})
	return m
}
