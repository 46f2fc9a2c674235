package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns"
)

// TestPrepareArtifactsCheckpointScratch prepares a tiny synthetic artifact
// with and without Runtime.CheckpointScratch: either way the artifact is
// complete and no checkpoint is left, and with a scratch directory the
// checkpoint was never written beside the artifact (a recorder on the
// progress lines would not show that, so the test watches the directories
// while the quantisation step runs).
func TestPrepareArtifactsCheckpointScratch(t *testing.T) {
	c, err := campaigns.Parse([]byte(`edition: scratch-test
description: a tiny artifact
contract: {id: PERF-REAL-v1, sha256: 1b5fae0c70170f91f33608092c2156466cd075ff624e2fa33cfe041ec84a99bb}
device: cpu
evidence: E1
publication: internal
configurations:
  - id: tiny
    checkpoint: {synthetic: {arch: olmoe-tiny, seed: 3}}
    expert_format: int4
    capacity: 16
    executor: grouped-v1
`), "scratch-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		scratch bool
	}{{"beside the artifact", false}, {"in a scratch directory", true}} {
		t.Run(tc.name, func(t *testing.T) {
			base, scratch := t.TempDir(), ""
			if tc.scratch {
				scratch = filepath.Join(t.TempDir(), "scratch")
			}
			key := c.ArtifactKey(&c.Configurations[0])
			beside := filepath.Join(base, campaigns.ArtifactsDir, key+".checkpoint")
			inScratch := filepath.Join(scratch, key+".checkpoint")
			seen := map[string]bool{}
			rep := campaigns.Report{Say: func(string) {}, Step: func(what string) campaigns.StepReport {
				// The quantising step begins once the checkpoint is written.
				if strings.Contains(what, "quantising") {
					for _, p := range []string{beside, inScratch} {
						if _, err := os.Stat(filepath.Join(p, "config.json")); err == nil {
							seen[p] = true
						}
					}
				}
				return quietStep{}
			}}
			dirs, err := Runtime{CheckpointScratch: scratch}.PrepareArtifacts(context.Background(), c, base, rep)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkArtifact(c, &c.Configurations[0], dirs["tiny"]); err != nil {
				t.Fatalf("prepared artifact: %v", err)
			}
			want := beside
			if tc.scratch {
				want = inScratch
			}
			if !seen[want] || len(seen) != 1 {
				t.Errorf("checkpoint seen at %v, want only %s", seen, want)
			}
			for _, p := range []string{beside, inScratch} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s left after preparation", p)
				}
			}
		})
	}
}

// quietStep is a campaigns.StepReport that draws nothing.
type quietStep struct{}

func (quietStep) Progress(done, total int64) {}
func (quietStep) End()                       {}
