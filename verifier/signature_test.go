package verifier

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/horizon-runmap/horizon/attest"
	"github.com/horizon-runmap/horizon/editions"
)

// testKeys writes a key pair into a temporary directory and returns the
// public key file and the private key.
func testKeys(t testing.TB) (pubPath string, priv ed25519.PrivateKey) {
	t.Helper()
	privPath, pubPath, _, err := attest.WriteKeyPair(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	priv, err = attest.LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	return pubPath, priv
}

// signEdition writes attestation.dsse.json over dir's manifest.json, as
// horizon-bench attest does.
func signEdition(t testing.TB, dir string, priv ed25519.PrivateKey) {
	t.Helper()
	m, err := os.ReadFile(filepath.Join(dir, editions.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.Sign(m, priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, editions.AttestationFile), env, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSignature(t *testing.T) {
	trusted, priv := testKeys(t)
	other, otherPriv := testKeys(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) // edits the fixture
		key   string                         // --trusted-key
		want  string                         // the one signature finding, "" for none
		sev   Severity
	}{
		{"signed, right key", func(t *testing.T, dir string) { signEdition(t, dir, priv) }, trusted, "", ""},
		{"signed, wrong key", func(t *testing.T, dir string) { signEdition(t, dir, otherPriv) }, trusted, IDSignatureWrongKey, Error},
		{"signed by the other key, other key trusted", func(t *testing.T, dir string) { signEdition(t, dir, otherPriv) }, other, "", ""},
		{"unsigned, key given", func(t *testing.T, dir string) {}, trusted, IDSignatureMissing, Error},
		{"unsigned, no key", func(t *testing.T, dir string) {}, "", IDSignatureUnsigned, Hint},
		{"signed, no key", func(t *testing.T, dir string) { signEdition(t, dir, priv) }, "", IDSignatureUnverified, Hint},
		{"manifest changed after signing, key given", func(t *testing.T, dir string) {
			signEdition(t, dir, priv)
			edit(t, dir, editions.ManifestFile, func(d map[string]any) { d["created_at"] = "2026-01-02T00:00:00Z" })
		}, trusted, IDSignatureSubjectMismatch, Error},
		{"manifest changed after signing, no key", func(t *testing.T, dir string) {
			signEdition(t, dir, priv)
			edit(t, dir, editions.ManifestFile, func(d map[string]any) { d["created_at"] = "2026-01-02T00:00:00Z" })
		}, "", IDSignatureSubjectMismatch, Error},
		{"garbage attestation, key given", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, editions.AttestationFile), []byte("{not json"), 0o644)
		}, trusted, IDSignatureInvalid, Error},
		{"garbage attestation, no key", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, editions.AttestationFile), []byte(`{"schema":"horizon.raw"}`), 0o644)
		}, "", IDSignatureInvalid, Error},
		{"attestation is a symlink", func(t *testing.T, dir string) {
			signEdition(t, dir, priv)
			os.Rename(filepath.Join(dir, editions.AttestationFile), filepath.Join(t.TempDir(), "a"))
			os.Symlink("/dev/null", filepath.Join(dir, editions.AttestationFile))
		}, trusted, IDSignatureInvalid, Error},
		{"key file is the private key", func(t *testing.T, dir string) { signEdition(t, dir, priv) },
			filepath.Join(filepath.Dir(trusted), attest.PrivateKeyFile), IDSignatureUnreadableKey, Error},
		{"key file absent", func(t *testing.T, dir string) { signEdition(t, dir, priv) },
			filepath.Join(t.TempDir(), "absent.pub"), IDSignatureUnreadableKey, Error},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newFixture(t)
			tc.setup(t, dir)
			rep, err := Verify(dir, Options{Schemas: fixtureSchemas(t), TrustedKey: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			var got []Finding
			for _, f := range rep.Findings {
				if f.Check == "signature" {
					got = append(got, f)
				} else if (f.Check == "manifest" || f.Check == "schema") && f.ID != IDManifestNotRegular && f.ID != IDSchemaUnavailable {
					// The attestation is the one file these two checks must let be.
					t.Errorf("the attestation trips check %s: %s %s %s", f.Check, f.ID, f.Where(), f.Message)
				}
			}
			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("want no signature finding, got:\n%s", findingsText(got))
			case tc.want != "" && (len(got) != 1 || got[0].ID != tc.want || got[0].Severity != tc.sev):
				t.Fatalf("want exactly one %s %s, got:\n%s", tc.sev, tc.want, findingsText(got))
			}
		})
	}
}

// The one unlisted file an edition may hold is attestation.dsse.json at
// its root: the same name anywhere else is an unlisted file like any other.
func TestAttestationOnlyAtTheRoot(t *testing.T) {
	_, priv := testKeys(t)
	dir := newFixture(t)
	signEdition(t, dir, priv)
	os.Rename(filepath.Join(dir, editions.AttestationFile), filepath.Join(dir, "raw", editions.AttestationFile))
	rep, err := Verify(dir, Options{Schemas: fixtureSchemas(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Has(IDManifestUnlisted) || !rep.Has(IDSignatureUnsigned) {
		t.Fatalf("want manifest.unlisted and signature.unsigned, got:\n%s", findingsText(rep.Findings))
	}
}
