// Package attest signs and verifies Horizon editions.
//
// An edition's manifest.json lists every other file with its SHA-256, so a
// signature over the manifest covers the whole edition. What the hashes
// alone cannot show is *who* wrote it: anyone with this repository can
// re-run the aggregation and re-hash an edited edition (the verifier's
// consistent-forgery suite does exactly that). A signature by a key the
// reader already trusts closes that gap for everyone who does not hold the
// key.
//
// The signature is an in-toto Statement v1 (github.com/in-toto/attestation)
// whose one subject is manifest.json and its SHA-256, with a predicate of
// ours naming the edition and the tool revision from the manifest, wrapped
// in a DSSE envelope (github.com/secure-systems-lab/go-securesystemslib/dsse,
// payload type application/vnd.in-toto+json) signed with ed25519. It is
// written to attestation.dsse.json at the edition root, the one file the
// manifest does not list (it cannot: it signs the manifest's hash).
//
// Keys (keys.go) are PEM files: the private key PKCS #8 ("PRIVATE KEY",
// mode 0600), the public key PKIX ("PUBLIC KEY"), both readable by openssl.
// A key id is the lowercase hex SHA-256 of the raw 32-byte public key; it is
// recorded in the DSSE signature's keyid.
//
// Known limits, admitted plainly:
//   - A signature says who vouched for the edition, not that the numbers in
//     it are true: a key holder can sign a fabricated edition. It only stops
//     someone *without* the key from passing off an edited one as signed.
//   - There is no key distribution, rotation or revocation here: the reader
//     must obtain the right public key out of band (--trusted-key FILE).
//   - A wrong-key verdict is decided by the signature's keyid. A forger who
//     copies the trusted keyid onto their own signature gets ErrBadSignature
//     instead of ErrWrongKey: both fail, only the label differs.
//   - The private key file is not encrypted; protect it like an SSH key.
package attest
