package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/attest"
	"github.com/horizon-runmap/horizon/editions"
)

// copyEdition copies the committed CPU edition into a temporary directory.
func copyEdition(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "smoke-cpu")
	if err := os.CopyFS(dir, os.DirFS("../../editions/smoke-cpu")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestKeygen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	r := run(t, "keygen", "--out", dir)
	if r.code != 0 {
		t.Fatalf("keygen: %d %s", r.code, r.stderr)
	}
	pub, err := attest.LoadPublicKey(filepath.Join(dir, "horizon.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.stdout, "key id "+attest.KeyID(pub)) {
		t.Errorf("keygen does not print the key id: %q", r.stdout)
	}
	if st, err := os.Stat(filepath.Join(dir, "horizon.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode: %v %v", st, err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "horizon.key"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"existing key pair", []string{"keygen", "--out", dir}, "already exists"},
		{"no --out", []string{"keygen"}, "--out"},
		{"a positional argument", []string{"keygen", dir}, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("want exit 2 and one line with %q, got %d %q", tc.want, r.code, r.stderr)
			}
		})
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "horizon.key")); string(after) != string(before) {
		t.Fatal("a refused keygen changed the private key")
	}
}

func TestAttest(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if r := run(t, "keygen", "--out", keys); r.code != 0 {
		t.Fatalf("keygen: %d %s", r.code, r.stderr)
	}
	key, pubPath := filepath.Join(keys, "horizon.key"), filepath.Join(keys, "horizon.pub")
	pub, err := attest.LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	ed := copyEdition(t)
	att := filepath.Join(ed, editions.AttestationFile)
	verify := func(t *testing.T) {
		t.Helper()
		env, err1 := os.ReadFile(att)
		m, err2 := os.ReadFile(filepath.Join(ed, editions.ManifestFile))
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if _, err := attest.Verify(env, m, pub); err != nil {
			t.Fatalf("the written attestation does not verify: %v", err)
		}
	}

	// Flags after the edition, and before it.
	r := run(t, "attest", ed, "--key", key)
	if r.code != 0 || !strings.Contains(r.stdout, "wrote "+att) || !strings.Contains(r.stdout, attest.KeyID(pub)) {
		t.Fatalf("attest: %d %q %q", r.code, r.stdout, r.stderr)
	}
	verify(t)
	if r := run(t, "attest", "--key", key, ed); r.code != 0 {
		t.Fatalf("attest with the flag first: %d %s", r.code, r.stderr)
	}
	verify(t)

	// Re-attesting with another key replaces the file, leaving no temporary.
	keys2 := filepath.Join(t.TempDir(), "keys2")
	if r := run(t, "keygen", "--out", keys2); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := run(t, "attest", ed, "--key", filepath.Join(keys2, "horizon.key")); r.code != 0 {
		t.Fatal(r.stderr)
	}
	env, _ := os.ReadFile(att)
	m, _ := os.ReadFile(filepath.Join(ed, editions.ManifestFile))
	if _, err := attest.Verify(env, m, pub); !errors.Is(err, attest.ErrWrongKey) {
		t.Fatalf("after re-signing with another key, the first key: %v, want ErrWrongKey", err)
	}
	ents, _ := os.ReadDir(ed)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("attest left %s behind", e.Name())
		}
	}

	notEdition := t.TempDir()
	os.WriteFile(filepath.Join(notEdition, "manifest.json"), []byte(`{"schema":"horizon.raw"}`), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no edition", []string{"attest", "--key", key}, "which edition"},
		{"no key", []string{"attest", ed}, "--key"},
		{"not a directory", []string{"attest", filepath.Join(ed, "report.md"), "--key", key}, "not an edition directory"},
		{"no manifest", []string{"attest", t.TempDir(), "--key", key}, "not a horizon edition"},
		{"a manifest of another schema", []string{"attest", notEdition, "--key", key}, "not a horizon edition"},
		{"the public key", []string{"attest", ed, "--key", pubPath}, "pass horizon.key"},
		{"an absent key", []string{"attest", ed, "--key", filepath.Join(keys, "absent")}, "--key"},
		{"two editions", []string{"attest", ed, ed, "--key", key}, "one edition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(att)
			r := run(t, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("want exit 2 and one line with %q, got %d %q", tc.want, r.code, r.stderr)
			}
			if after, _ := os.ReadFile(att); string(after) != string(before) {
				t.Fatal("a refused attest changed the attestation")
			}
		})
	}

	// An edition whose files no longer match its manifest is not signed.
	os.WriteFile(filepath.Join(ed, editions.ReportMD), []byte("edited\n"), 0o644)
	before, _ := os.ReadFile(att)
	if r := run(t, "attest", ed, "--key", key); r.code != 1 || !strings.Contains(r.stderr, "refusing to sign") {
		t.Fatalf("attest on an edited edition: %d %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(att); string(after) != string(before) {
		t.Fatal("attest changed the attestation of an edition it refused")
	}
}
