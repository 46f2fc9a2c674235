package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const editionsDir = "../../editions/"

// contractCopy copies the documents compare reads of smoke-cpu into a
// temporary edition whose raw records name another contract hash.
func contractCopy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "smoke-cpu-other")
	src := editionsDir + "smoke-cpu"
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		if rel != "manifest.json" && !strings.HasPrefix(rel, "configs/") && !strings.HasPrefix(rel, "raw/") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "raw/") {
			var doc map[string]any
			if err := json.Unmarshal(b, &doc); err != nil {
				return err
			}
			doc["contract"].(map[string]any)["sha256"] = strings.Repeat("0", 64)
			if b, err = json.Marshal(doc); err != nil {
				return err
			}
		}
		out := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestCompareExitCodes runs the binary: usage errors exit 2 with one line
// on stderr, an unreadable edition exits 1, a comparison exits 0.
func TestCompareExitCodes(t *testing.T) {
	full, abl, smoke := editionsDir+"full-residency-v1", editionsDir+"residency-ablation", editionsDir+"smoke-cpu"
	other := contractCopy(t)
	broken := filepath.Join(t.TempDir(), "broken")
	must(t, os.CopyFS(broken, os.DirFS(smoke)))
	must(t, os.Remove(filepath.Join(broken, "raw", "olmoe-tiny-c6", "block-2.json")))
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string // a substring of the one stderr line ("" for none)
		stdout string // a substring of stdout
	}{
		{"md by default", []string{full, abl}, 0, "", "| olmoe-0924-c64-grouped | full-residency-v1 | residency-ablation |"},
		{"csv after the editions", []string{full, abl, "-o", "csv"}, 0, "", "config,edition_a,edition_b,"},
		{"json before the editions", []string{"-o", "json", smoke, smoke}, 0, "", `"rule": "pooled decode is faster`},
		{"three editions", []string{full, abl, full, "--output", "csv"}, 0, "", "olmoe-0924-c64-grouped,full-residency-v1,full-residency-v1,"},
		{"help teaches", []string{"--help"}, 0, "", "horizon-bench compare editions/full-residency-v1 editions/residency-ablation -o csv"},
		{"help after an edition", []string{full, "--help"}, 0, "", "--any-contract"},
		{"no editions", nil, exitUsage, "want two or more edition directories, got 0", ""},
		{"one edition", []string{full}, exitUsage, "want two or more edition directories, got 1", ""},
		{"bad -o", []string{full, abl, "-o", "html"}, exitUsage, `-o "html": want md, csv, json`, ""},
		{"unknown flag", []string{full, abl, "--bogus"}, exitUsage, "flag provided but not defined: -bogus", ""},
		{"missing directory", []string{full, filepath.Join(t.TempDir(), "none")}, exitUsage, "not an edition directory", ""},
		{"not an edition", []string{full, t.TempDir()}, exitUsage, "no manifest.json", ""},
		{"other contract", []string{smoke, other}, exitUsage, "editions of different contracts", ""},
		{"any contract", []string{smoke, other, "--any-contract"}, 0, "", "- contract: PERF-REAL-v1 sha256 1b5fae0c"},
		{"unreadable edition", []string{smoke, broken}, 1, "block-2.json", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkExit(t, run(t, append([]string{"compare"}, c.args...)...), c.code, c.stderr, c.stdout)
		})
	}
}

// TestCompareGolden: the README's comparison of the two committed H200
// editions, in every format (refresh with -update, the package's one
// golden flag, declared in simulate_test.go).
func TestCompareGolden(t *testing.T) {
	for _, format := range []string{"md", "csv", "json"} {
		t.Run(format, func(t *testing.T) {
			r := run(t, "compare", editionsDir+"full-residency-v1", editionsDir+"residency-ablation", "-o", format)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			golden := filepath.Join("testdata", "compare."+format)
			if *updateSimulate {
				must(t, os.WriteFile(golden, []byte(r.stdout), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd/horizon-bench/ -run TestCompareGolden -update)", err)
			}
			if r.stdout != string(want) {
				t.Errorf("output differs from %s (run go test ./cmd/horizon-bench/ -run TestCompareGolden -update after checking the change):\n%s", golden, r.stdout)
			}
		})
	}
}
