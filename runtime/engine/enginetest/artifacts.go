// Package enginetest holds test helpers shared by every package that runs
// the engine on real (synthetic) artifacts: the engine's own tests, the
// cache's and the CUDA backend's.
package enginetest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Artifacts synthesises each tiny architecture once (seed 1, as the golden
// streams use) and prepares it once per expert scheme, for the life of a
// test binary. The zero value is ready to use; call Cleanup from TestMain.
type Artifacts struct {
	mu   sync.Mutex
	root string
	dirs map[string]string
}

// Get returns the prepared artifact of arch with the given scheme.
func (a *Artifacts) Get(t testing.TB, arch string, scheme qpack.Scheme) *qpack.Artifact {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dirs == nil {
		a.dirs = map[string]string{}
	}
	key := arch + "/" + string(scheme)
	dir, ok := a.dirs[key]
	if !ok {
		if a.root == "" {
			var err error
			if a.root, err = os.MkdirTemp("", "horizon-artifacts-"); err != nil {
				t.Fatal(err)
			}
		}
		ckpt := filepath.Join(a.root, arch)
		if _, err := os.Stat(ckpt); err != nil {
			if _, err := model.Synthesize(model.SynthOptions{Arch: arch, Seed: 1, OutDir: ckpt}); err != nil {
				t.Fatal(err)
			}
		}
		dir = filepath.Join(a.root, arch+"-"+string(scheme))
		if _, err := qpack.Prepare(qpack.PrepareOptions{Checkpoint: ckpt, Out: dir, Scheme: scheme}); err != nil {
			t.Fatal(err)
		}
		a.dirs[key] = dir
	}
	art, err := qpack.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return art
}

// Cleanup removes every checkpoint and artifact made.
func (a *Artifacts) Cleanup() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.root != "" {
		os.RemoveAll(a.root)
		a.root, a.dirs = "", nil
	}
}
