package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDenseActivationsExit: a raw record that states FP16 dense
// activations its configuration does not declare (the manifest re-hashed,
// so only the content speaks) fails verification (exit 1) with
// physics.dense-activation-dtype at the record's field, and --list-ids
// lists the ID.
func TestDenseActivationsExit(t *testing.T) {
	dir := copyFixture(t)
	const raw = "raw/tiny-c4/block-2.json"
	p := filepath.Join(dir, filepath.FromSlash(raw))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	const art = `"artifact": {`
	if bytes.Count(b, []byte(art)) != 1 {
		t.Fatalf("%s: want one %s", raw, art)
	}
	b = bytes.Replace(b, []byte(art), []byte(art+`"dense_activation_dtype": "FP16", `), 1)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rehashManifestEntry(t, dir, raw, b)

	r := runBin(t, "--json", "--contract", fixtureContract, dir)
	if r.code != exitFail {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, exitFail, r.stdout, r.stderr)
	}
	found := false
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var f map[string]any
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if f["check"] == "manifest" && f["severity"] == "error" {
			t.Errorf("the tampering broke the manifest, not the content: %v", f)
		}
		if f["id"] == "physics.dense-activation-dtype" && f["severity"] == "error" &&
			f["file"] == raw && f["pointer"] == "/artifact/dense_activation_dtype" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no physics.dense-activation-dtype error at %s#/artifact/dense_activation_dtype:\n%s", raw, r.stdout)
	}

	if l := runBin(t, "--list-ids"); l.code != exitPass || !strings.Contains(l.stdout, "physics.dense-activation-dtype") {
		t.Errorf("--list-ids (exit %d) lacks physics.dense-activation-dtype:\n%s", l.code, l.stdout)
	}
}

// rehashManifestEntry sets the size and SHA-256 of path's entry in dir's
// manifest.json to those of content.
func rehashManifestEntry(t *testing.T, dir, path string, content []byte) {
	t.Helper()
	mp := filepath.Join(dir, "manifest.json")
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	files, _ := m["files"].([]any)
	sum := sha256.Sum256(content)
	done := false
	for _, f := range files {
		if e, ok := f.(map[string]any); ok && e["path"] == path {
			e["bytes"], e["sha256"], done = len(content), hex.EncodeToString(sum[:]), true
		}
	}
	if !done {
		t.Fatalf("manifest.json lists no %s", path)
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
