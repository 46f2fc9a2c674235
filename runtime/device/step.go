package device

import (
	"time"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/plan"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Captured steps. A device backend that can run a whole decode step on the
// device (runtime/cuda captures it into CUDA graphs) implements
// StepperBackend; the engine hands it a StepSpec and drives the Stepper it
// returns instead of issuing the step's ops one by one.

// Step modes: how Generate issues a step.
const (
	// StepOps issues every op of a step from the host (forward.go), with a
	// host round trip per layer for the routing.
	StepOps = "ops"
	// StepGraphFull replays the whole step as one captured device graph,
	// routing on the device and reading expert rows through a device table
	// (full residency only).
	StepGraphFull = "graph-full"
	// StepGraphSegmented replays captured segments between the per-layer
	// routing reads, which the host serves through the cache (misses and
	// all) before the next segment (partial residency).
	StepGraphSegmented = "graph-segmented"
	// StepGraphWait replays one captured graph per step at partial
	// residency: the device routes and gathers resident rows through a
	// table the host keeps; a layer with a missing expert waits on the
	// device until the host has loaded it through the cache.
	StepGraphWait = "graph-wait"
	// StepPersistent runs the whole step (graph-full's routing and
	// tables) as one launch of a persistent kernel that interprets the
	// step plan's instructions, with dependencies as counters in device
	// memory instead of kernel boundaries (full residency only).
	StepPersistent = "persistent"
)

// StepModes lists the values LoadOptions.StepMode accepts.
func StepModes() []string {
	return []string{"auto", StepOps, StepGraphFull, StepGraphSegmented, StepGraphWait, StepPersistent}
}

// StepSpec is what a device stepper needs: the model, its weights, the
// expert rows and the engine's buffers (x, the KV caches and the logits the
// stepper shares with the op-by-op path; it allocates its own scratch).
type StepSpec struct {
	Config model.Config
	// Plan is the decode step's plan (runtime/plan: T = 1, head and
	// select), the single description of the forward pass that the
	// engine's op-by-op path interprets.
	Plan     *plan.Plan
	Weights  *Weights
	Experts  ExpertRows
	Executor executor.Executor  // a stepper issues the launch structure of its Strategy()
	Layout   qpack.RecordLayout // of the expert records
	MaxSeq   int
	// Mode is the requested step mode: "" or "auto" (graph-full at full
	// residency, else graph-segmented), or one of the graph modes.
	Mode string
	// Overlap asks a graph-segmented stepper to compute a layer's resident
	// experts' gate/up (Lease.Resident) while its misses copy
	// (Lease.Serve; runtime/engine overlap.go). Other modes refuse it.
	Overlap bool
	KCache  []backend.Tensor // [L] of [MaxSeq, Hkv*hd]
	VCache  []backend.Tensor
	X       backend.Tensor // residual stream [D]
	Logits  backend.Tensor // [V]
}

// Stepper runs whole steps on the device. Step runs token tok at position
// pos through every layer. When set is false the device already holds tok
// and pos (the previous step's head advanced them). With head it also
// computes the logits into StepSpec.Logits and returns the greedy next
// token, EOS ids excluded when suppress is set.
type Stepper interface {
	Step(tok, pos int, set, head, suppress bool) (next int, err error)
	// SetLookahead lets the stepper launch the next decode step before the
	// current one's token reaches the host (the device holds the token it
	// needs). The engine turns it off when it reads the logits of a step,
	// which a step launched ahead would overwrite, and for the step that
	// selects a request's last token, so that no step is left running into
	// the next request's prefill.
	SetLookahead(on bool)
	// Mode is StepGraphFull, StepGraphSegmented, StepGraphWait or StepPersistent.
	Mode() string
	Close() error
}

// PrefillTimer is a Stepper that times a request's prefill on the device
// (raw records' prefill_seconds): MarkAdmission notes the instant it is
// called (the engine calls it when the request is admitted); after the
// Step that ran the prompt's last position with its head (set and head
// true), PrefillDone returns the time from that instant until the prompt's
// last logits were complete on the device, before the selection kernel.
// TimesPrefill is false for a mode that cannot separate them (persistent:
// body, head and selection are one launch).
type PrefillTimer interface {
	TimesPrefill() bool
	MarkAdmission() error
	PrefillDone() (time.Duration, error)
}

// StepperBackend is a backend that can build a Stepper.
type StepperBackend interface {
	// NewStepper returns (nil, nil) when this device cannot run one.
	NewStepper(StepSpec) (Stepper, error)
}

// Overlap modes: whether a graph-segmented step computes a layer's
// resident experts' gate/up while its misses copy (runtime/engine
// overlap.go explains the schedule).
const (
	// OverlapOff: the group is computed after all its rows are published
	// (the default; "" means it too).
	OverlapOff = "off"
	// OverlapHitCompute computes the hits' gate/up while the misses copy.
	OverlapHitCompute = "hit-compute"
)

// OverlapCounter is a Stepper that counts what overlap did: the layers
// whose group mixed hits and misses (split), and the hit experts whose
// gate/up was launched before the misses were published (early).
type OverlapCounter interface {
	OverlapCounts() (split, early int64)
}
