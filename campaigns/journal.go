package campaigns

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// journalFile lists the finished workers of a run directory, one JSON
// object per line, appended and fsynced after each worker's record was
// checked. A line torn by a crash is dropped when the journal is opened.
const journalFile = "journal.jsonl"

// journalLock serialises the journal's writers: the runner, and under a
// job array (RunOptions.Scheduler) each task, which journals its own
// record (JournalTask), possibly on another host of a shared filesystem.
// Opening the journal takes it too, so that repairing a torn last line
// never cuts an append in flight. flock(2) is honoured across NFS clients
// (Linux emulates it with byte-range locks there).
const journalLock = "journal.lock"

// lockJournal takes the journal lock of runDir (waiting for it) and returns
// what releases it.
func lockJournal(runDir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(runDir, journalLock), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// journalEntry is one finished worker.
type journalEntry struct {
	// Key identifies the work: contract hash, campaign edition and device,
	// the configuration as frozen, the block, the artifact hash and the
	// build that runs the workers (RunOptions.Build). A record made for
	// other inputs, or by another build, is not reused.
	Key    string `json:"key"`
	Path   string `json:"path"` // record, relative to the run directory
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

type journal struct {
	runDir  string
	path    string
	entries map[string]journalEntry // by Path; the last entry wins
}

// openJournal reads the journal of runDir, cutting a torn last line.
func openJournal(runDir string) (*journal, error) {
	unlock, err := lockJournal(runDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	j := &journal{runDir: runDir, path: filepath.Join(runDir, journalFile), entries: map[string]journalEntry{}}
	b, err := os.ReadFile(j.path)
	if os.IsNotExist(err) {
		return j, nil
	} else if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i+1 != len(b) {
		// A crash tore the last append: drop it so the next append starts
		// on a fresh line.
		b = b[:i+1]
		if err := os.Truncate(j.path, int64(len(b))); err != nil {
			return nil, fmt.Errorf("repair %s: %w", j.path, err)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e journalEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Path == "" {
			continue
		}
		j.entries[e.Path] = e
	}
	return j, sc.Err()
}

// finished reports whether the record at path (relative to runDir) was
// journaled for key and still has the journaled hash.
func (j *journal) finished(runDir, key, path string) bool {
	return j.entries[path].Key == key && j.recorded(runDir, path)
}

// recorded reports whether some record at path (relative to runDir) was
// journaled and still has the journaled hash, whatever inputs it was made
// for: an estimate of the finished work before the work keys are known.
func (j *journal) recorded(runDir, path string) bool {
	e, ok := j.entries[path]
	if !ok {
		return false
	}
	sum, n, err := editions.HashFile(filepath.Join(runDir, path))
	return err == nil && sum == e.SHA256 && n == e.Bytes
}

// add appends an entry and syncs the journal.
func (j *journal) add(e journalEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	unlock, err := lockJournal(j.runDir)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	line := append(b, '\n')
	// A writer killed mid-append (an array task, possibly) leaves a torn
	// line: start on a fresh one so that only the torn entry is lost.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("append to %s: %w", j.path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	j.entries[e.Path] = e
	return nil
}

// workKey identifies one worker's inputs.
func workKey(c *Campaign, cfg *Configuration, block int, artifactSHA, build string) (string, error) {
	b, err := json.Marshal(struct {
		Contract string         `json:"contract"`
		Edition  string         `json:"edition"`
		Device   string         `json:"device"`
		Threads  int            `json:"threads"`
		Config   *Configuration `json:"config"`
		Block    int            `json:"block"`
		Artifact string         `json:"artifact"`
		Build    string         `json:"build,omitempty"`
	}{c.Contract.SHA256, c.Edition, c.Device, c.Threads, cfg, block, artifactSHA, build})
	if err != nil {
		return "", err
	}
	canon, err := contracts.CanonicalJSON(b)
	if err != nil {
		return "", err
	}
	return contracts.HashCanonical(canon), nil
}
