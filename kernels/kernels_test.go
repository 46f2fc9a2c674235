package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPTXIsFresh checks, without nvcc, that every embedded PTX was generated
// from the current sources: the SHA-256 recorded in its first line must match
// its .cu and every header the .cu includes.
func TestPTXIsFresh(t *testing.T) {
	mods := Modules()
	if len(mods) == 0 {
		t.Fatal("no PTX modules embedded")
	}
	for _, m := range mods {
		srcs, err := Sources(m)
		if err != nil {
			t.Fatal(err)
		}
		if srcs[0].File != m+".cu" {
			t.Errorf("%s.ptx: first source is %s, want %s.cu", m, srcs[0].File, m)
		}
		for _, s := range srcs {
			b, err := os.ReadFile(s.File)
			if err != nil {
				t.Errorf("%s.ptx: source %s: %v", m, s.File, err)
				continue
			}
			sum := sha256.Sum256(b)
			if got := hex.EncodeToString(sum[:]); got != s.SHA256 {
				t.Errorf("%s.ptx is stale: %s has sha256 %s, the PTX was built from %s; run `make kernels` (needs nvcc: `make cuda-deps`)",
					m, s.File, got, s.SHA256)
			}
		}
	}
}

// TestEverySourceHasPTX: a .cu without a PTX (or a PTX without its .cu)
// means `make kernels` was not run after adding or removing a file.
func TestEverySourceHasPTX(t *testing.T) {
	cus, err := filepath.Glob("*.cu")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range Modules() {
		have[m] = true
	}
	for _, cu := range cus {
		m := strings.TrimSuffix(cu, ".cu")
		if !have[m] {
			t.Errorf("%s has no %s.ptx: run `make kernels`", cu, m)
		}
		delete(have, m)
	}
	for m := range have {
		t.Errorf("%s.ptx has no %s.cu source", m, m)
	}
}

// TestHeadersAreRecorded: every local header a .cu includes is hashed in its
// PTX, so editing common.cuh makes every PTX that uses it stale.
func TestHeadersAreRecorded(t *testing.T) {
	for _, m := range Modules() {
		src, err := os.ReadFile(m + ".cu")
		if err != nil {
			t.Fatal(err)
		}
		srcs, err := Sources(m)
		if err != nil {
			t.Fatal(err)
		}
		recorded := map[string]bool{}
		for _, s := range srcs {
			recorded[s.File] = true
		}
		for _, line := range strings.Split(string(src), "\n") {
			if h, ok := strings.CutPrefix(line, `#include "`); ok {
				h, _, _ = strings.Cut(h, `"`)
				if !recorded[h] {
					t.Errorf("%s.cu includes %s but %s.ptx does not record its hash: run `make kernels`", m, h, m)
				}
			}
		}
	}
}

func TestPTXIsNULTerminated(t *testing.T) {
	p, err := PTX("matvec_f16")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p, "\x00") || !strings.Contains(p, ".entry matvec_f16_r1_s") {
		t.Fatal("matvec_f16 PTX: want NUL-terminated text with the matvec_f16_r1_s entry")
	}
	if _, err := PTX("nope"); err == nil {
		t.Fatal("PTX(nope): no error")
	}
}
