package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// scheme maps a configuration's expert_format to the artifact scheme.
func scheme(format string) qpack.Scheme {
	if format == "fp16" {
		return qpack.SchemeFP16
	}
	return qpack.SchemeInt4
}

// prepareArtifacts makes sure every distinct (checkpoint, expert format) of
// the campaign has a verified artifact under runDir/artifacts and returns
// their directories by configuration id. An artifact already there is
// reused after its files are hashed against artifact.json and its identity
// is checked; a broken one is prepared again. Synthetic checkpoints are
// synthesised next to it (or under scratch, when set) and removed once
// prepared.
func prepareArtifacts(ctx context.Context, c *campaigns.Campaign, runDir, scratch string, rep campaigns.Report) (map[string]string, error) {
	say := rep.Say
	dirs := map[string]string{}
	done := map[string]bool{}
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		key := c.ArtifactKey(cfg)
		dir := filepath.Join(runDir, campaigns.ArtifactsDir, key)
		dirs[cfg.ID] = dir
		if done[key] {
			continue
		}
		done[key] = true
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Verifying hashes every file of the artifact: seconds to minutes
		// for a real checkpoint's, so it gets its line too.
		t := time.Now()
		if _, err := os.Stat(filepath.Join(dir, qpack.MetaFile)); err == nil {
			say(fmt.Sprintf("artifact %s: verifying the prepared files…", key))
		}
		err := checkArtifact(c, cfg, dir)
		if err == nil {
			say(fmt.Sprintf("artifact %s: verified in %s, reused", key, campaigns.Elapsed(time.Since(t))))
			continue
		}
		if !errors.Is(err, os.ErrNotExist) {
			say(fmt.Sprintf("artifact %s: %v; preparing it again", key, err))
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
		}
		t = time.Now()
		say(fmt.Sprintf("artifact %s: preparing (%s)…", key, preparePlan(cfg)))
		if err := makeArtifact(ctx, c, cfg, dir, key, scratch, rep); err != nil {
			return nil, fmt.Errorf("prepare the artifact of %s (%s): %w", cfg.ID, cfg.Checkpoint, err)
		}
		say(fmt.Sprintf("artifact %s: verifying the prepared files…", key))
		if err := checkArtifact(c, cfg, dir); err != nil {
			return nil, fmt.Errorf("artifact %s after preparation: %w", key, err)
		}
		say(fmt.Sprintf("artifact %s: ready in %s", key, campaigns.Elapsed(time.Since(t))))
	}
	return dirs, nil
}

// checkArtifact verifies an existing artifact; an absent one gives an error
// wrapping os.ErrNotExist.
func checkArtifact(c *campaigns.Campaign, cfg *campaigns.Configuration, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, qpack.MetaFile)); err != nil {
		return err
	}
	art, err := qpack.Open(dir)
	if err != nil {
		return err
	}
	if art.Scheme() != scheme(cfg.ExpertFormat) {
		return fmt.Errorf("expert scheme %s, want %s", art.Scheme(), scheme(cfg.ExpertFormat))
	}
	if cfg.Checkpoint.Synthetic != nil {
		info, err := synthInfo(art)
		if err != nil {
			return err
		}
		if info.Arch != cfg.Checkpoint.Synthetic.Arch || info.Seed != cfg.Checkpoint.Synthetic.Seed {
			return fmt.Errorf("prepared from synthetic %s seed %d", info.Arch, info.Seed)
		}
	}
	return art.Verify()
}

// preparePlan says what preparing a configuration's artifact does.
func preparePlan(cfg *campaigns.Configuration) string {
	if s := cfg.Checkpoint.Synthetic; s != nil {
		return fmt.Sprintf("synthesise %s seed %d, then quantise its experts to %s", s.Arch, s.Seed, cfg.ExpertFormat)
	}
	return fmt.Sprintf("quantise the experts of %s to %s", cfg.Checkpoint, cfg.ExpertFormat)
}

// makeArtifact synthesises (if needed) and prepares one artifact, each
// step reported through say (stepLines). Both steps write into temporary
// siblings that are renamed at the end, so a killed preparation leaves
// nothing that looks finished.
func makeArtifact(ctx context.Context, c *campaigns.Campaign, cfg *campaigns.Configuration, dir, key, scratch string, rep campaigns.Report) error {
	ckpt := ""
	if s := cfg.Checkpoint.Synthetic; s != nil {
		synth := func() error {
			step := rep.Begin(fmt.Sprintf("artifact %s: synthesising the checkpoint", key))
			if _, err := model.Synthesize(model.SynthOptions{Arch: s.Arch, Seed: s.Seed, OutDir: ckpt, Ctx: ctx, Progress: step.Progress}); err != nil {
				return err
			}
			step.End()
			return nil
		}
		if scratch == "" {
			ckpt = dir + ".checkpoint"
			if err := os.RemoveAll(ckpt); err != nil {
				return err
			}
			defer os.RemoveAll(ckpt)
			if err := synth(); err != nil {
				return err
			}
		} else {
			var reused bool
			var err error
			if ckpt, reused, err = scratchCheckpoint(scratch, s.Arch, s.Seed); err != nil {
				return err
			}
			if reused {
				rep.Say(fmt.Sprintf("artifact %s: reusing the synthetic checkpoint %s", key, ckpt))
			} else if err := synth(); err != nil {
				return err
			}
		}
	} else {
		ckpt = c.HFDir(cfg)
	}
	step := rep.Begin(fmt.Sprintf("artifact %s: quantising the experts to %s", key, cfg.ExpertFormat))
	if _, err := qpack.Prepare(qpack.PrepareOptions{Checkpoint: ckpt, Out: dir, Scheme: scheme(cfg.ExpertFormat), Ctx: ctx, Progress: step.Progress}); err != nil {
		return err
	}
	step.End()
	return nil
}

// synthInfo is the synthetic recipe an artifact was prepared from.
func synthInfo(art *qpack.Artifact) (model.SynthInfo, error) {
	raw := art.Meta.Identity.Source.Synthetic
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return model.SynthInfo{}, fmt.Errorf("artifact %s was not prepared from a synthetic checkpoint", art.Dir)
	}
	var info model.SynthInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return model.SynthInfo{}, fmt.Errorf("artifact %s synthetic identity: %w", art.Dir, err)
	}
	return info, nil
}

// scratchCheckpoint is where a synthetic checkpoint of arch and seed lives
// under a checkpoint scratch directory, and whether a complete one of this
// build's synthesis format is already there (Synthesize renames its
// directory into place only once every file is written). Scratch holds one
// checkpoint at a time: any other is removed first, so a campaign's
// artifacts of one checkpoint (FP16 and INT4, listed together) synthesise
// it once, and the disk holds one.
func scratchCheckpoint(scratch, arch string, seed uint64) (dir string, reused bool, err error) {
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return "", false, fmt.Errorf("checkpoint scratch: %w", err)
	}
	dir = filepath.Join(scratch, fmt.Sprintf("synthetic-%s-seed%d.checkpoint", arch, seed))
	if info, err := model.LoadSynthInfo(dir); err == nil && info.Format == model.SynthFormat && info.Arch == arch && info.Seed == seed {
		return dir, true, nil
	}
	entries, err := os.ReadDir(scratch)
	if err != nil {
		return "", false, fmt.Errorf("checkpoint scratch: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".checkpoint") || strings.Contains(e.Name(), ".checkpoint.") {
			if err := os.RemoveAll(filepath.Join(scratch, e.Name())); err != nil {
				return "", false, fmt.Errorf("checkpoint scratch: %w", err)
			}
		}
	}
	return dir, false, nil
}
