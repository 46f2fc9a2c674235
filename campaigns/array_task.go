package campaigns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// The task side of a job array (see array.go): what the worker subcommand
// does around worker.Run when it runs as an array task.

// ErrOtherBuild is returned by CheckBuild when a task runs another
// executable than the one the runner keyed its work with.
var ErrOtherBuild = errors.New("the executable is not the build the run was submitted with")

// CheckBuild refuses a task whose executable's SHA-256 is not build: the
// work key of its journal entry names the build, and an edition is one
// build. A binary replaced on the shared filesystem between submission and
// the task's start is caught here, before any work.
func CheckBuild(exe, build string) error {
	sum, _, err := editions.HashFile(exe)
	if err != nil {
		return fmt.Errorf("hash the executable %s: %w", exe, err)
	}
	if sum != build {
		return fmt.Errorf("%w: %s has SHA-256 %s, the run was submitted with %s; run the campaign again with this executable (it resubmits the task)",
			ErrOtherBuild, exe, sum, build)
	}
	return nil
}

// WaitPreparation waits until no run is preparing artifacts next to
// artifactDir (<base>/artifacts/<key>): it takes and releases a shared lock
// on <base>/artifacts.lock, which a preparing runner holds exclusively
// (prepareAll). A task started while its artifacts are still being
// prepared or verified thus loads them only once they are complete.
func WaitPreparation(artifactDir string) error {
	base := filepath.Dir(filepath.Dir(artifactDir))
	f, err := os.OpenFile(filepath.Join(base, artifactCacheLock), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("artifact lock: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		return fmt.Errorf("wait on the artifact lock %s: %w", f.Name(), err)
	}
	return nil
}

// JournalTask journals the record an array task's worker wrote, as the
// local runner does after each worker: the record (at its place in runDir)
// is read strictly, checked against the contract and its configuration
// (CheckRecord), hashed, and appended to the journal under key, under the
// journal lock. It returns the record's path relative to runDir and its
// SHA-256.
func JournalTask(runDir, key string, k *contracts.Contract, c *Campaign, cfg *Configuration, block int) (string, string, error) {
	rel := filepath.FromSlash(editions.RawPath(cfg.ID, block))
	path := filepath.Join(runDir, rel)
	rec, err := readRecord(path)
	if err != nil {
		return "", "", err
	}
	if err := CheckRecord(k, c, cfg, block, rec); err != nil {
		return "", "", err
	}
	sum, size, err := editions.HashFile(path)
	if err != nil {
		return "", "", err
	}
	j := &journal{runDir: runDir, path: filepath.Join(runDir, journalFile), entries: map[string]journalEntry{}}
	if err := j.add(journalEntry{Key: key, Path: rel, Bytes: size, SHA256: sum}); err != nil {
		return "", "", fmt.Errorf("journal %s: %w", rel, err)
	}
	return rel, sum, nil
}
