package editions

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// ReadBuildInfo describes the running binary from runtime/debug: module,
// version, Go version, VCS stamp (UNKNOWN when the build was not stamped,
// e.g. under -buildvcs=false or go run) and every dependency.
func ReadBuildInfo() BuildInfo {
	bi := BuildInfo{
		Module: Unknown, Version: Unknown, GoVersion: Unknown,
		VCSRevision: Unknown, VCSModified: Unknown, VCSTime: Unknown, Deps: []string{},
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	bi.GoVersion = info.GoVersion
	if info.Main.Path != "" {
		bi.Module = info.Main.Path
	}
	if info.Main.Version != "" {
		bi.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.VCSRevision = s.Value
		case "vcs.modified":
			bi.VCSModified = s.Value
		case "vcs.time":
			bi.VCSTime = s.Value
		}
	}
	for _, d := range info.Deps {
		v := d.Version
		if d.Replace != nil {
			v += " => " + d.Replace.Path + "@" + d.Replace.Version
		}
		bi.Deps = append(bi.Deps, d.Path+"@"+v)
	}
	sort.Strings(bi.Deps)
	return bi
}

// HashFile returns the lowercase hex SHA-256 and size of a file.
func HashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// BuildManifest lists every regular file under dir except manifest.json,
// sorted by path, with its size and SHA-256. Anything that is not a regular
// file or a directory (a symlink, a device) is an error: an edition holds
// plain files only.
func BuildManifest(dir, edition string, created time.Time, tool BuildInfo) (Manifest, error) {
	m := Manifest{
		Schema: SchemaManifest, Version: Version, Edition: edition,
		CreatedAt: created.UTC().Format(time.RFC3339), Tool: tool,
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("edition file %s is not a regular file", rel)
		case rel == ManifestFile:
			return nil
		}
		sum, n, err := HashFile(path)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, FileEntry{Path: rel, Bytes: n, SHA256: sum})
		return nil
	})
	if err != nil {
		return Manifest{}, fmt.Errorf("manifest of %s: %w", dir, err)
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	return m, nil
}

// CheckManifest verifies that dir holds exactly the manifest's files with
// their sizes and hashes; it returns the first difference.
func CheckManifest(dir string, m Manifest) error {
	got, err := BuildManifest(dir, m.Edition, time.Time{}, BuildInfo{})
	if err != nil {
		return err
	}
	want := map[string]FileEntry{}
	for _, f := range m.Files {
		want[f.Path] = f
	}
	for _, f := range got.Files {
		w, ok := want[f.Path]
		switch {
		case !ok:
			return fmt.Errorf("%s is not listed in %s", f.Path, ManifestFile)
		case w.Bytes != f.Bytes || w.SHA256 != f.SHA256:
			return fmt.Errorf("%s has %d bytes, sha256 %s; %s lists %d bytes, sha256 %s",
				f.Path, f.Bytes, f.SHA256, ManifestFile, w.Bytes, w.SHA256)
		}
		delete(want, f.Path)
	}
	if len(want) > 0 {
		var missing []string
		for p := range want {
			missing = append(missing, p)
		}
		sort.Strings(missing)
		return fmt.Errorf("listed in %s but missing: %s", ManifestFile, strings.Join(missing, ", "))
	}
	return nil
}

// VersionText is the `--version` answer of a program built as b: the
// module and its version, the VCS revision, time and modified flag, the Go
// version, and whether the binary can drive CUDA devices.
func (b BuildInfo) VersionText(program string, cuda bool) string {
	dev := "cpu only"
	if cuda {
		dev = "cpu and cuda"
	}
	return fmt.Sprintf("%s %s (module %s)\nvcs revision %s, time %s, modified %s\n%s, devices: %s\n",
		program, b.Version, b.Module, b.VCSRevision, b.VCSTime, b.VCSModified, b.GoVersion, dev)
}
