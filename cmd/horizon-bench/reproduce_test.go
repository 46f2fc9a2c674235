package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad reproduce invocations exit 2 with one clear message and write
// nothing: no reproduction directory, nothing in an occupied one.
func TestReproduceUsage(t *testing.T) {
	edition, err := filepath.Abs("../../editions/smoke-cpu")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	occupied := filepath.Join(tmp, "occupied")
	os.MkdirAll(occupied, 0o755)
	os.WriteFile(filepath.Join(occupied, "notes.txt"), []byte("mine"), 0o644)
	out := filepath.Join(tmp, "repro")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown configuration", []string{edition, "--configs", "nope", "--out", out}, `no configuration "nope"`},
		{"block out of range", []string{edition, "--blocks", "4", "--out", out}, "block 4"},
		{"block not a number", []string{edition, "--blocks", "one", "--out", out}, "not a block number"},
		{"no --out", []string{edition, "--configs", "olmoe-tiny-c6"}, "--out DIR is required"},
		{"no edition", []string{}, "which edition?"},
		{"not an edition", []string{tmp, "--out", out}, "is not an edition"},
		{"occupied --out, even with --force", []string{edition, "--out", occupied, "--force"}, "notes.txt"},
		{"bad tolerance", []string{edition, "--out", out, "--speed-tolerance", "1.5"}, "--speed-tolerance"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"reproduce"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", r.code, r.stderr, exitUsage, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("a refused reproduction created %s", out)
			}
			onlyEntries(t, occupied, "notes.txt")
		})
	}
	r := run(t, "reproduce", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "horizon-verify editions/smoke-cpu --reproduction out/repro-smoke") {
		t.Fatalf("--help: exit %d, %q", r.code, r.stdout)
	}
}
