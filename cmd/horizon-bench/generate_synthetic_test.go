package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// syntheticNote is what generate's stderr line about random weights says.
const syntheticNote = "the text is meaningless"

// generate on an artifact prepared from a synthetic checkpoint says once,
// on stderr, that its text is meaningless; --json keeps stdout one JSON
// object; an artifact of a real checkpoint gets no such line.
func TestGenerateSyntheticNote(t *testing.T) {
	// A real checkpoint, as far as the artifact can tell: a synthetic one
	// without its horizon-synth.json (the artifact's source.synthetic is
	// then null, as for a Hugging Face download).
	realCkpt := synth(t, "olmoe-tiny")
	if err := os.Remove(filepath.Join(realCkpt, "horizon-synth.json")); err != nil {
		t.Fatal(err)
	}
	realArt := filepath.Join(t.TempDir(), "real-art")
	if r := run(t, "prepare", "--checkpoint", realCkpt, "--out", realArt); r.code != 0 {
		t.Fatalf("prepare: exit %d: %s", r.code, r.stderr)
	}
	synthArt := filepath.Join(t.TempDir(), "synth-art")
	if r := run(t, "prepare", "--checkpoint", synth(t, "olmoe-tiny"), "--out", synthArt); r.code != 0 {
		t.Fatalf("prepare: exit %d: %s", r.code, r.stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		note string // a substring of the one note line; "" for none
	}{
		{"embedded default", nil, "synthetic olmoe-tiny seed 1 has random weights"},
		{"embedded default json", []string{"--json"}, "synthetic olmoe-tiny seed 1 has random weights"},
		{"synthetic artifact", []string{"--artifact", synthArt}, "synthetic olmoe-tiny seed 1 has random weights"},
		{"synthetic artifact json", []string{"--artifact", synthArt, "--json"}, "synthetic olmoe-tiny seed 1 has random weights"},
		{"real artifact", []string{"--artifact", realArt}, ""},
		{"real artifact json", []string{"--artifact", realArt, "--json"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"generate", "--tokens", "2"}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var notes []string
			for _, l := range strings.Split(r.stderr, "\n") {
				if strings.Contains(l, syntheticNote) {
					notes = append(notes, l)
				}
			}
			switch {
			case tc.note == "" && len(notes) != 0:
				t.Fatalf("a real checkpoint's artifact got the synthetic note: %q", notes)
			case tc.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], tc.note)):
				t.Fatalf("stderr %q: want one line saying %q and %q", r.stderr, syntheticNote, tc.note)
			}
			if strings.Contains(r.stdout, syntheticNote) {
				t.Fatalf("the note leaked into stdout: %q", r.stdout)
			}
			if strings.HasSuffix(tc.name, "json") {
				var out map[string]any
				if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
					t.Fatalf("--json stdout is not one JSON object: %v\n%s", err, r.stdout)
				}
			}
		})
	}
}
