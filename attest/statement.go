package attest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/horizon-runmap/horizon/editions"
)

// PredicateType names our predicate: "this statement vouches for one
// Horizon edition, identified by its manifest".
const PredicateType = "https://horizon-runmap.dev/attestation/edition/v1"

// SubjectName is the statement's one subject (the manifest's path in the
// edition).
const SubjectName = editions.ManifestFile

// Predicate is what our statement says beyond its subject. Both fields are
// copied from the manifest the subject digest covers, so they add no trust
// of their own; they let a reader of the attestation alone see what was
// signed.
type Predicate struct {
	Edition     string `json:"edition"`
	VCSRevision string `json:"vcs_revision"` // the manifest's tool.vcs_revision
}

// newStatement returns the JSON of the in-toto Statement v1 over manifest
// (its exact bytes), with the predicate read from the manifest itself.
func newStatement(manifest []byte) ([]byte, Predicate, error) {
	m, err := decodeManifest(manifest)
	if err != nil {
		return nil, Predicate{}, err
	}
	p := Predicate{Edition: m.Edition, VCSRevision: m.Tool.VCSRevision}
	pred, err := structpb.NewStruct(map[string]any{"edition": p.Edition, "vcs_revision": p.VCSRevision})
	if err != nil {
		return nil, Predicate{}, fmt.Errorf("predicate: %w", err)
	}
	st := &intoto.Statement{
		Type: intoto.StatementTypeUri,
		Subject: []*intoto.ResourceDescriptor{{
			Name:   SubjectName,
			Digest: map[string]string{"sha256": sha256Hex(manifest)},
		}},
		PredicateType: PredicateType,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, Predicate{}, fmt.Errorf("statement: %w", err)
	}
	b, err := protojson.Marshal(st)
	if err != nil {
		return nil, Predicate{}, fmt.Errorf("statement: %w", err)
	}
	// protojson deliberately varies its whitespace between runs; compact it
	// so that the same manifest always gives the same payload.
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, Predicate{}, fmt.Errorf("statement: %w", err)
	}
	return out.Bytes(), p, nil
}

// checkStatement decodes a signed payload and checks that it is our
// statement over exactly these manifest bytes.
func checkStatement(payload, manifest []byte) (Predicate, string, error) {
	var st intoto.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return Predicate{}, "", fmt.Errorf("%w: payload is not an in-toto statement: %v", ErrBadStatement, err)
	}
	if err := st.Validate(); err != nil {
		return Predicate{}, "", fmt.Errorf("%w: %v", ErrBadStatement, err)
	}
	if st.GetType() != intoto.StatementTypeUri {
		return Predicate{}, "", fmt.Errorf("%w: _type %q, want %q", ErrBadStatement, st.GetType(), intoto.StatementTypeUri)
	}
	if st.GetPredicateType() != PredicateType {
		return Predicate{}, "", fmt.Errorf("%w: predicateType %q, want %q", ErrBadStatement, st.GetPredicateType(), PredicateType)
	}
	fields := st.GetPredicate().GetFields()
	p := Predicate{Edition: fields["edition"].GetStringValue(), VCSRevision: fields["vcs_revision"].GetStringValue()}
	subj := st.GetSubject()
	if len(subj) != 1 || subj[0].GetName() != SubjectName {
		return p, "", fmt.Errorf("%w: want exactly one subject named %s, got %d", ErrBadStatement, SubjectName, len(subj))
	}
	signed := subj[0].GetDigest()["sha256"]
	want := sha256Hex(manifest)
	if signed != want {
		return p, signed, fmt.Errorf("%w: the statement signs manifest.json sha256 %s, the edition's manifest.json has sha256 %s",
			ErrSubjectMismatch, orNone(signed), want)
	}
	// The digest already binds the manifest; an edition id that disagrees
	// with it can only come from a broken signer, but say so rather than
	// show a reader the wrong name.
	m, err := decodeManifest(manifest)
	if err != nil {
		return p, signed, err
	}
	if p.Edition != m.Edition {
		return p, signed, fmt.Errorf("%w: the predicate names edition %q, the manifest %q", ErrSubjectMismatch, p.Edition, m.Edition)
	}
	return p, signed, nil
}

// decodeManifest reads the fields the statement needs from manifest.json.
func decodeManifest(manifest []byte) (*editions.Manifest, error) {
	var m editions.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotManifest, err)
	}
	if m.Schema != editions.SchemaManifest {
		return nil, fmt.Errorf("%w: schema %q, want %q", ErrNotManifest, m.Schema, editions.SchemaManifest)
	}
	return &m, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
