package verifier

import (
	"path"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// Check 1: every file the manifest lists exists with its size and SHA-256,
// no other file exists (attestation.dsse.json aside), and the manifest
// itself is well-formed. (Its schema validation is part of check 2, like
// every other document's.)
func checkManifest(v *view, fs *findings) {
	e := v.e
	m := e.Manifest
	const mf = editions.ManifestFile
	if m.Schema != editions.SchemaManifest || m.Version != editions.Version {
		fs.add(IDManifestWrongDocKind, mf, "", editions.SchemaManifest+" v1", m.Schema+" v"+itoa(m.Version),
			"manifest.json must carry schema %q version %d", editions.SchemaManifest, editions.Version)
	}
	if strings.TrimSpace(m.Edition) == "" {
		fs.add(IDManifestNoEditionID, mf, "/edition", "an edition id", m.Edition, "the manifest names no edition")
	}
	for i, r := range m.Republished {
		fs.add(IDManifestRepublished, mf, ptr("republished", i), nil, r.Tool.VCSRevision,
			"derived documents republished %s by %s %s (VCS revision %s, modified %s): %s; the raw records are the workers' of %s",
			r.At, r.Tool.Module, r.Tool.Version, r.Tool.VCSRevision, r.Tool.VCSModified, r.Reason, m.Tool.VCSRevision)
	}

	listed := map[string]bool{}
	for i, f := range m.Files {
		p := ptr("files", i)
		if i > 0 && f.Path < m.Files[i-1].Path {
			fs.add(IDManifestUnsorted, mf, p+"/path", "a path after "+quote(m.Files[i-1].Path), f.Path,
				"manifest files must be sorted by path")
		}
		if listed[f.Path] {
			fs.add(IDManifestDuplicate, mf, p+"/path", nil, f.Path, "%s is listed more than once", f.Path)
			continue
		}
		listed[f.Path] = true
		if !cleanRelPath(f.Path) || f.Path == mf {
			fs.add(IDManifestBadPath, mf, p+"/path", "a clean relative slash path other than manifest.json", f.Path,
				"listed path %q is not a file inside the edition", f.Path)
			continue
		}
		if !isSHA256Hex(f.SHA256) {
			fs.add(IDManifestBadDigest, mf, p+"/sha256", "64 lowercase hex digits", f.SHA256,
				"%s: malformed SHA-256", f.Path)
		}
		en, ok := e.entries[f.Path]
		if !ok {
			fs.add(IDManifestMissingFile, f.Path, "", "present", "absent",
				"%s is listed in the manifest but does not exist", f.Path)
			continue
		}
		if !en.regular {
			fs.add(IDManifestNotRegular, f.Path, "", "a regular file", en.mode.String(),
				"%s is not a regular file (symlinks are not followed)", f.Path)
			continue
		}
		if en.readErr != nil {
			fs.add(IDManifestMissingFile, f.Path, "", "readable", en.readErr.Error(), "%s cannot be read", f.Path)
			continue
		}
		if en.size != f.Bytes {
			fs.add(IDManifestSize, f.Path, "", f.Bytes, en.size, "%s has %d bytes, the manifest says %d", f.Path, en.size, f.Bytes)
		}
		if en.sha256 != f.SHA256 {
			fs.add(IDManifestHash, f.Path, "", f.SHA256, en.sha256, "%s does not have the SHA-256 the manifest lists", f.Path)
		}
	}
	for _, p := range e.paths {
		if p == mf || listed[p] {
			continue
		}
		en := e.entries[p]
		if !en.regular {
			fs.add(IDManifestNotRegular, p, "", "a regular file", en.mode.String(),
				"%s is not a regular file (symlinks are not followed)", p)
			continue
		}
		// The attestation signs manifest.json's hash, so the manifest cannot
		// list it; it is the one unlisted file an edition may hold (check
		// signature reads it).
		if p == editions.AttestationFile {
			continue
		}
		fs.add(IDManifestUnlisted, p, "", "listed in manifest.json", "not listed",
			"%s exists but the manifest does not list it: an edition holds exactly its listed files", p)
	}
	if en := e.entries[mf]; en != nil && !en.regular {
		fs.add(IDManifestNotRegular, mf, "", "a regular file", en.mode.String(), "manifest.json is not a regular file")
	}

	// Every document that names its edition must name this one.
	for _, p := range e.paths {
		r := e.raws[p]
		if r != nil && r.Edition != m.Edition {
			fs.add(IDManifestEditionID, p, "/edition", m.Edition, r.Edition, "raw record of another edition")
		}
	}
	if c := e.claims; c != nil && c.Edition != m.Edition {
		fs.add(IDManifestEditionID, editions.ClaimsFile, "/edition", m.Edition, c.Edition, "claims of another edition")
	}
}

// cleanRelPath reports whether p is a clean, relative, slash-separated path
// without "." or ".." elements.
func cleanRelPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
		return false
	}
	if path.Clean(p) != p {
		return false
	}
	for _, el := range strings.Split(p, "/") {
		if el == "." || el == ".." {
			return false
		}
	}
	return true
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
