// Package worker is the runtime side of a campaign: the only part of the
// benchmark harness that imports runtime/. It measures one (configuration,
// block) in its own process (Run: load the artifact, warm up, run the
// block's prompts on one evolving cache, write the raw record), prepares
// and verifies artifacts (runtime/model synthesis, runtime/qpack), and
// answers what the runner (package campaigns) must know of the runtime
// without importing it (Runtime: the names a configuration may use, a
// checkpoint's shape, artifact preparation and identity, the ceilings
// section of cuda reports).
package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/ceilings"
	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Runtime implements campaigns.Runtime with this build's runtime. The CLI
// hands it to campaigns.Run, campaigns.Reproduce and campaigns.Load.
type Runtime struct {
	// CheckpointScratch, when set, is the directory where synthetic
	// checkpoints are written instead of beside each artifact, one at a
	// time, the last kept for the next artifact of the same checkpoint
	// (scratchCheckpoint): the artifacts and the checkpoint (~29 GB for the
	// Qwen1.5-MoE shape) can then live on different file systems, and a
	// model's FP16 and INT4 artifacts synthesise it once.
	CheckpointScratch string
}

var _ campaigns.Runtime = Runtime{}

// Names lists the runtime's executors, placements, policies, transports,
// prefetch, overlap, step and prefill modes, KV cache element types and
// expert and dense activation dtypes.
func (Runtime) Names() campaigns.Names {
	return campaigns.Names{
		Executors: executor.Names(), Placements: cache.Placements(), Policies: cache.Policies(),
		Transports: cache.Transports(), Prefetch: engine.PrefetchModes(), Overlap: engine.OverlapModes(),
		StepModes: engine.StepModes(), Prefill: engine.PrefillModes(), PrefillTimed: prefillTimedDevices(),
		KV: kvNames(), ExpertActivations: engine.ExpertActivationNames(), DenseActivations: engine.DenseActivationNames(),
	}
}

// kvNames are engine.KVDTypes' names, sorted.
func kvNames() []string {
	return slices.Sorted(maps.Keys(engine.KVDTypes))
}

// Shape returns the experts per layer and top-k of a configuration's
// checkpoint: the preset of a synthetic one, config.json of an HF
// directory.
func (Runtime) Shape(c *campaigns.Campaign, cfg *campaigns.Configuration) (campaigns.Shape, error) {
	m, err := modelConfig(c, cfg)
	if err != nil {
		return campaigns.Shape{}, err
	}
	return campaigns.Shape{Experts: m.NumExperts, TopK: m.TopK, MaxPositions: m.MaxPositions}, nil
}

func modelConfig(c *campaigns.Campaign, cfg *campaigns.Configuration) (model.Config, error) {
	k := cfg.Checkpoint
	switch {
	case k.Synthetic != nil && k.HF != nil:
		return model.Config{}, errors.New("checkpoint: give either synthetic or hf, not both")
	case k.Synthetic != nil:
		p, err := model.LookupPreset(k.Synthetic.Arch)
		if err != nil {
			return model.Config{}, fmt.Errorf("checkpoint: synthetic arch %q is unknown (known: %s)",
				k.Synthetic.Arch, strings.Join(model.PresetNames(), ", "))
		}
		return p.Config, nil
	case k.HF != nil:
		if k.HF.Dir == "" {
			return model.Config{}, errors.New("checkpoint: hf.dir is empty")
		}
		dir := c.HFDir(cfg)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return model.Config{}, fmt.Errorf("checkpoint: hf.dir %s does not exist (download the checkpoint there, or fix the path; it is relative to the campaign file)", dir)
		}
		m, err := model.LoadConfig(dir)
		if err != nil {
			return model.Config{}, fmt.Errorf("checkpoint: %w", err)
		}
		return m, nil
	}
	return model.Config{}, errors.New("checkpoint is missing: give synthetic: {arch, seed} or hf: {dir, revision}")
}

// PrepareArtifacts prepares (or verifies and reuses) the artifacts of the
// campaign's configurations under base/artifacts (see prepareArtifacts).
func (r Runtime) PrepareArtifacts(ctx context.Context, c *campaigns.Campaign, base string, rep campaigns.Report) (map[string]string, error) {
	return prepareArtifacts(ctx, c, base, r.CheckpointScratch, rep)
}

// ArtifactSHA256 is the identity of a prepared artifact.
func (Runtime) ArtifactSHA256(dir string) (string, error) {
	a, err := qpack.Open(dir)
	if err != nil {
		return "", err
	}
	return a.Meta.ArtifactSHA256, nil
}

// HBMCeilings is package ceilings' HBM decode ceiling (tok/s) of each cuda
// configuration whose raw records are under dir; nil where they cannot be
// computed.
func (Runtime) HBMCeilings(dir string) map[string]float64 {
	confs, err := ceilings.LoadEdition(dir)
	if err != nil {
		return nil
	}
	return ceilings.HBMCeilings(confs, ceilings.DefaultOptions())
}

// CeilingsSection is package ceilings' sections for the raw records
// already written under dir, at heading level 3; where they cannot be
// computed (an architecture that is not a synthetic preset), a line that
// says why. It never fails the edition: the report only describes it.
func (Runtime) CeilingsSection(dir string) string {
	text, _ := ceilings.Section(dir)
	return text
}

// prefillTimedDevices is where the engine times the end of prefill: the
// cpu backend (backend.Synchronous: its ops have completed on return), and
// the cuda backend's captured steps but persistent ones (its stepper is a
// device.PrefillTimer: device events from admission to the prompt's last
// logits; TestStepperPrefillTimer holds it to that). Op by op on cuda the
// ops run asynchronously, so its prefill is not timed.
func prefillTimedDevices() []string {
	var out []string
	if sb, ok := any((*cpu.Backend)(nil)).(backend.Synchronous); ok && sb.Synchronous() {
		out = append(out, "cpu")
	}
	for _, m := range []string{engine.StepGraphFull, engine.StepGraphSegmented, engine.StepGraphWait} {
		out = append(out, "cuda/"+m)
	}
	// A batched prefill on cuda ends on the host after a wait for the
	// head's logits (backend.Waiter), whatever the step mode.
	return append(out, "cuda/prefill-batched")
}
