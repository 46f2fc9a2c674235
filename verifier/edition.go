package verifier

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// ErrUnreadable is returned (wrapped) by Verify when the edition cannot be
// read at all: the directory cannot be listed, or manifest.json is missing
// or does not decode. Every other defect is a finding.
var ErrUnreadable = errors.New("edition cannot be read")

// entry is one directory entry of the edition as found on disk.
type entry struct {
	path    string // slash-separated, relative to the edition root
	regular bool   // a regular file (not a symlink, device, socket...)
	mode    fs.FileMode
	size    int64
	sha256  string // lowercase hex; regular files only
	readErr error  // the file could not be read
}

// doc is one .json file of the edition.
type doc struct {
	path     string
	data     []byte
	tree     any   // generic form (json.Number numbers); nil when parseErr != nil
	parseErr error // not exactly one well-formed JSON value
}

// str returns the string at pointer p, or "" if there is none.
func (d *doc) str(p string) string {
	if d == nil || d.tree == nil {
		return ""
	}
	v, err := resolve(d.tree, p)
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	return s
}

// Edition is an edition directory read into memory. Every check works on
// this one snapshot, so a file that changes during verification cannot make
// two checks see different bytes.
type Edition struct {
	Dir      string
	Manifest *editions.Manifest

	entries map[string]*entry // every file and special entry, by path (not directories)
	paths   []string          // sorted keys of entries
	docs    map[string]*doc   // every regular .json file, manifest.json included

	// Decoded documents, by path. A document that does not decode is absent
	// here and has a schema.decode finding.
	raws    map[string]*editions.RawRecord
	configs map[string]*editions.ConfigDoc
	claims  *editions.ClaimsDoc

	decodeErrs map[string]error
}

// readEdition reads dir. The only error it returns wraps ErrUnreadable.
func readEdition(dir string) (*Edition, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrUnreadable, dir)
	}
	// The edition may be named through a symlink (editions/latest); its
	// contents are still never followed through symlinks.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	e := &Edition{
		Dir:        dir,
		entries:    map[string]*entry{},
		docs:       map[string]*doc{},
		raws:       map[string]*editions.RawRecord{},
		configs:    map[string]*editions.ConfigDoc{},
		decodeErrs: map[string]error{},
	}
	walkErr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		en := &entry{path: rel, mode: info.Mode(), regular: info.Mode().IsRegular(), size: info.Size()}
		e.entries[rel] = en
		if !en.regular {
			return nil // symlinks are never followed
		}
		if strings.HasSuffix(rel, ".json") {
			data, err := os.ReadFile(p)
			if err != nil {
				en.readErr = err
				return nil
			}
			sum := sha256.Sum256(data)
			en.sha256, en.size = hex.EncodeToString(sum[:]), int64(len(data))
			d := &doc{path: rel, data: data}
			d.tree, d.parseErr = parseTree(data)
			e.docs[rel] = d
			return nil
		}
		en.sha256, en.size, en.readErr = hashFile(p)
		return nil
	})
	if walkErr != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, walkErr)
	}
	for p := range e.entries {
		e.paths = append(e.paths, p)
	}
	sort.Strings(e.paths)

	md, ok := e.docs[editions.ManifestFile]
	if !ok {
		return nil, fmt.Errorf("%w: %s has no readable %s", ErrUnreadable, dir, editions.ManifestFile)
	}
	m, err := LoadManifest(md.data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreadable, editions.ManifestFile, err)
	}
	e.Manifest = m

	for _, p := range e.paths {
		d := e.docs[p]
		if d == nil || d.parseErr != nil {
			continue
		}
		switch kindOfPath(p) {
		case editions.SchemaRaw:
			if r, err := LoadRaw(d.data); err != nil {
				e.decodeErrs[p] = err
			} else {
				e.raws[p] = r
			}
		case editions.SchemaConfig:
			if c, err := LoadConfig(d.data); err != nil {
				e.decodeErrs[p] = err
			} else {
				e.configs[p] = c
			}
		case editions.SchemaClaims:
			if c, err := LoadClaims(d.data); err != nil {
				e.decodeErrs[p] = err
			} else {
				e.claims = c
			}
		}
	}
	return e, nil
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// kindOfPath is the schema a document at path p must carry, "" for a path
// with no fixed kind.
func kindOfPath(p string) string {
	switch {
	case p == editions.ManifestFile:
		return editions.SchemaManifest
	case p == editions.CampaignFile:
		return editions.SchemaCampaign
	case p == editions.ContractFile:
		return editions.SchemaContract
	case p == editions.ClaimsFile:
		return editions.SchemaClaims
	case strings.HasPrefix(p, "configs/") && strings.Count(p, "/") == 1 && strings.HasSuffix(p, ".json"):
		return editions.SchemaConfig
	case strings.HasPrefix(p, "raw/") && strings.HasSuffix(p, ".json"):
		return editions.SchemaRaw
	}
	return ""
}

// parseRawPath splits raw/<config>/block-<k>.json; ok is false for any other
// shape (and for k < 1 or a k with leading zeros, which RawPath never
// writes).
func parseRawPath(p string) (config string, block int, ok bool) {
	parts := strings.Split(p, "/")
	if len(parts) != 3 || parts[0] != "raw" || parts[1] == "" {
		return "", 0, false
	}
	name, found := strings.CutPrefix(parts[2], "block-")
	if !found {
		return "", 0, false
	}
	num, found := strings.CutSuffix(name, ".json")
	if !found || num == "" || num[0] == '0' {
		return "", 0, false
	}
	k, err := strconv.Atoi(num)
	if err != nil || k < 1 {
		return "", 0, false
	}
	return parts[1], k, true
}

// parseConfigPath returns <config> of configs/<config>.json.
func parseConfigPath(p string) (string, bool) {
	name, ok := strings.CutPrefix(p, "configs/")
	if !ok || strings.Contains(name, "/") {
		return "", false
	}
	id, ok := strings.CutSuffix(name, ".json")
	return id, ok && id != ""
}
