package observe

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRSSPeakGrows(t *testing.T) {
	before, err := RSSPeakBytes()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	after, err := RSSPeakBytes()
	if err != nil {
		t.Fatal(err)
	}
	if after < before+60<<20 {
		t.Fatalf("VmHWM %d -> %d after touching 64 MiB", before, after)
	}
	_ = buf[len(buf)-1]
}

func TestProcStatusErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "status")
	if err := os.WriteFile(bad, []byte("Name: x\nVmHWM: 12 MB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := procStatusBytes(bad, "VmHWM:"); err == nil {
		t.Fatal("unit MB accepted")
	}
	if _, err := procStatusBytes(bad, "VmRSS:"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("missing key: %v, want ErrUnsupported", err)
	}
	if _, err := procStatusBytes(filepath.Join(dir, "none"), "VmHWM:"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("missing file: %v, want ErrUnsupported", err)
	}
}

func TestVRAMSampler(t *testing.T) {
	s, err := StartVRAM(0, DefaultVRAMInterval)
	if err != nil {
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("err %v, want ErrUnsupported", err)
		}
		return
	}
	// A cuda build on a GPU machine: the sampler must see used memory.
	r, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if r.DevicePeak <= 0 || len(r.Samples) < 1 {
		t.Fatalf("NVML sampler saw %+v", r)
	}
}
