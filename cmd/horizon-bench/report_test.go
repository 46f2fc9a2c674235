package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var smokeCPU = filepath.Join("..", "..", "editions", "smoke-cpu")

// exportGolden is package report's golden of the cpu smoke edition's
// results table in format (campaigns/report/testdata/export_smoke-cpu.*,
// rewritten there with -update): the command must print exactly it.
func exportGolden(t *testing.T, format string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "campaigns", "report", "testdata", "export_smoke-cpu."+format))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReportFormats: each -o prints package report's golden for the cpu
// smoke edition, md by default, with flags before or after the edition.
func TestReportFormats(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		format string
	}{
		{"default is md", []string{"report", smokeCPU}, "md"},
		{"md", []string{"report", smokeCPU, "-o", "md"}, "md"},
		{"csv", []string{"report", smokeCPU, "-o", "csv"}, "csv"},
		{"json", []string{"report", smokeCPU, "--output", "json"}, "json"},
		{"jsonl", []string{"report", smokeCPU, "-o=jsonl"}, "jsonl"},
		{"flag before the edition", []string{"report", "-o", "csv", smokeCPU}, "csv"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if want := exportGolden(t, c.format); r.stdout != want {
				t.Errorf("stdout differs from the %s golden:\n%s", c.format, r.stdout)
			}
		})
	}
}

// TestReportUsageErrors: every bad invocation exits 2 with one line on
// stderr naming the problem, and prints nothing on stdout.
func TestReportUsageErrors(t *testing.T) {
	tmp := t.TempDir()
	notes := filepath.Join(tmp, "notes.txt")
	mustWrite(t, notes, "not an edition\n")
	fakeManifest := filepath.Join(tmp, "fake")
	mustWrite(t, filepath.Join(fakeManifest, "manifest.json"), `{"schema": "something.else"}`)
	existing := filepath.Join(tmp, "table.md")
	mustWrite(t, existing, "keep me\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no edition", []string{"report"}, "which edition? e.g. horizon-bench report editions/smoke-cpu -o csv"},
		{"no such directory", []string{"report", filepath.Join(tmp, "none")}, "is not an edition (no such directory)"},
		{"a file", []string{"report", notes}, "is not an edition (not a directory)"},
		{"a directory without manifest", []string{"report", tmp}, "is not an edition (no manifest.json)"},
		{"a manifest of something else", []string{"report", fakeManifest}, "manifest.json is not a horizon manifest"},
		{"bad -o", []string{"report", smokeCPU, "-o", "xml"}, `-o "xml": want one of md, csv, json, jsonl`},
		{"bad -o before the edition", []string{"report", "-o", "yaml", smokeCPU}, `-o "yaml"`},
		{"two editions", []string{"report", smokeCPU, smokeCPU}, "takes one edition directory"},
		{"unknown flag", []string{"report", smokeCPU, "--bogus"}, "flag provided but not defined: -bogus"},
		{"--force without --out", []string{"report", smokeCPU, "--force"}, "--force replaces an --out FILE"},
		{"--out exists", []string{"report", smokeCPU, "--out", existing}, "exists: give --force to replace it"},
		{"--out is a directory", []string{"report", smokeCPU, "--out", tmp, "--force"}, "is not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.args...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d (stderr %q)", r.code, exitUsage, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("stderr %q, want one line mentioning %q", r.stderr, c.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me\n" {
		t.Errorf("the refused --out file was changed: %q", b)
	}
}

// TestReportDamagedEdition: an edition whose documents do not load is a
// failure (exit 1) that points to horizon-verify, not a usage error.
func TestReportDamagedEdition(t *testing.T) {
	copyDocs := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "ed")
		for _, f := range []string{"manifest.json", "campaign.json", "contract.json"} {
			b, err := os.ReadFile(filepath.Join(smokeCPU, f))
			must(t, err)
			mustWrite(t, filepath.Join(dir, f), string(b))
		}
		return dir
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"no configs", func(t *testing.T, dir string) {}, "olmoe-tiny-c16.json"},
		{"a config that is not an object", func(t *testing.T, dir string) {
			for _, id := range []string{"olmoe-tiny-c16", "olmoe-tiny-c6", "qwen2moe-tiny-c16", "qwen2moe-tiny-c8"} {
				mustWrite(t, filepath.Join(dir, "configs", id+".json"), "[]")
			}
		}, "configs/olmoe-tiny-c16.json: configuration: document is not a JSON object"},
		{"no campaign", func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, "campaign.json"))) }, "campaign.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDocs(t)
			c.damage(t, dir)
			r := run(t, "report", dir)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "horizon-verify") {
				t.Fatalf("exit %d, stderr %q; want 1 mentioning %q and horizon-verify", r.code, r.stderr, c.want)
			}
		})
	}
}

// TestReportOut: --out writes the whole table and nothing else (no
// temporary file left), refuses to overwrite without --force, replaces
// with it, and writes nothing when the invocation is refused.
func TestReportOut(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "smoke.csv")
	steps := []struct {
		name    string
		args    []string
		code    int
		content string // out's content afterwards
	}{
		{"writes a new file", []string{"-o", "csv", "--out", out}, 0, exportGolden(t, "csv")},
		{"refuses to overwrite", []string{"-o", "json", "--out", out}, exitUsage, exportGolden(t, "csv")},
		{"refuses a bad format before anything", []string{"-o", "xml", "--out", out, "--force"}, exitUsage, exportGolden(t, "csv")},
		{"replaces with --force", []string{"-o", "json", "--out", out, "--force"}, 0, exportGolden(t, "json")},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := run(t, append([]string{"report", smokeCPU}, s.args...)...)
			if r.code != s.code || r.stdout != "" {
				t.Fatalf("exit %d (stderr %q), stdout %q; want %d and nothing on stdout", r.code, r.stderr, r.stdout, s.code)
			}
			b, err := os.ReadFile(out)
			must(t, err)
			if string(b) != s.content {
				t.Errorf("%s holds:\n%s", out, b)
			}
			onlyEntries(t, dir, "smoke.csv")
		})
	}
	t.Run("missing parent directory", func(t *testing.T) {
		parent := t.TempDir()
		r := run(t, "report", smokeCPU, "--out", filepath.Join(parent, "sub", "t.md"))
		if r.code != 1 || !strings.Contains(r.stderr, "--out") {
			t.Fatalf("exit %d, stderr %q; want 1 naming --out", r.code, r.stderr)
		}
		onlyEntries(t, parent)
	})
}

// TestReportHelp: --help teaches with the example.
func TestReportHelp(t *testing.T) {
	r := run(t, "report", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "horizon-bench report editions/smoke-cpu -o csv") {
		t.Fatalf("exit %d; help does not show the example:\n%s", r.code, r.stdout)
	}
	r = run(t, "--help")
	if !strings.Contains(r.stdout, "report") {
		t.Errorf("the app's help does not list report:\n%s", r.stdout)
	}
}
