// Package outdir holds the rule every command that writes a directory
// follows: the destination must be absent or empty, the content is written
// into a temporary sibling, and only a complete result is renamed into place.
package outdir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrNotEmpty marks an output path that already has content.
var ErrNotEmpty = errors.New("output already exists")

// CheckEmptyOrAbsent accepts a path that does not exist or is an empty
// directory, and otherwise says what is in the way.
func CheckEmptyOrAbsent(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("output %s exists and is not a directory: %w", dir, ErrNotEmpty)
	}
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("output directory %s is not empty (it holds %s); choose a new directory: %w", dir, names[0], ErrNotEmpty)
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("output directory: %w", err)
	}
	return nil
}

// TempSibling creates (with its parents) a world-readable temporary
// directory next to out, named from prefix, where a command assembles its
// output before renaming it to out. The caller removes it on failure.
func TempSibling(out, prefix string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		os.RemoveAll(tmp)
		return "", err
	}
	return tmp, nil
}
