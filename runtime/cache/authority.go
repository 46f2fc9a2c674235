package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Authority is the host authority: every routed expert record of an
// artifact in process-owned anonymous memory, read-only once loaded.
//
// Memory layout is experts.bin's: record (l, e) at (l*E + e) * RecordSize.
// The mapping is MAP_ANON|MAP_PRIVATE, not a mapping of the file, so it does
// not depend on the artifact staying on disk or unchanged. After loading,
// every page is touched and the whole mapping is mprotected PROT_READ: a
// write through Record's slice kills the process with SIGSEGV (Go reports
// "unexpected fault address"), which is how "no write to the authority,
// ever" is enforced rather than promised.
type Authority struct {
	mem                   []byte
	layers, experts, size int
	sha256                string

	// phase is 0 during preparation and 1 after Cache.Admit. The counters
	// below are split by phase so that work done after admission is
	// reported as request-time work.
	phase         atomic.Int32
	artifactReads [2]atomic.Int64 // calls that read the artifact's experts.bin
	hashBytes     [2]atomic.Int64 // bytes hashed (load, Verify)
	writes        [2]atomic.Int64 // records written into mem

	// pins counts caches that registered mem with their device (registered
	// transport); Close refuses to unmap registered memory.
	pins atomic.Int32
}

// recordSource is what the authority reads: *qpack.Artifact in production,
// a fake in tests that need odd sizes.
type recordSource interface {
	ExpertsBytes() int64
	// ReadExperts fills dst (ExpertsBytes long) with experts.bin, hashing
	// it, and fails when the hash differs from the one the source lists.
	// It closes whatever it opened before returning.
	ReadExperts(dst []byte) (sha256hex string, err error)
}

// NewAuthority loads the authority from an opened artifact: it reads
// experts.bin whole into anonymous memory (ReadExperts verifies the SHA-256
// listed in artifact.json while reading, and closes the file), touches
// every page, and makes the memory read-only. The artifact is not read
// again.
func NewAuthority(art *qpack.Artifact) (*Authority, error) {
	cfg, err := art.Config()
	if err != nil {
		return nil, fmt.Errorf("host authority: %w", err)
	}
	return loadAuthority(art, cfg.NumLayers, cfg.NumExperts, art.Layout().Size)
}

// loadAuthority is NewAuthority for any record source.
func loadAuthority(src recordSource, layers, experts, size int) (*Authority, error) {
	if layers <= 0 || experts <= 0 || size <= 0 {
		return nil, fmt.Errorf("host authority: %d layers x %d experts of %d bytes: all must be positive", layers, experts, size)
	}
	total := int64(layers) * int64(experts) * int64(size)
	if got := src.ExpertsBytes(); got != total {
		return nil, fmt.Errorf("host authority: experts.bin has %d bytes, %d layers x %d experts x %d-byte records need %d", got, layers, experts, size, total)
	}
	if total != int64(int(total)) {
		return nil, fmt.Errorf("host authority: %d bytes do not fit this address space", total)
	}
	mem, err := unix.Mmap(-1, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("host authority: map %d bytes of anonymous memory: %w (is there enough RAM, or a ulimit -v?)", total, err)
	}
	a := &Authority{mem: mem, layers: layers, experts: experts, size: size}
	if err := a.fill(src); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("host authority: %w", err)
	}
	touchPages(mem)
	if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("host authority: make %d bytes read-only: %w", total, err)
	}
	return a, nil
}

// fill is the only code that reads the artifact or writes authority
// memory, and it counts both (and the hashing ReadExperts does) in the
// current phase. It runs once, from loadAuthority, before the memory is
// made read-only and before any cache can admit requests; a call after
// admission would show in RequestArtifactReads, RequestHashBytes and
// AuthorityWrites (and the write would fault).
func (a *Authority) fill(src recordSource) error {
	p := a.phase.Load()
	a.artifactReads[p].Add(1)
	sum, err := src.ReadExperts(a.mem)
	if err != nil {
		return fmt.Errorf("read expert records: %w", err)
	}
	a.hashBytes[p].Add(int64(len(a.mem)))
	a.writes[p].Add(int64(a.layers) * int64(a.experts))
	a.sha256 = sum
	return nil
}

// pageSink keeps touchPages' reads from being optimised away.
var pageSink atomic.Uint32

// touchPages reads one byte of every page so the whole authority is
// resident before admission (the reads fault in any page the kernel
// dropped or never materialised).
func touchPages(mem []byte) {
	page := os.Getpagesize()
	var s byte
	for off := 0; off < len(mem); off += page {
		s ^= mem[off]
	}
	if len(mem) > 0 {
		s ^= mem[len(mem)-1]
	}
	pageSink.Add(uint32(s))
}

// Layers is the number of routed layers.
func (a *Authority) Layers() int { return a.layers }

// Experts is the number of routed experts per layer.
func (a *Authority) Experts() int { return a.experts }

// RecordSize is the size of one expert record in bytes.
func (a *Authority) RecordSize() int { return a.size }

// SHA256 is the hex SHA-256 of the records as verified at load.
func (a *Authority) SHA256() string { return a.sha256 }

// Record returns the record of (layer, expert). The slice aliases
// read-only memory: writing to it crashes the process.
func (a *Authority) Record(layer, expert int) []byte {
	if layer < 0 || layer >= a.layers || expert < 0 || expert >= a.experts {
		panic(fmt.Sprintf("cache: authority record (%d, %d) outside %d layers x %d experts", layer, expert, a.layers, a.experts))
	}
	off := (layer*a.experts + expert) * a.size
	return a.mem[off : off+a.size : off+a.size]
}

// ErrAuthorityChanged is returned by Verify when the records no longer hash
// to the value verified at load.
var ErrAuthorityChanged = errors.New("host authority changed since load")

// Verify hashes the whole authority again and compares with the hash
// verified at load. It is a diagnostic for the end of a worker: called
// after admission its bytes count as request-time hash work, so do not call
// it while requests are measured.
func (a *Authority) Verify() error {
	a.hashBytes[a.phase.Load()].Add(int64(len(a.mem)))
	sum := sha256.Sum256(a.mem)
	if got := hex.EncodeToString(sum[:]); got != a.sha256 {
		return fmt.Errorf("sha256 %s, loaded %s: %w", got, a.sha256, ErrAuthorityChanged)
	}
	return nil
}

// admit switches the counters to request time.
func (a *Authority) admit() { a.phase.Store(1) }

// AuthorityCounters is the authority's own work, split at admission.
type AuthorityCounters struct {
	PrepArtifactReads    int64 `json:"prep_artifact_reads"`
	PrepHashBytes        int64 `json:"prep_hash_bytes"`
	PrepWrites           int64 `json:"prep_writes"`
	RequestArtifactReads int64 `json:"request_artifact_reads"`
	RequestHashBytes     int64 `json:"request_hash_bytes"`
	RequestWrites        int64 `json:"request_writes"`
}

// Counters returns the authority's counters.
func (a *Authority) Counters() AuthorityCounters {
	return AuthorityCounters{
		PrepArtifactReads:    a.artifactReads[0].Load(),
		PrepHashBytes:        a.hashBytes[0].Load(),
		PrepWrites:           a.writes[0].Load(),
		RequestArtifactReads: a.artifactReads[1].Load(),
		RequestHashBytes:     a.hashBytes[1].Load(),
		RequestWrites:        a.writes[1].Load(),
	}
}

// ErrAuthorityRegistered is returned by Authority.Close while a cache still
// has the authority registered with its device.
var ErrAuthorityRegistered = errors.New("host authority still registered with a device")

// Close unmaps the authority. Records obtained earlier must not be used
// afterwards. While a cache of the registered transport still has it
// page-locked (close the cache first) Close unmaps nothing and returns
// ErrAuthorityRegistered: the device may still read it.
func (a *Authority) Close() error {
	if a.mem == nil {
		return nil
	}
	if n := a.pins.Load(); n > 0 {
		return fmt.Errorf("host authority: close: %d bytes registered by %d cache(s); close the cache first: %w", len(a.mem), n, ErrAuthorityRegistered)
	}
	err := unix.Munmap(a.mem)
	a.mem = nil
	if err != nil {
		return fmt.Errorf("host authority: unmap: %w", err)
	}
	return nil
}
