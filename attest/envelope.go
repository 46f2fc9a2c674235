package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// Why an attestation does not verify. Every error Verify or Inspect returns
// wraps exactly one of these (test with errors.Is).
var (
	// ErrNotEnvelope: the file is not a DSSE envelope (not JSON, no
	// payload, payload not base64).
	ErrNotEnvelope = errors.New("not a DSSE envelope")
	// ErrPayloadType: the envelope does not carry an in-toto statement.
	ErrPayloadType = errors.New("wrong DSSE payload type")
	// ErrNoSignature: the envelope has no signature at all.
	ErrNoSignature = errors.New("the envelope is not signed")
	// ErrBadSignature: a signature claims the trusted key (or no key) but
	// does not verify: the payload was altered, or it was never signed by
	// that key.
	ErrBadSignature = errors.New("invalid signature")
	// ErrWrongKey: the envelope is signed, but only by other keys.
	ErrWrongKey = errors.New("signed by another key")
	// ErrBadStatement: the signed payload is not our in-toto statement
	// (statement type, predicate type, subject shape).
	ErrBadStatement = errors.New("not a Horizon edition statement")
	// ErrSubjectMismatch: the statement signs another manifest.json than the
	// edition's (the edition changed after it was signed).
	ErrSubjectMismatch = errors.New("the signed subject is not this manifest.json")
	// ErrNotManifest: the manifest bytes given are not a horizon.manifest.
	ErrNotManifest = errors.New("not a horizon manifest")
)

// Info describes an attestation.
type Info struct {
	// KeyIDs are the keyids its signatures claim (unverified).
	KeyIDs []string
	// KeyID is the key that verified it (Verify only).
	KeyID string
	// ManifestSHA256 is the subject digest it signs.
	ManifestSHA256 string
	Predicate      Predicate
}

// Sign returns a DSSE envelope (JSON, indented, newline-terminated) over
// the in-toto statement whose subject is manifest.json with the SHA-256 of
// manifest (its exact bytes). The predicate's edition id and tool revision
// are read from the manifest itself, so a statement cannot name another
// edition than the one it covers.
func Sign(manifest []byte, priv ed25519.PrivateKey) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("sign: %w: private key of %d bytes", ErrBadKey, len(priv))
	}
	payload, _, err := newStatement(manifest)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	es, err := dsse.NewEnvelopeSigner(&keySV{priv: priv, pub: priv.Public().(ed25519.PublicKey)})
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	env, err := es.SignPayload(context.Background(), PayloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return append(b, '\n'), nil
}

// Verify checks that envelope is a DSSE envelope signed by pub over our
// in-toto statement whose subject is exactly these manifest bytes. The
// signature is checked before the statement is read: nothing unsigned is
// trusted.
func Verify(envelope, manifest []byte, pub ed25519.PublicKey) (Info, error) {
	if len(pub) != ed25519.PublicKeySize {
		return Info{}, fmt.Errorf("verify: %w: public key of %d bytes", ErrBadKey, len(pub))
	}
	env, info, err := parseEnvelope(envelope)
	if err != nil {
		return info, err
	}
	want := KeyID(pub)
	ev, err := dsse.NewEnvelopeVerifier(&keySV{pub: pub})
	if err != nil {
		return info, fmt.Errorf("verify: %w", err)
	}
	accepted, body, err := ev.VerifyAndDecode(context.Background(), env)
	if err != nil || len(accepted) == 0 {
		return info, classify(info.KeyIDs, want, err)
	}
	info.KeyID = want
	info.Predicate, info.ManifestSHA256, err = checkStatement(body, manifest)
	return info, err
}

// Inspect reads an attestation without a key: its shape, its payload type,
// its statement and whether the statement's subject is this manifest. It
// proves nothing about who signed it; the verifier uses it to say what an
// unverified attestation claims (and to fail one that cannot be right
// whatever the key).
func Inspect(envelope, manifest []byte) (Info, error) {
	env, info, err := parseEnvelope(envelope)
	if err != nil {
		return info, err
	}
	body, err := env.DecodeB64Payload()
	if err != nil {
		return info, fmt.Errorf("%w: %v", ErrNotEnvelope, err)
	}
	info.Predicate, info.ManifestSHA256, err = checkStatement(body, manifest)
	return info, err
}

// parseEnvelope decodes and sanity-checks an envelope: JSON object, our
// payload type, a base64 payload, at least one signature.
func parseEnvelope(b []byte) (*dsse.Envelope, Info, error) {
	var info Info
	var env dsse.Envelope
	if len(bytes.TrimSpace(b)) == 0 || bytes.TrimSpace(b)[0] != '{' {
		return nil, info, fmt.Errorf("%w: not a JSON object", ErrNotEnvelope)
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, info, fmt.Errorf("%w: %v", ErrNotEnvelope, err)
	}
	if env.Payload == "" || env.PayloadType == "" {
		return nil, info, fmt.Errorf("%w: payload or payloadType missing", ErrNotEnvelope)
	}
	if _, err := env.DecodeB64Payload(); err != nil {
		return nil, info, fmt.Errorf("%w: %v", ErrNotEnvelope, err)
	}
	for _, s := range env.Signatures {
		info.KeyIDs = append(info.KeyIDs, s.KeyID)
	}
	if env.PayloadType != PayloadType {
		return nil, info, fmt.Errorf("%w: %q, want %q", ErrPayloadType, env.PayloadType, PayloadType)
	}
	if len(env.Signatures) == 0 {
		return nil, info, ErrNoSignature
	}
	return &env, info, nil
}

// classify names why no signature verified. A signature whose keyid is the
// trusted key's (or empty, so it was tried) was checked and failed: bad
// signature. If every signature names another key, none was tried: wrong
// key.
func classify(claimed []string, want string, err error) error {
	for _, k := range claimed {
		if k == want || k == "" {
			return fmt.Errorf("%w: a signature for key %s does not verify (%v)", ErrBadSignature, short(want), err)
		}
	}
	var shorts []string
	for _, k := range claimed {
		shorts = append(shorts, short(k))
	}
	return fmt.Errorf("%w: signed by key %s, the trusted key is %s", ErrWrongKey, strings.Join(shorts, ", "), short(want))
}

// short abbreviates a key id for messages (the full id is 64 hex digits).
func short(id string) string {
	if len(id) > 16 {
		return id[:16] + "…"
	}
	return id
}

// keySV is an ed25519 key as DSSE's Signer and Verifier.
type keySV struct {
	priv ed25519.PrivateKey // nil for verification only
	pub  ed25519.PublicKey
}

func (k *keySV) Sign(_ context.Context, data []byte) ([]byte, error) {
	if k.priv == nil {
		return nil, errors.New("no private key")
	}
	return ed25519.Sign(k.priv, data), nil
}

func (k *keySV) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(k.pub, data, sig) {
		return errors.New("ed25519 signature does not verify")
	}
	return nil
}

func (k *keySV) KeyID() (string, error) { return KeyID(k.pub), nil }

func (k *keySV) Public() crypto.PublicKey { return k.pub }

// compile-time checks that keySV is what dsse expects.
var (
	_ dsse.Signer   = (*keySV)(nil)
	_ dsse.Verifier = (*keySV)(nil)
)
