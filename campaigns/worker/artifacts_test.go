package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns"
)

// TestPrepareArtifactsCheckpointScratch prepares the INT4 and FP16
// artifacts of one tiny synthetic checkpoint with and without
// Runtime.CheckpointScratch, as the runner does (one key a call):
//   - without, each artifact synthesises its checkpoint beside itself and
//     removes it;
//   - with, the checkpoint is synthesised once in the scratch directory,
//     reused by the second artifact and kept there; a checkpoint of another
//     seed that was left there is removed first.
//
// Either way both artifacts verify.
func TestPrepareArtifactsCheckpointScratch(t *testing.T) {
	c, err := campaigns.Parse([]byte(`edition: scratch-test
description: two artifacts of one tiny checkpoint
contract: {id: PERF-REAL-v1, sha256: 1b5fae0c70170f91f33608092c2156466cd075ff624e2fa33cfe041ec84a99bb}
device: cpu
evidence: E1
publication: internal
configurations:
  - id: tiny-int4
    checkpoint: {synthetic: {arch: olmoe-tiny, seed: 3}}
    expert_format: int4
    capacity: 16
    executor: grouped-v1
  - id: tiny-fp16
    checkpoint: {synthetic: {arch: olmoe-tiny, seed: 3}}
    expert_format: fp16
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
				// A checkpoint of another seed, left by an earlier run.
				if err := os.MkdirAll(filepath.Join(scratch, "synthetic-olmoe-tiny-seed9.checkpoint"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			inScratch := filepath.Join(scratch, "synthetic-olmoe-tiny-seed3.checkpoint")
			synths, seen := 0, map[string]bool{}
			rep := campaigns.Report{Say: func(string) {}, Step: func(what string) campaigns.StepReport {
				if strings.Contains(what, "synthesising") {
					synths++
				}
				// The quantising step begins once the checkpoint is written.
				if strings.Contains(what, "quantising") {
					for i := range c.Configurations {
						beside := filepath.Join(base, campaigns.ArtifactsDir, c.ArtifactKey(&c.Configurations[i])+".checkpoint")
						if _, err := os.Stat(filepath.Join(beside, "config.json")); err == nil {
							seen["beside"] = true
						}
					}
					if _, err := os.Stat(filepath.Join(inScratch, "config.json")); err == nil {
						seen["scratch"] = true
					}
				}
				return quietStep{}
			}}
			rt := Runtime{CheckpointScratch: scratch}
			for i := range c.Configurations {
				sub := *c
				sub.Configurations = c.Configurations[i : i+1]
				dirs, err := rt.PrepareArtifacts(context.Background(), &sub, base, rep)
				if err != nil {
					t.Fatal(err)
				}
				if err := checkArtifact(c, &c.Configurations[i], dirs[c.Configurations[i].ID]); err != nil {
					t.Fatalf("%s: %v", c.Configurations[i].ID, err)
				}
			}
			wantSynths, wantSeen := 2, "beside"
			if tc.scratch {
				wantSynths, wantSeen = 1, "scratch"
			}
			if synths != wantSynths || len(seen) != 1 || !seen[wantSeen] {
				t.Errorf("%d syntheses, checkpoint seen %v; want %d, only %s", synths, seen, wantSynths, wantSeen)
			}
			left, _ := filepath.Glob(filepath.Join(base, campaigns.ArtifactsDir, "*.checkpoint"))
			if len(left) != 0 {
				t.Errorf("checkpoints left beside the artifacts: %v", left)
			}
			if tc.scratch {
				if _, err := os.Stat(filepath.Join(inScratch, "config.json")); err != nil {
					t.Errorf("the scratch checkpoint is not kept for reuse: %v", err)
				}
				if _, err := os.Stat(filepath.Join(scratch, "synthetic-olmoe-tiny-seed9.checkpoint")); err == nil {
					t.Error("another seed's checkpoint was left in the scratch directory")
				}
			}
		})
	}
}

// quietStep is a campaigns.StepReport that draws nothing.
type quietStep struct{}

func (quietStep) Progress(done, total int64) {}
func (quietStep) End()                       {}
