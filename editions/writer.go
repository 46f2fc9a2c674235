package editions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/horizon-runmap/horizon/schemas"
)

// Marshal encodes a document as indented JSON with a final newline and
// validates the result against the schema its "schema" field names: a
// writer never writes a document its own schema rejects.
func Marshal(doc any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode %T: %w", doc, err)
	}
	if err := schemas.Validate(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("%T: %w", doc, err)
	}
	return buf.Bytes(), nil
}

// WriteDoc marshals and validates doc (see Marshal) and writes it to path
// atomically (see WriteFileAtomic).
func WriteDoc(path string, doc any) error {
	b, err := Marshal(doc)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteFileAtomic(path, b)
}

// WriteFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path, then syncs the directory: a reader (or a process
// resumed after a crash) sees either the old file or the whole new one.
// Missing parent directories are created.
func WriteFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that renames inside it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
