package verifier

import (
	"errors"
	"strings"

	"github.com/horizon-runmap/horizon/attest"
	"github.com/horizon-runmap/horizon/editions"
)

// Check signature: attestation.dsse.json, when present, is a DSSE envelope
// holding our in-toto statement over this manifest.json (package attest);
// with --trusted-key it must be signed by that key.
//
// Why: the other checks show an edition is consistent, and a careful forger
// can make an edited edition consistent again (the consistent-forgery
// suite). Only a signature by a key the reader trusts shows the edition is
// the one its signer published. Without --trusted-key the verifier cannot
// tell a genuine signature from one a forger made with their own key, so it
// says so (signature.unverified) rather than pass it; what it can check
// without a key (the envelope's shape and that its statement names this
// manifest) is still checked. A signature proves who vouched for the
// edition, not that its measurements are true.
var (
	IDSignatureUnsigned = def("signature", "signature.unsigned", Hint,
		"the edition has no attestation.dsse.json: nobody vouched for it (pass --trusted-key to require a signature)")
	IDSignatureUnverified = def("signature", "signature.unverified", Hint,
		"the edition is signed, but no --trusted-key was given: the signature was not checked")
	IDSignatureMissing = def("signature", "signature.missing", Error,
		"--trusted-key was given but the edition has no attestation.dsse.json")
	IDSignatureInvalid = def("signature", "signature.invalid", Error,
		"attestation.dsse.json is not a validly signed DSSE envelope holding Horizon's in-toto edition statement (malformed, wrong payload type, unsigned, signature does not verify)")
	IDSignatureWrongKey = def("signature", "signature.wrong-key", Error,
		"attestation.dsse.json is signed, but not by the --trusted-key")
	IDSignatureSubjectMismatch = def("signature", "signature.subject-mismatch", Error,
		"the attestation signs another manifest.json than the edition's (the edition changed after it was signed)")
	IDSignatureUnreadableKey = def("signature", "signature.unreadable-key", Error,
		"the --trusted-key file cannot be read or is not an ed25519 public key (PEM, horizon-bench keygen)")
)

func checkSignature(v *view, fs *findings) {
	const af = editions.AttestationFile
	key := v.opts.TrustedKey
	en := v.e.entries[af]
	d := v.e.docs[af]
	md := v.e.docs[editions.ManifestFile]

	if key != "" {
		pub, err := attest.LoadPublicKey(key)
		if err != nil {
			fs.add(IDSignatureUnreadableKey, "", "", "an ed25519 public key (PEM)", key, "--trusted-key: %v", err)
			return
		}
		switch {
		case en == nil:
			fs.add(IDSignatureMissing, af, "", "a signature by key "+attest.KeyID(pub), "absent",
				"the edition is not signed (sign it with horizon-bench attest)")
			return
		case !en.regular || d == nil || en.readErr != nil:
			fs.add(IDSignatureInvalid, af, "", "a readable regular file", en.mode.String(), "%s cannot be read as a file", af)
			return
		}
		info, err := attest.Verify(d.data, md.data, pub)
		if err != nil {
			fs.add(signatureID(err), af, "", attest.KeyID(pub), strings.Join(info.KeyIDs, ","), "%v", err)
		}
		return
	}

	// No trusted key.
	switch {
	case en == nil:
		fs.add(IDSignatureUnsigned, af, "", "a signature", "absent", "the edition is not signed; its authorship is not checked")
		return
	case !en.regular || d == nil || en.readErr != nil:
		fs.add(IDSignatureInvalid, af, "", "a readable regular file", en.mode.String(), "%s cannot be read as a file", af)
		return
	}
	info, err := attest.Inspect(d.data, md.data)
	if err != nil {
		fs.add(signatureID(err), af, "", nil, strings.Join(info.KeyIDs, ","), "%v (found without a key)", err)
		return
	}
	fs.add(IDSignatureUnverified, af, "", "--trusted-key", strings.Join(info.KeyIDs, ","),
		"signed by key %s over this manifest.json, but not verified: pass --trusted-key FILE with the signer's public key",
		strings.Join(info.KeyIDs, ", "))
}

// signatureID maps package attest's error to a finding ID.
func signatureID(err error) string {
	switch {
	case errors.Is(err, attest.ErrWrongKey):
		return IDSignatureWrongKey
	case errors.Is(err, attest.ErrSubjectMismatch):
		return IDSignatureSubjectMismatch
	default: // not an envelope, wrong payload type, unsigned, bad signature, bad statement
		return IDSignatureInvalid
	}
}
