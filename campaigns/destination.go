package campaigns

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/horizon-runmap/horizon/editions"
)

// ErrNotEdition is returned when the edition destination (--out) exists and
// is not a horizon edition: a file, a symlink, a directory of other work.
// Nothing there is touched, with or without Force.
var ErrNotEdition = errors.New("destination exists and is not an edition")

// checkDestination decides whether an edition may be published at dest.
// An absent dest is free. An existing edition (a real directory whose
// manifest.json is a horizon manifest) is replaced only with force. Anything
// else that exists (a regular file, a symlink, even one to an edition, an
// empty or non-empty directory without a horizon manifest) is refused with
// a message that says what dest holds: --force replaces editions only, so
// no run can delete work that is not an edition.
func checkDestination(dest string, force bool) error {
	st, err := os.Lstat(dest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect the edition destination %s: %w", dest, err)
	}
	if what, ok := notEdition(dest, st); !ok {
		return fmt.Errorf("%w: %s %s; choose another --out or move it away (--force replaces editions only)", ErrNotEdition, dest, what)
	}
	if !force {
		return fmt.Errorf("%w: %s already holds an edition; pass --force to replace it", ErrEditionExists, dest)
	}
	return nil
}

// notEdition says what dest holds when it is not an edition ("is a regular
// file of 12 bytes", ...); ok is true when dest is an edition.
func notEdition(dest string, st fs.FileInfo) (what string, ok bool) {
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dest)
		return fmt.Sprintf("is a symlink (to %s)", target), false
	case st.Mode().IsRegular():
		return fmt.Sprintf("is a regular file of %d bytes", st.Size()), false
	case !st.IsDir():
		return fmt.Sprintf("is a special file (%s)", st.Mode().Type()), false
	}
	ents, err := os.ReadDir(dest)
	if err != nil {
		return fmt.Sprintf("is a directory that cannot be read (%v)", err), false
	}
	if len(ents) == 0 {
		return "is an empty directory, not an edition", false
	}
	b, err := os.ReadFile(filepath.Join(dest, editions.ManifestFile))
	if err != nil {
		return fmt.Sprintf("is a directory of %d entries without %s", len(ents), editions.ManifestFile), false
	}
	var m struct {
		Schema  string `json:"schema"`
		Version int    `json:"version"`
		Edition string `json:"edition"`
	}
	if json.Unmarshal(b, &m) != nil || m.Schema != editions.SchemaManifest || m.Edition == "" {
		return fmt.Sprintf("is a directory of %d entries whose %s is not a horizon manifest", len(ents), editions.ManifestFile), false
	}
	return "", true
}
