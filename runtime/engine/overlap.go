package engine

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// Miss/hit overlap (LoadOptions.Overlap "hit-compute").
//
// At partial residency a layer's routed group can mix resident experts
// (hits) and experts the cache must copy from the host authority
// (misses). Without overlap the device waits while the host serves the
// whole group (Lease, then Serve: the misses' copies run on the copy
// stream and are published after completion), and only then computes the
// group. With hit-compute the graph-segmented stepper takes the group's
// lease, launches the gate/up projections of its resident rows
// (Lease.Resident) on the compute stream, then serves the lease
// (Lease.Serve), so the misses' copies run on the copy stream while the
// hits compute; the misses' gate/up and the group's down projection
// follow once the copies are published. The lease counts the group once,
// at Serve, exactly as without overlap. Each expert's gate/up
// output is computed by the same kernel rows whether it runs early or
// late, and the down projection combines in routed order as before, so
// the bits match overlap off.
//
// Only the captured graph-segmented step can do it (runtime/cuda): the op
// by op step and the CPU backend compute a group with one executor call.

// Overlap modes, the values of LoadOptions.Overlap (see runtime/device).
const (
	OverlapOff        = device.OverlapOff
	OverlapHitCompute = device.OverlapHitCompute
)

// OverlapModes lists the values LoadOptions.Overlap accepts besides "".
func OverlapModes() []string { return []string{OverlapOff, OverlapHitCompute} }

// ParseOverlap returns the overlap mode of s ("" is OverlapOff) or an
// error naming the modes.
func ParseOverlap(s string) (string, error) {
	switch s {
	case "", OverlapOff:
		return OverlapOff, nil
	case OverlapHitCompute:
		return OverlapHitCompute, nil
	}
	return "", fmt.Errorf("overlap %q: want one of %v", s, OverlapModes())
}

// OverlapCounter is defined in runtime/device.
type OverlapCounter = device.OverlapCounter

// OverlapMode is the overlap mode in force: OverlapHitCompute when the
// engine's stepper overlaps, else OverlapOff.
func (e *Engine) OverlapMode() string {
	if e.stepper != nil && e.overlap {
		return OverlapHitCompute
	}
	return OverlapOff
}

// OverlapCounts reports the stepper's overlap counters since Load; ok is
// false when overlap is off or the stepper does not count.
func (e *Engine) OverlapCounts() (split, early int64, ok bool) {
	oc, isCounter := e.stepper.(OverlapCounter)
	if !e.overlap || !isCounter {
		return 0, 0, false
	}
	split, early = oc.OverlapCounts()
	return split, early, true
}
