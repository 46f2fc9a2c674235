package attest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const testManifest = `{"schema":"horizon.manifest","version":1,"edition":"ed-1","created_at":"2026-01-01T00:00:00Z",` +
	`"tool":{"module":"m","version":"v","go_version":"go","vcs_revision":"abc123","vcs_modified":"false","vcs_time":"t","deps":[]},"files":[]}` + "\n"

func mustKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// reenvelope decodes an envelope, lets f change it, and encodes it again.
func reenvelope(t *testing.T, env []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSignVerify(t *testing.T) {
	pub, priv := mustKey(t)
	otherPub, otherPriv := mustKey(t)
	manifest := []byte(testManifest)
	env, err := Sign(manifest, priv)
	if err != nil {
		t.Fatal(err)
	}
	otherEnv, err := Sign(manifest, otherPriv)
	if err != nil {
		t.Fatal(err)
	}
	tamperPayload := func(m map[string]any) {
		p, _ := base64.StdEncoding.DecodeString(m["payload"].(string))
		p = bytes.Replace(p, []byte("ed-1"), []byte("ed-2"), 1)
		m["payload"] = base64.StdEncoding.EncodeToString(p)
	}
	for _, tc := range []struct {
		name     string
		env      []byte
		manifest []byte
		pub      ed25519.PublicKey
		want     error // nil: verifies
	}{
		{"good", env, manifest, pub, nil},
		{"good with the other key", otherEnv, manifest, otherPub, nil},
		{"tampered payload", reenvelope(t, env, tamperPayload), manifest, pub, ErrBadSignature},
		{"tampered manifest", env, bytes.Replace(manifest, []byte("abc123"), []byte("abc124"), 1), pub, ErrSubjectMismatch},
		{"manifest with one byte more", env, append(append([]byte{}, manifest...), ' '), pub, ErrSubjectMismatch},
		{"wrong key", env, manifest, otherPub, ErrWrongKey},
		{"wrong key claiming the trusted keyid", reenvelope(t, otherEnv, func(m map[string]any) {
			m["signatures"].([]any)[0].(map[string]any)["keyid"] = KeyID(pub)
		}), manifest, pub, ErrBadSignature},
		{"no signatures", reenvelope(t, env, func(m map[string]any) { m["signatures"] = []any{} }), manifest, pub, ErrNoSignature},
		{"payload type changed", reenvelope(t, env, func(m map[string]any) { m["payloadType"] = "application/json" }), manifest, pub, ErrPayloadType},
		{"garbage", []byte("not json at all"), manifest, pub, ErrNotEnvelope},
		{"a JSON array", []byte("[1,2]"), manifest, pub, ErrNotEnvelope},
		{"empty object", []byte("{}"), manifest, pub, ErrNotEnvelope},
		{"payload not base64", reenvelope(t, env, func(m map[string]any) { m["payload"] = "%%%" }), manifest, pub, ErrNotEnvelope},
		{"signature not base64", reenvelope(t, env, func(m map[string]any) {
			m["signatures"].([]any)[0].(map[string]any)["sig"] = "%%%"
		}), manifest, pub, ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := Verify(tc.env, tc.manifest, tc.pub)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if info.KeyID != KeyID(tc.pub) || info.Predicate.Edition != "ed-1" || info.Predicate.VCSRevision != "abc123" ||
					info.ManifestSHA256 != sha256Hex(tc.manifest) {
					t.Fatalf("info = %+v", info)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify error = %v, want %v", err, tc.want)
			}
			for _, other := range []error{ErrNotEnvelope, ErrPayloadType, ErrNoSignature, ErrBadSignature, ErrWrongKey, ErrBadStatement, ErrSubjectMismatch} {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("error %v also matches %v: the sentinels must be exclusive", err, other)
				}
			}
		})
	}
}

// A statement signed correctly but not ours fails as a bad statement: the
// signature alone does not make a payload an edition attestation.
func TestVerifyForeignStatement(t *testing.T) {
	pub, priv := mustKey(t)
	for _, tc := range []struct {
		name    string
		payload string
	}{
		{"not a statement", `{"hello":"world"}`},
		{"legacy statement type", `{"_type":"https://in-toto.io/Statement/v0.1","subject":[{"name":"manifest.json","digest":{"sha256":"` +
			sha256Hex([]byte(testManifest)) + `"}}],"predicateType":"` + PredicateType + `","predicate":{"edition":"ed-1"}}`},
		{"another predicate type", `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"manifest.json","digest":{"sha256":"` +
			sha256Hex([]byte(testManifest)) + `"}}],"predicateType":"https://slsa.dev/provenance/v1","predicate":{"edition":"ed-1"}}`},
		{"two subjects", `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"manifest.json","digest":{"sha256":"` +
			sha256Hex([]byte(testManifest)) + `"}},{"name":"x","digest":{"sha256":"` + sha256Hex(nil) +
			`"}}],"predicateType":"` + PredicateType + `","predicate":{"edition":"ed-1"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := signRaw(t, priv, []byte(tc.payload))
			if _, err := Verify(env, []byte(testManifest), pub); !errors.Is(err, ErrBadStatement) {
				t.Fatalf("Verify error = %v, want ErrBadStatement", err)
			}
		})
	}
}

// signRaw signs an arbitrary payload as an in-toto envelope.
func signRaw(t *testing.T, priv ed25519.PrivateKey, payload []byte) []byte {
	t.Helper()
	sig := ed25519.Sign(priv, paeForTest(PayloadType, payload))
	b, err := json.Marshal(map[string]any{
		"payloadType": PayloadType,
		"payload":     base64.StdEncoding.EncodeToString(payload),
		"signatures":  []any{map[string]any{"keyid": KeyID(priv.Public().(ed25519.PublicKey)), "sig": base64.StdEncoding.EncodeToString(sig)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// paeForTest is DSSE's pre-authentication encoding written out from the
// spec, so the test does not trust the library it checks our use of.
func paeForTest(typ string, body []byte) []byte {
	return []byte("DSSEv1 " + strconv.Itoa(len(typ)) + " " + typ + " " + strconv.Itoa(len(body)) + " " + string(body))
}

func TestStatementShape(t *testing.T) {
	_, priv := mustKey(t)
	env, err := Sign([]byte(testManifest), priv)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	p, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(p, &st); err != nil {
		t.Fatal(err)
	}
	subj := st["subject"].([]any)[0].(map[string]any)
	checks := map[string]any{
		"payloadType":   e.PayloadType == "application/vnd.in-toto+json",
		"_type":         st["_type"] == "https://in-toto.io/Statement/v1",
		"predicateType": st["predicateType"] == PredicateType,
		"subject name":  subj["name"] == "manifest.json",
		"subject sha":   subj["digest"].(map[string]any)["sha256"] == sha256Hex([]byte(testManifest)),
		"edition":       st["predicate"].(map[string]any)["edition"] == "ed-1",
		"vcs_revision":  st["predicate"].(map[string]any)["vcs_revision"] == "abc123",
		"keyid":         len(e.Signatures) == 1 && e.Signatures[0].KeyID == KeyID(priv.Public().(ed25519.PublicKey)),
	}
	for k, ok := range checks {
		if ok != true {
			t.Errorf("%s wrong in %s", k, p)
		}
	}
	// Signing is deterministic (ed25519, compacted protojson).
	again, err := Sign([]byte(testManifest), priv)
	if err != nil || !bytes.Equal(again, env) {
		t.Errorf("signing the same manifest twice gave different envelopes (err %v)", err)
	}
	if _, err := Sign([]byte(`{"schema":"horizon.raw"}`), priv); !errors.Is(err, ErrNotManifest) {
		t.Errorf("signing a non-manifest: %v, want ErrNotManifest", err)
	}
}

func TestInspect(t *testing.T) {
	pub, priv := mustKey(t)
	env, err := Sign([]byte(testManifest), priv)
	if err != nil {
		t.Fatal(err)
	}
	info, err := Inspect(env, []byte(testManifest))
	if err != nil || len(info.KeyIDs) != 1 || info.KeyIDs[0] != KeyID(pub) || info.KeyID != "" {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	if _, err := Inspect(env, []byte(strings.Replace(testManifest, "ed-1", "ed-9", 1))); !errors.Is(err, ErrSubjectMismatch) {
		t.Fatalf("Inspect on another manifest: %v", err)
	}
}

func TestKeyPairFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	privPath, pubPath, id, err := WriteKeyPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(privPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", st, err)
	}
	pub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	if KeyID(pub) != id || !pub.Equal(priv.Public()) {
		t.Fatal("the key pair does not match its key id")
	}
	before, _ := os.ReadFile(privPath)
	if _, _, _, err := WriteKeyPair(dir); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("second WriteKeyPair: %v, want ErrKeyExists", err)
	}
	if after, _ := os.ReadFile(privPath); !bytes.Equal(before, after) {
		t.Fatal("the private key was overwritten")
	}
	// Only the public file present: still refused, nothing written.
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, PublicKeyFile), []byte("x"), 0o644)
	if _, _, _, err := WriteKeyPair(dir2); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("WriteKeyPair over a public key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir2, PrivateKeyFile)); err == nil {
		t.Fatal("a private key was written beside the existing public key")
	}
	for _, tc := range []struct {
		name string
		load func() error
	}{
		{"public key file given as private", func() error { _, err := LoadPrivateKey(pubPath); return err }},
		{"private key file given as public", func() error { _, err := LoadPublicKey(privPath); return err }},
		{"garbage", func() error {
			p := filepath.Join(t.TempDir(), "k")
			os.WriteFile(p, []byte("hello"), 0o600)
			_, err := LoadPublicKey(p)
			return err
		}},
	} {
		if err := tc.load(); !errors.Is(err, ErrBadKey) {
			t.Errorf("%s: %v, want ErrBadKey", tc.name, err)
		}
	}
	if _, err := LoadPublicKey(filepath.Join(dir, "absent")); err == nil || errors.Is(err, ErrBadKey) {
		t.Errorf("absent key file: %v, want a read error", err)
	}
}
