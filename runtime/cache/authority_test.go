package cache

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

func TestAuthorityFromArtifact(t *testing.T) {
	auth, art, cfg := artifactAuthority(t)
	bin, err := os.ReadFile(filepath.Join(art.Dir, qpack.ExpertsFile))
	if err != nil {
		t.Fatal(err)
	}
	size := art.Layout().Size
	if auth.Layers() != cfg.NumLayers || auth.Experts() != cfg.NumExperts || auth.RecordSize() != size {
		t.Fatalf("authority %d x %d x %d, artifact %d x %d x %d", auth.Layers(), auth.Experts(), auth.RecordSize(), cfg.NumLayers, cfg.NumExperts, size)
	}
	for l := 0; l < cfg.NumLayers; l++ {
		for e := 0; e < cfg.NumExperts; e++ {
			off := art.RecordOffset(l, e)
			if !bytes.Equal(auth.Record(l, e), bin[off:off+int64(size)]) {
				t.Fatalf("record (%d, %d) differs from experts.bin", l, e)
			}
		}
	}
	var listed string
	for _, f := range art.Meta.Files {
		if f.Path == qpack.ExpertsFile {
			listed = f.SHA256
		}
	}
	if auth.SHA256() != listed {
		t.Fatalf("authority sha256 %s, artifact.json lists %s", auth.SHA256(), listed)
	}
	want := AuthorityCounters{PrepArtifactReads: 1, PrepHashBytes: int64(len(bin)), PrepWrites: int64(cfg.NumLayers * cfg.NumExperts)}
	if got := auth.Counters(); got != want {
		t.Fatalf("counters %+v, want %+v", got, want)
	}
	if err := auth.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := auth.Counters().PrepHashBytes; got != 2*int64(len(bin)) {
		t.Fatalf("Verify before admission hashed %d bytes in total, want %d", got, 2*len(bin))
	}
}

// TestAuthorityMemory: the authority is anonymous (not a file mapping) and
// read-only, per /proc/self/maps.
func TestAuthorityMemory(t *testing.T) {
	auth := newFakeAuthority(t, 2, 3, 5000)
	start := uintptr(unsafe.Pointer(&auth.mem[0]))
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		fields := strings.Fields(sc.Text())
		lo, hi, _ := strings.Cut(fields[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		if uint64(start) < a || uint64(start) >= b {
			continue
		}
		if fields[1] != "r--p" {
			t.Errorf("authority mapped %s, want r--p (read-only, private)", fields[1])
		}
		if fields[4] != "0" || len(fields) > 5 {
			t.Errorf("authority mapping %q is backed by a file", sc.Text())
		}
		if uint64(start)+uint64(len(auth.mem)) > b {
			t.Errorf("authority [%#x, +%d) extends past the mapping %s", start, len(auth.mem), fields[0])
		}
		return
	}
	t.Fatalf("authority address %#x not in /proc/self/maps", start)
}

func TestAuthorityRejectsCorruptArtifact(t *testing.T) {
	src := testArtifact(t)
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		copyFile(t, filepath.Join(src, e.Name()), filepath.Join(dir, e.Name()))
	}
	bin := filepath.Join(dir, qpack.ExpertsFile)
	f, err := os.OpenFile(bin, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	f.ReadAt(one[:], 12345)
	one[0] ^= 0x10
	if _, err := f.WriteAt(one[:], 12345); err != nil {
		t.Fatal(err)
	}
	f.Close()
	art, err := qpack.Open(dir) // sizes still match: Open does not hash
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewAuthority(art); !errors.Is(err, qpack.ErrCorrupt) {
		t.Fatalf("NewAuthority on a corrupt experts.bin = %v, want qpack.ErrCorrupt", err)
	}
}

func TestAuthorityRejectsBadShapes(t *testing.T) {
	cases := []struct {
		name                  string
		src                   recordSource
		layers, experts, size int
		want                  string
	}{
		{"size mismatch", &fakeSource{layers: 2, experts: 2, size: 10}, 2, 3, 10, "experts.bin has 40 bytes, 2 layers x 3 experts x 10-byte records need 60"},
		{"zero experts", &fakeSource{}, 1, 0, 10, "all must be positive"},
		{"hash mismatch", &fakeSource{layers: 1, experts: 1, size: 10, corrupt: true}, 1, 1, 10, "read expert records: fake: sha256 mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadAuthority(tc.src, tc.layers, tc.experts, tc.size)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadAuthority = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRequestTimeAuthorityWork: after admission the authority's hashing,
// artifact reads and writes are request-time work and show in the cache's
// counters (the contract requires them to stay at zero; this shows the
// counters would see them).
func TestRequestTimeAuthorityWork(t *testing.T) {
	src := &fakeSource{layers: 1, experts: 4, size: 300}
	auth, err := loadAuthority(src, 1, 4, 300)
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	c, err := New(newCPUDevice(t), auth, 1, 4, Options{Capacity: 2, Spares: 1, Staging: 1, GroupSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.Admit()
	c.BeginRequest()
	if err := auth.Verify(); err != nil {
		t.Fatal(err)
	}
	d, err := c.EndRequest()
	if err != nil {
		t.Fatal(err)
	}
	if d.RequestHashBytes != 1200 || d.RequestArtifactReads != 0 || d.AuthorityWrites != 0 {
		t.Fatalf("request counters %+v, want 1200 hash bytes and nothing else", d)
	}

	// fill, the one artifact reader and authority writer, called after
	// admission. A sealed authority would crash on the write, so this runs
	// it on a writable (Go heap) authority of the same shape.
	w := &Authority{mem: make([]byte, 1200), layers: 1, experts: 4, size: 300}
	cw, err := New(newCPUDevice(t), w, 1, 4, Options{Capacity: 2, Spares: 1, Staging: 1, GroupSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	cw.Admit()
	cw.BeginRequest()
	if err := w.fill(src); err != nil {
		t.Fatal(err)
	}
	d, _ = cw.EndRequest()
	if d.RequestArtifactReads != 1 || d.AuthorityWrites != 4 || d.RequestHashBytes != 1200 {
		t.Fatalf("request counters after a fill %+v, want 1 read, 4 record writes, 1200 hash bytes", d)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

const (
	childEnv         = "HORIZON_CACHE_TEST_CHILD"
	childArtifactEnv = "HORIZON_CACHE_TEST_ARTIFACT"
)

// TestAuthorityWriteAfterAdmissionCrashes re-executes the test binary; the
// child loads the authority from the artifact, admits a cache, and writes
// one byte of a record. The write must kill the child with SIGSEGV, which
// the Go runtime reports as a fatal "unexpected fault address" with exit
// status 2 (a fault on memory outside the Go heap is not recoverable).
func TestAuthorityWriteAfterAdmissionCrashes(t *testing.T) {
	if os.Getenv(childEnv) == "write-authority" {
		auth, _, cfg := artifactAuthority(t)
		c, err := New(NewCPUDevice(cpu.New(1)), auth, cfg.NumLayers, cfg.NumExperts,
			Options{Capacity: 2, Spares: cfg.TopK, Staging: 1, GroupSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		c.Admit()
		rec := auth.Record(1, 3)
		fmt.Fprintf(os.Stderr, "child: writing to authority record at %p\n", &rec[0])
		rec[7] ^= 0xff
		fmt.Fprintln(os.Stderr, "child: the write succeeded")
		os.Exit(0)
	}
	dir := testArtifact(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAuthorityWriteAfterAdmissionCrashes$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=write-authority", childArtifactEnv+"="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	log := out.String()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child did not fail (err %v):\n%s", err, log)
	}
	if !strings.Contains(log, "child: writing to authority record") {
		t.Fatalf("child failed before the write:\n%s", log)
	}
	if strings.Contains(log, "the write succeeded") {
		t.Fatalf("write to the authority succeeded:\n%s", log)
	}
	if code := ee.ExitCode(); code != 2 {
		t.Errorf("child exit status %d, want 2 (Go's fatal signal exit)", code)
	}
	// code=0x2 is SEGV_ACCERR: the page is mapped but the access is not
	// permitted, i.e. the fault is the mprotect, not a stray pointer.
	for _, want := range []string{"unexpected fault address", "signal SIGSEGV", "code=0x2"} {
		if !strings.Contains(log, want) {
			t.Errorf("child output lacks %q:\n%s", want, log)
		}
	}
	var rec, fault uintptr
	for _, line := range strings.Split(log, "\n") {
		fmt.Sscanf(line, "child: writing to authority record at %v", &rec)
		fmt.Sscanf(line, "unexpected fault address %v", &fault)
		if strings.HasPrefix(line, "unexpected fault address") || strings.HasPrefix(line, "[signal SIGSEGV") || strings.HasPrefix(line, "fatal error") {
			t.Logf("child (exit %d): %s", ee.ExitCode(), line)
		}
	}
	if rec == 0 || fault != rec+7 {
		t.Errorf("fault address %#x, the write went to %#x+7", fault, rec)
	}
}
