package verifier

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/horizon-runmap/horizon/attest"
	"github.com/horizon-runmap/horizon/editions"
)

// The signature family: the edition is signed by its publisher (the
// trusted key), then a forger edits it and re-derives everything (forge).
// The forgery is consistent, so every other check may pass; only the
// signature, checked against the publisher's key, can catch it.
func init() {
	forgeries = append(forgeries,
		forgery{family: "signature", name: "raw record edited after signing", want: IDSignatureSubjectMismatch,
			apply: func(t *testing.T, dir string) {
				signAsPublisher(t, dir)
				aside(t, dir, func() { editHostname(t, dir); forge(t, dir) })
			},
			opts: trustPublisher},
		forgery{family: "signature", name: "re-forged with the old attestation listed in the manifest", want: IDSignatureSubjectMismatch,
			apply: func(t *testing.T, dir string) {
				signAsPublisher(t, dir)
				editHostname(t, dir)
				forge(t, dir) // lists attestation.dsse.json like any file
			},
			opts: trustPublisher},
		forgery{family: "signature", name: "re-signed with the forger's own key", want: IDSignatureWrongKey,
			apply: func(t *testing.T, dir string) {
				signAsPublisher(t, dir)
				aside(t, dir, func() { editHostname(t, dir); forge(t, dir) })
				_, forger, err := attest.GenerateKey()
				if err != nil {
					t.Fatal(err)
				}
				signEdition(t, dir, forger)
			},
			opts: trustPublisher},
		forgery{family: "signature", name: "re-signed with the forger's key under the publisher's keyid", want: IDSignatureInvalid,
			apply: func(t *testing.T, dir string) {
				pub := signAsPublisher(t, dir)
				aside(t, dir, func() { editHostname(t, dir); forge(t, dir) })
				_, forger, err := attest.GenerateKey()
				if err != nil {
					t.Fatal(err)
				}
				signEdition(t, dir, forger)
				edit(t, dir, editions.AttestationFile, func(d map[string]any) {
					d["signatures"].([]any)[0].(map[string]any)["keyid"] = attest.KeyID(pub)
				})
			},
			opts: trustPublisher},
		forgery{family: "signature", name: "signature stripped", want: IDSignatureMissing,
			apply: func(t *testing.T, dir string) {
				signAsPublisher(t, dir)
				if err := os.Remove(filepath.Join(dir, editions.AttestationFile)); err != nil {
					t.Fatal(err)
				}
				editHostname(t, dir)
				forge(t, dir)
			},
			opts: trustPublisher},
		forgery{family: "signature", name: "statement's subject digest rewritten", want: IDSignatureInvalid,
			apply: func(t *testing.T, dir string) {
				signAsPublisher(t, dir)
				aside(t, dir, func() { editHostname(t, dir); forge(t, dir) })
				// Point the signed statement at the forged manifest: the
				// payload changes under the publisher's signature.
				m, err := os.ReadFile(filepath.Join(dir, editions.ManifestFile))
				if err != nil {
					t.Fatal(err)
				}
				edit(t, dir, editions.AttestationFile, func(d map[string]any) {
					p, _ := base64.StdEncoding.DecodeString(d["payload"].(string))
					var st map[string]any
					if err := json.Unmarshal(p, &st); err != nil {
						t.Fatal(err)
					}
					st["subject"].([]any)[0].(map[string]any)["digest"] = map[string]any{"sha256": sha256HexTest(m)}
					p, _ = json.Marshal(st)
					d["payload"] = base64.StdEncoding.EncodeToString(p)
				})
			},
			opts: trustPublisher},
	)
}

// publisherKeyDir is where a case keeps the publisher's key pair: beside
// the edition copy, inside the test's temporary directory.
func publisherKeyDir(dir string) string { return filepath.Join(filepath.Dir(dir), "publisher-keys") }

// signAsPublisher makes the publisher's key pair and signs the edition as
// it stands; it returns the public key.
func signAsPublisher(t *testing.T, dir string) ed25519.PublicKey {
	t.Helper()
	privPath, pubPath, _, err := attest.WriteKeyPair(publisherKeyDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := attest.LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	signEdition(t, dir, priv)
	pub, err := attest.LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func trustPublisher(t *testing.T, dir string, o *Options) {
	o.TrustedKey = filepath.Join(publisherKeyDir(dir), attest.PublicKeyFile)
}

// aside runs f with the attestation moved out of the edition, as a forger
// who knows the manifest must not list it would.
func aside(t *testing.T, dir string, f func()) {
	t.Helper()
	att := filepath.Join(dir, editions.AttestationFile)
	tmp := filepath.Join(filepath.Dir(dir), "attestation-aside")
	if err := os.Rename(att, tmp); err != nil {
		t.Fatal(err)
	}
	f()
	if err := os.Rename(tmp, att); err != nil {
		t.Fatal(err)
	}
}

// editHostname rewrites where the first raw record says it ran: an edit no
// aggregate depends on, so only the manifest (and the signature) see it.
func editHostname(t *testing.T, dir string) {
	t.Helper()
	raws, err := filepath.Glob(filepath.Join(dir, "raw", "*", "block-1.json"))
	if err != nil || len(raws) == 0 {
		t.Fatalf("no raw record to edit: %v", err)
	}
	rel, _ := filepath.Rel(dir, raws[0])
	edit(t, dir, filepath.ToSlash(rel), func(d map[string]any) {
		d["environment"].(map[string]any)["hostname"] = "forger-host"
	})
}

func sha256HexTest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
