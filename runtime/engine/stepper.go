package engine

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The step interfaces (StepSpec, Stepper, StepperBackend) and the step
// modes are defined in runtime/device, below the engine and the device
// backends that implement them; these aliases keep the engine's
// vocabulary. A stepper reaches the cache through StepSpec.Experts, the
// one protocol of device.ExpertRows (Snapshot, Lease, Serve, Release).
type (
	StepSpec       = device.StepSpec
	Stepper        = device.Stepper
	StepperBackend = device.StepperBackend
)

// Step modes: how Generate issues a step (see runtime/device).
const (
	StepOps            = device.StepOps
	StepGraphFull      = device.StepGraphFull
	StepGraphSegmented = device.StepGraphSegmented
	StepGraphWait      = device.StepGraphWait
	StepPersistent     = device.StepPersistent
)

// StepModes lists the values LoadOptions.StepMode accepts.
func StepModes() []string { return device.StepModes() }

// useStepper builds the backend's stepper when mode asks for one ("" and
// "auto": when the backend has one; StepOps: never).
//
// With overlap the stepper must be graph-segmented (the only mode that
// serves misses between captured segments; every ExpertRows leases a
// group's resident rows, Lease.Resident); anything else is an error.
func (e *Engine) useStepper(mode string, layout qpack.RecordLayout, overlap bool) error {
	if overlap {
		switch mode {
		case "", "auto", StepGraphSegmented:
		default:
			return fmt.Errorf("engine: overlap %s needs step mode %s (or auto at partial residency), not %s", OverlapHitCompute, StepGraphSegmented, mode)
		}
	}
	switch mode {
	case "", "auto", StepGraphFull, StepGraphSegmented, StepGraphWait, StepPersistent:
	case StepOps:
		if overlap {
			return fmt.Errorf("engine: overlap %s needs step mode %s, not %s", OverlapHitCompute, StepGraphSegmented, mode)
		}
		return nil
	default:
		return fmt.Errorf("engine: step mode %q: want one of %v", mode, StepModes())
	}
	sb, ok := e.be.(StepperBackend)
	if !ok {
		if overlap {
			return fmt.Errorf("engine: overlap %s: the %s backend issues op by op only (it needs %s steps)", OverlapHitCompute, e.be.Name(), StepGraphSegmented)
		}
		if mode != "" && mode != "auto" {
			return fmt.Errorf("engine: step mode %s: the %s backend issues op by op only", mode, e.be.Name())
		}
		return nil
	}
	st, err := sb.NewStepper(StepSpec{
		Config: e.cfg, Plan: e.full, Weights: e.w, Experts: e.experts, Executor: e.exec, Layout: layout, Mode: mode,
		Overlap: overlap, MaxSeq: e.maxSeq, KCache: e.kCache, VCache: e.vCache, X: e.x, Logits: e.logits,
	})
	if err != nil {
		return fmt.Errorf("engine: device stepper: %w", err)
	}
	if overlap && (st == nil || st.Mode() != StepGraphSegmented) {
		got := StepOps
		if st != nil {
			got = st.Mode()
			err = st.Close()
		}
		return errors.Join(fmt.Errorf("engine: overlap %s needs %s steps, and this device runs %s (full residency runs %s: nothing misses)",
			OverlapHitCompute, StepGraphSegmented, got, StepGraphFull), err)
	}
	e.stepper = st // nil when the backend cannot step on this device
	e.overlap = overlap
	return nil
}

// StepMode is how steps are issued: StepOps, StepGraphFull or
// StepGraphSegmented.
func (e *Engine) StepMode() string {
	if e.stepper != nil {
		return e.stepper.Mode()
	}
	return StepOps
}

// Close releases the stepper, if any, the batched prefill's scratch, the
// prefetch's logits and the buffers New allocated.
func (e *Engine) Close() error {
	err := e.freeBatch()
	if e.stepper != nil {
		err = errors.Join(err, e.stepper.Close())
		e.stepper = nil
	}
	if e.pf != nil {
		err = errors.Join(err, e.be.Free(e.pf.logits))
		e.pf = nil
	}
	return errors.Join(err, e.freeOwned())
}
