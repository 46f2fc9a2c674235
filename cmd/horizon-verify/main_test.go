package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/verifier"
)

// Black-box tests: they build the real binary and run it on the committed
// fixture edition (verifier/testdata/editions/fixture-cpu) and on tampered
// copies, checking exit codes and both output formats.

var bin string

const fixture = "../../verifier/testdata/editions/fixture-cpu"

// fixtureContract is the fixture's (unreleased, cut-down) contract, which
// it verifies clean against only when named (--contract).
const fixtureContract = "../../verifier/testdata/editions/fixture-cpu-contract.yaml"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "horizon-verify-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "horizon-verify")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func runBin(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// copyFixture copies the fixture edition into a temporary directory.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fixture-cpu")
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
		code int
		want []string // substrings of stdout+stderr
	}{
		{"valid edition", func(t *testing.T) []string { return []string{"--contract", fixtureContract, copyFixture(t)} }, exitPass,
			[]string{"PASS: 0 errors, 3 hints (exit 0)", "binding.contract-explicit", "replay.unverified", "recompute    PASS"}},
		{"unreleased contract not named", func(t *testing.T) []string { return []string{copyFixture(t)} }, exitFail,
			[]string{"binding.contract-unpinned", "FAIL: 1 error"}},
		{"flags after the directory", func(t *testing.T) []string { return []string{copyFixture(t), "--json", "--contract", fixtureContract} }, exitPass,
			[]string{`"message_type":"summary"`, `"exit_code":0`}},
		{"schemas from a directory", func(t *testing.T) []string {
			return []string{"--schemas", "../../schemas", "--contract", fixtureContract, copyFixture(t)}
		}, exitPass, []string{"schema       PASS"}},
		{"tampered file", func(t *testing.T) []string {
			dir := copyFixture(t)
			f, err := os.OpenFile(filepath.Join(dir, "report.md"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("one more line\n")
			f.Close()
			return []string{"--contract", fixtureContract, dir}
		}, exitFail, []string{"manifest.hash-mismatch", "manifest.size-mismatch", "report.md", "FAIL: 2 errors"}},
		{"version", func(*testing.T) []string { return []string{"--version"} }, exitPass, []string{"horizon-verify", "vcs revision", "devices: cpu only"}},
		{"no arguments", func(*testing.T) []string { return nil }, exitUsage, []string{"want exactly one edition directory"}},
		{"two directories", func(t *testing.T) []string { return []string{fixture, fixture} }, exitUsage, []string{"got 2 arguments"}},
		{"unknown flag", func(t *testing.T) []string { return []string{"--frobnicate", fixture} }, exitUsage, []string{"frobnicate"}},
		{"bad schemas directory", func(t *testing.T) []string { return []string{"--schemas", t.TempDir(), fixture} }, exitUsage,
			[]string{"no *.json files"}},
		{"missing --trusted-key file", func(t *testing.T) []string {
			return []string{fixture, "--trusted-key", filepath.Join(t.TempDir(), "nope.pub")}
		}, exitUsage, []string{"--trusted-key", "no such file"}},
		{"missing --contract file", func(t *testing.T) []string { return []string{"--contract", "nope.yaml", fixture} }, exitUsage,
			[]string{"--contract nope.yaml"}},
		{"--campaign names a directory", func(t *testing.T) []string { return []string{"--campaign", t.TempDir(), fixture} }, exitUsage,
			[]string{"is not a regular file"}},
		{"--reproduction names a file", func(t *testing.T) []string { return []string{"--reproduction", "main.go", fixture} }, exitUsage,
			[]string{"is not a directory"}},
		{"no such edition", func(t *testing.T) []string { return []string{filepath.Join(t.TempDir(), "nope")} }, exitUnreadable,
			[]string{"edition.unreadable", "UNREADABLE"}},
		{"no manifest", func(t *testing.T) []string {
			dir := copyFixture(t)
			os.Remove(filepath.Join(dir, "manifest.json"))
			return []string{dir}
		}, exitUnreadable, []string{"has no readable manifest.json"}},
		{"help", func(*testing.T) []string { return []string{"--help"} }, exitPass,
			[]string{"EXIT CODES", "0  the edition passed", "1  at least one error", "2  usage", "3  the edition cannot be read"}},
		{"list ids", func(*testing.T) []string { return []string{"--list-ids"} }, exitPass,
			[]string{"recompute.pooled-decode", "consistency.token-stream", "invariants.unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, tc.args(t)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout+r.stderr, w) {
					t.Errorf("output lacks %q\nstdout:\n%s\nstderr:\n%s", w, r.stdout, r.stderr)
				}
			}
		})
	}
}

// TestJSONStream checks the --json format: one object per line, findings
// first, one summary last whose exit_code is the process's.
func TestJSONStream(t *testing.T) {
	dir := copyFixture(t)
	os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644)
	r := runBin(t, "--json", dir)
	if r.code != exitFail {
		t.Fatalf("exit %d, want %d: %s", r.code, exitFail, r.stderr)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) < 2 {
		t.Fatalf("want findings and a summary, got %d lines", len(lines))
	}
	sum := lines[len(lines)-1]
	if sum["message_type"] != "summary" || sum["exit_code"] != float64(exitFail) || sum["result"] != "fail" {
		t.Fatalf("summary = %v", sum)
	}
	found := false
	for _, l := range lines[:len(lines)-1] {
		if l["message_type"] != "finding" {
			t.Fatalf("not a finding: %v", l)
		}
		for _, k := range []string{"check", "id", "severity", "message"} {
			if _, ok := l[k]; !ok {
				t.Errorf("finding without %s: %v", k, l)
			}
		}
		if l["id"] == "manifest.unlisted-file" && l["file"] == "stray.txt" {
			found = true
		}
	}
	if !found {
		t.Errorf("no manifest.unlisted-file finding for stray.txt:\n%s", r.stdout)
	}
	if got := int(sum["errors"].(float64) + sum["hints"].(float64)); got != len(lines)-1 {
		t.Errorf("summary counts %d findings, stream has %d", got, len(lines)-1)
	}
}

func TestInterspersed(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"hv dir --json", "hv --json -- dir"},
		{"hv dir --schemas s --json", "hv --schemas s --json -- dir"},
		{"hv --schemas=s dir", "hv --schemas=s -- dir"},
		{"hv -- --json", "hv -- --json"},
		{"hv --help", "hv --help"},
	} {
		if got := strings.Join(interspersed(strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("interspersed(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The help counts the checks it lists, and lists the checks the verifier
// runs (verifier.RunOrder), each once, in order, each with a description.
func TestHelpCountsItsChecks(t *testing.T) {
	r := runBin(t, "--help")
	if r.code != exitPass {
		t.Fatalf("--help: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	head := regexp.MustCompile(`runs these (\d+) checks, in this order:$`)
	entry := regexp.MustCompile(`^ +([a-z]+) {2,}\S`) // "   manifest      every listed ..."
	start := -1
	var want int
	for i, l := range lines {
		if m := head.FindStringSubmatch(l); m != nil {
			start, want = i, atoi(t, m[1])
			break
		}
	}
	if start < 0 {
		t.Fatalf("--help has no \"runs these N checks\" line:\n%s", r.stdout)
	}
	var listed []string
	for _, l := range lines[start+2:] {
		if strings.TrimSpace(l) == "" {
			break // the list ends at the first blank line
		}
		if m := entry.FindStringSubmatch(l); m != nil {
			listed = append(listed, m[1])
		}
	}
	if len(listed) != want {
		t.Errorf("--help says %d checks and lists %d: %v", want, len(listed), listed)
	}
	if run := verifier.RunOrder(); !slices.Equal(listed, run) {
		t.Errorf("--help lists %v, the verifier runs %v", listed, run)
	}
	for name := range checkHelp {
		if !slices.Contains(verifier.RunOrder(), name) {
			t.Errorf("checkHelp describes %q, which the verifier does not run", name)
		}
	}
	if strings.Contains(r.stdout, "undescribed") {
		t.Errorf("a check has no description in checkHelp:\n%s", r.stdout)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
