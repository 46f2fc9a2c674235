package campaigns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/editions"
)

// stagingInfix marks a directory next to an edition that holds an edition
// being assembled (or one just replaced): ".<name>.partial-<random>". Such
// directories are hidden, never complete editions, and removed by the next
// run.
const stagingInfix = ".partial-"

// publish assembles an edition with write in a hidden staging directory
// next to dest and then moves it into place in one rename, so dest is
// either absent, the previous edition, or the complete new one. With force
// an existing edition is swapped out atomically (renameat2
// RENAME_EXCHANGE) and removed afterwards.
func publish(dest string, force bool, write func(dir string) error) (err error) {
	parent, base := filepath.Dir(dest), filepath.Base(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+base+stagingInfix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := write(tmp); err != nil {
		return err
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	if _, statErr := os.Lstat(dest); statErr == nil {
		// Something appeared (or was replaced) during the run: the same
		// rule as before it, so that --force still replaces editions only.
		if err := checkDestination(dest, force); err != nil {
			return fmt.Errorf("%w (it appeared during the run)", err)
		}
		if err := exchange(tmp, dest); err != nil {
			return fmt.Errorf("replace %s: %w", dest, err)
		}
		// tmp holds the previous edition now.
		if err := editions.SyncDir(parent); err != nil {
			return err
		}
		return os.RemoveAll(tmp)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("publish %s: %w", dest, err)
	}
	return editions.SyncDir(parent)
}

// exchange swaps two paths atomically; where the filesystem cannot, it
// moves b aside into a staging name first (a short window without b).
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if err == nil || !(errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)) {
		return err
	}
	aside := a + "-old"
	if err := os.Rename(b, aside); err != nil {
		return err
	}
	if err := os.Rename(a, b); err != nil {
		return errors.Join(err, os.Rename(aside, b))
	}
	return os.Rename(aside, a)
}

// syncTree fsyncs every directory under root (files were synced when
// written).
func syncTree(root string) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return editions.SyncDir(p)
	})
}
