package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/attest"
)

// signFixture signs a copy of the fixture with a new key and returns the
// copy and the public key file.
func signFixture(t *testing.T) (dir, pub string) {
	t.Helper()
	dir = copyFixture(t)
	privPath, pub, _, err := attest.WriteKeyPair(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := attest.LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.Sign(m, priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "attestation.dsse.json"), env, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, pub
}

// signatureFindings runs horizon-verify --json and returns its exit code
// and the IDs of the signature check's findings.
func signatureFindings(t *testing.T, args ...string) (int, []string) {
	t.Helper()
	r := runBin(t, append(args, "--json")...)
	var ids []string
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v (stderr %s)", sc.Text(), err, r.stderr)
		}
		if m["message_type"] == "finding" && m["check"] == "signature" {
			ids = append(ids, m["id"].(string))
		}
	}
	return r.code, ids
}

func TestTrustedKey(t *testing.T) {
	signed, pub := signFixture(t)
	_, otherPub := signFixture(t)
	// What the fixture exits with when the signature check has nothing to
	// say: a right signature, or a hint, must not change it.
	base := runBin(t, copyFixture(t)).code
	for _, tc := range []struct {
		name string
		args []string
		want string // the one signature finding; "" for none
		code int
	}{
		{"signed, right key (flag after the directory)", []string{signed, "--trusted-key", pub}, "", base},
		{"signed, right key (flag first)", []string{"--trusted-key", pub, signed}, "", base},
		{"signed, wrong key", []string{signed, "--trusted-key", otherPub}, "signature.wrong-key", exitFail},
		{"unsigned, key given", []string{copyFixture(t), "--trusted-key", pub}, "signature.missing", exitFail},
		{"key file is not a key", []string{signed, "--trusted-key", notAKey(t)}, "signature.unreadable-key", exitFail},
		{"signed, no key", []string{signed}, "signature.unverified", base},
		{"unsigned, no key", []string{copyFixture(t)}, "signature.unsigned", base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, ids := signatureFindings(t, tc.args...)
			switch {
			case tc.want == "" && len(ids) != 0:
				t.Fatalf("want no signature finding, got %v", ids)
			case tc.want != "" && (len(ids) != 1 || ids[0] != tc.want):
				t.Fatalf("want signature finding %s, got %v", tc.want, ids)
			case code != tc.code:
				t.Fatalf("exit %d, want %d", code, tc.code)
			}
		})
	}
}

// notAKey writes a file that exists but holds no public key (a missing
// file is a usage error, tested in main_test.go).
func notAKey(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "notes.pub")
	if err := os.WriteFile(p, []byte("not a PEM block\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
