package campaigns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
)

// The modes whose rules Validate states (the registered transport has no
// staging ring, overlap excludes prefetch and needs cuda and partial
// residency, FP16 expert activations need INT4 experts and a batched
// prefill, FP16 dense activations a batched prefill). They are the
// runtime's names (runtime/cache, runtime/engine) spelled here so that
// this package does not import runtime/;
// campaigns/worker's tests pin them to the runtime's constants.
const (
	TransportStaged     = "staged" // the default transport
	TransportRegistered = "registered"
	PrefetchOff         = "off" // the default prefetch
	PrefetchNextLayer   = "next-layer"
	OverlapOff          = "off" // the default overlap
	OverlapHitCompute   = "hit-compute"
	StepAuto            = "auto" // the default step mode
	StepOps             = "ops"
	StepGraphFull       = "graph-full"
	StepGraphSegmented  = "graph-segmented"
	StepPersistent      = "persistent"
	PrefillAuto         = "auto" // the default prefill
	PrefillBatched      = "batched"
	PrefillToken        = "token"
	KVFP32              = "fp32" // the default KV cache element type
	KVFP16              = "fp16"
	ExpertActFP32       = "fp32" // the default expert activation dtype
	ExpertActFP16       = "fp16"
	DenseActFP32        = "fp32" // the default dense activation dtype
	DenseActFP16        = "fp16"
)

// Names are the runtime's names a configuration may use. PrefillTimed
// lists where the runtime times the end of prefill (prefill_seconds a
// number): a device by name (every step mode) or device/step-mode; a
// contract that requires prefill_seconds elsewhere is refused at
// validation, before any work.
type Names struct {
	Executors, Placements, Policies, Transports, Prefetch, Overlap, StepModes, Prefill []string
	PrefillTimed                                                                       []string
	// KV lists the KV cache element types (engine.KVDTypes: fp32, fp16).
	KV []string
	// ExpertActivations lists the routed experts' activation dtypes
	// (engine.ExpertActivationNames: fp32, fp16).
	ExpertActivations []string
	// DenseActivations lists the dense projections' activation dtypes
	// (engine.DenseActivationNames: fp32, fp16).
	DenseActivations []string
}

// Shape is what validation needs of a checkpoint's architecture.
type Shape struct {
	Experts int // routed experts per layer
	TopK    int
	// MaxPositions is the model's context (max_position_embeddings); 0
	// when unknown (nothing is checked).
	MaxPositions int
}

// Catalog answers what validating a campaign needs of the runtime: its
// names and each checkpoint's shape. worker.Runtime implements it.
type Catalog interface {
	Names() Names
	// Shape returns the shape of a configuration's checkpoint (a synthetic
	// preset, or an HF directory's config.json resolved with c.HFDir), or
	// why it has none, in one line that Validate reports.
	Shape(c *Campaign, cfg *Configuration) (Shape, error)
}

// Runtime is everything the runner needs from the runtime side
// (campaigns/worker) without importing it: the catalog for validation,
// artifact preparation and identity, and the one report section that
// needs the architectures' tensor shapes. The runner itself only launches
// processes, journals, locks and publishes; the CLI passes worker.Runtime.
type Runtime interface {
	Catalog
	// PrepareArtifacts makes sure every distinct (checkpoint, expert
	// format) of c has a verified artifact under base/ArtifactsDir/<key>
	// (key: Campaign.ArtifactKey) and returns their directories by
	// configuration id.
	// It reports through rep (lines, and its long steps' progress).
	PrepareArtifacts(ctx context.Context, c *Campaign, base string, rep Report) (map[string]string, error)
	// ArtifactSHA256 is a prepared artifact's identity (part of work keys).
	ArtifactSHA256(dir string) (string, error)
	Ceilings
}

// Ceilings is what a cuda report needs of the runtime about ceilings.
type Ceilings interface {
	// CeilingsSection is the report's ceilings section for the raw records
	// under an edition directory (report.EditionInput.Ceilings).
	CeilingsSection(editionDir string) string
	// HBMCeilings is each cuda configuration's HBM decode ceiling in tok/s
	// (report.EditionInput.HBMCeilings), by configuration id.
	HBMCeilings(editionDir string) map[string]float64
}

// ArtifactsDir holds the prepared artifacts inside a run directory (or a
// shared artifact cache).
const ArtifactsDir = "artifacts"

var unsafeName = regexp.MustCompile(`[^a-z0-9.-]+`)

// ArtifactKey names the artifact of a configuration; configurations with
// the same checkpoint and expert format share it.
func (c *Campaign) ArtifactKey(cfg *Configuration) string {
	k := cfg.Checkpoint
	if k.Synthetic != nil {
		return fmt.Sprintf("synthetic-%s-seed%d-%s", unsafeName.ReplaceAllString(k.Synthetic.Arch, "-"), k.Synthetic.Seed, cfg.ExpertFormat)
	}
	abs, err := filepath.Abs(c.HFDir(cfg))
	if err != nil {
		abs = c.HFDir(cfg)
	}
	sum := sha256.Sum256([]byte(abs + "\x00" + k.HF.Revision))
	base := unsafeName.ReplaceAllString(filepath.Base(abs), "-")
	return fmt.Sprintf("hf-%s-%s-%s", base, hex.EncodeToString(sum[:6]), cfg.ExpertFormat)
}
