package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The synthetic olmoe-tiny artifact (4 layers x 16 experts, top-4, INT4
// records of 99840 bytes) is prepared once per test binary.
var (
	artifactOnce sync.Once
	artifactDir  string
	artifactErr  error
	artifactRoot string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if artifactRoot != "" {
		os.RemoveAll(artifactRoot)
	}
	os.Exit(code)
}

// testArtifact returns the directory of the shared test artifact.
func testArtifact(t testing.TB) string {
	t.Helper()
	artifactOnce.Do(func() {
		if dir := os.Getenv(childArtifactEnv); dir != "" {
			artifactDir = dir // a child process reuses its parent's
			return
		}
		artifactRoot, artifactErr = os.MkdirTemp("", "horizon-cache-test-")
		if artifactErr != nil {
			return
		}
		ckpt := filepath.Join(artifactRoot, "checkpoint")
		if _, err := model.Synthesize(model.SynthOptions{Arch: "olmoe-tiny", Seed: 1, OutDir: ckpt}); err != nil {
			artifactErr = fmt.Errorf("synthesize: %w", err)
			return
		}
		art := filepath.Join(artifactRoot, "artifact")
		if _, err := qpack.Prepare(qpack.PrepareOptions{Checkpoint: ckpt, Out: art, Scheme: qpack.SchemeInt4}); err != nil {
			artifactErr = fmt.Errorf("prepare: %w", err)
			return
		}
		artifactDir = art
	})
	if artifactErr != nil {
		t.Fatal(artifactErr)
	}
	return artifactDir
}

// openArtifact opens the shared test artifact and returns it with its
// model configuration.
func openArtifact(t testing.TB) (*qpack.Artifact, model.Config) {
	t.Helper()
	art, err := qpack.Open(testArtifact(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := art.Config()
	if err != nil {
		t.Fatal(err)
	}
	return art, cfg
}

// artifactAuthority loads the authority of the shared test artifact.
func artifactAuthority(t testing.TB) (*Authority, *qpack.Artifact, model.Config) {
	t.Helper()
	art, cfg := openArtifact(t)
	auth, err := NewAuthority(art)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { auth.Close() })
	return auth, art, cfg
}
