//go:build cuda

package cuda

import (
	"fmt"
	"slices"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Step mode persistent (device.StepPersistent): a graph-full step whose
// body and head are one launch of the persistent decode kernel
// (kernels/persistent.cu) instead of ~130 (OLMoE) or ~290 (Qwen) kernel
// launches. The stepper records the launches step_plan.go issues for the
// plan, encodes them as a program (persistent_program.go) and captures one
// launch of the interpreter over it; everything else (slots, lookahead,
// the device tables of pinned rows, the host's reading of the routed ids
// and the cache's counters) is graph-full's.

// persistentBuild is the build for records of scheme s.
func persistentBuild(s qpack.Scheme) int {
	if s == qpack.SchemeFP16 {
		return 1
	}
	return 0
}

// recordTuning is the tuning a persistent step is recorded with: the one
// variant of each row kernel the interpreter runs (FP16 matvec 4 rows per
// task, grouped gate/up 2+2 rows, grouped down 4 rows x 2 chunks), whose
// rows are those of every other variant. The rest of t is kept.
func recordTuning(t tuning) tuning {
	t.f16NR, t.gateUpNRP, t.downVariant = 4, 2, 1 // downVariants[0] is r4
	return t
}

// recordLaunches runs issue with the backend recording its launches instead
// of making them; owner thread only.
func (b *Backend) recordLaunches(issue func() error) ([]launchRec, error) {
	var recs []launchRec
	b.rec = &recs
	saved := b.tune
	b.tune = recordTuning(saved)
	defer func() { b.rec, b.tune = nil, saved }()
	if err := issue(); err != nil {
		return nil, err
	}
	return recs, nil
}

// record is launch while recording.
func (b *Backend) record(fn cu.Function, grid, blk, smem int, args []uint64) error {
	name, ok := b.fnName[fn]
	if !ok {
		return fmt.Errorf("recording a launch: unknown kernel")
	}
	*b.rec = append(*b.rec, launchRec{name: name, grid: grid, block: blk, smem: smem, args: append([]uint64(nil), args...), tag: b.recTag})
	return nil
}

// persistentGraph records issue, encodes it as a program in device memory
// and captures one launch of the persistent kernel over it; owner thread.
func (s *stepper) persistentGraph(what string, issue func() error) (*graph, error) {
	b := s.b
	recs, err := b.recordLaunches(issue)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	build := persistentBuild(s.lay.Scheme)
	fn := b.k.persistent[build]
	smem := 0
	for _, r := range recs {
		smem = max(smem, r.smem)
	}
	per, err := blocksPerSM(fn, persistentBlock, smem)
	if err != nil {
		return nil, fmt.Errorf("%s: occupancy of %s: %w", what, persistentBuilds[build], err)
	}
	if per < 1 {
		return nil, fmt.Errorf("%s: %s with %d bytes of shared memory does not fit a multiprocessor", what, persistentBuilds[build], smem)
	}
	o := programOptions{downOff: s.lay.Down.Offset, downBytes: s.lay.Down.Bytes, prefetch: !b.tune.noPrefetch}
	if !b.tune.keepGrids {
		o.blocks = per * b.sms
	}
	prog, err := encodeProgram(recs, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for _, in := range prog {
		smem = max(smem, in.smem)
	}
	if lim := b.persistentSmem[build]; smem > lim {
		return nil, fmt.Errorf("%s: an instruction needs %d bytes of shared memory, above the %d %s has", what, smem, lim, persistentBuilds[build])
	}
	if p2, err := blocksPerSM(fn, persistentBlock, smem); err != nil || p2 < per {
		return nil, fmt.Errorf("%s: the regridded program's %d bytes of shared memory lower %s's occupancy (%v)", what, smem, persistentBuilds[build], err)
	}
	enc := encodeInstrs(prog)
	t, err := b.alloc(len(enc), backend.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: program: %w", what, err)
	}
	s.bufs = append(s.bufs, t)
	if err := b.copyIn(t.ptr, unsafe.Pointer(&enc[0]), len(enc)); err != nil {
		return nil, fmt.Errorf("%s: program: %w", what, err)
	}
	if err := s.persistentCtl(len(prog)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var trace cu.DevicePtr
	if b.tune.traceUnits {
		units := 0
		for _, in := range prog {
			units += in.units
		}
		tt, err := b.alloc(3*8*units, backend.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: trace: %w", what, err)
		}
		s.bufs = append(s.bufs, tt)
		trace = tt.ptr
		b.traced = s
	}
	s.programs = append(s.programs, prog)
	s.traces = append(s.traces, trace)
	grid := per * b.sms
	return s.capture(what, func() error {
		return b.launch(fn, grid, persistentBlock, smem, argPtr(t.ptr), argInt(len(prog)), argPtr(s.ctl), argPtr(trace))
	})
}

// persistentCtl makes sure the control block (ticket, finished blocks,
// done[n]) holds n instructions, zeroed. Every program's launch leaves it
// zeroed again, so the programs of a stepper share it.
func (s *stepper) persistentCtl(n int) error {
	if n <= s.ctlN {
		return nil
	}
	t, err := s.b.alloc(4*(2+n), backend.Bytes)
	if err != nil {
		return fmt.Errorf("control block: %w", err)
	}
	s.bufs = append(s.bufs, t)
	zero := make([]uint32, 2+n)
	if err := s.b.copyIn(t.ptr, unsafe.Pointer(&zero[0]), 4*len(zero)); err != nil {
		return fmt.Errorf("control block: %w", err)
	}
	s.ctl, s.ctlN = t.ptr, n
	return nil
}

// persistentProfile reads the traces of the traced stepper's programs and
// returns the per-instruction table (profileTable) of the program that ran
// last, at bw bytes/s of HBM bandwidth. The device must be idle.
func (b *Backend) persistentProfile(bw float64) (string, error) {
	s := b.traced
	if s == nil {
		return "", fmt.Errorf("no persistent stepper was traced (tuning.traceUnits)")
	}
	best, bestEnd := -1, uint64(0)
	var bestTrace []uint64
	for i, prog := range s.programs {
		units := 0
		for _, in := range prog {
			units += in.units
		}
		tr := make([]uint64, 3*units)
		if err := b.o.do(func() error {
			if err := b.compute.Synchronize(); err != nil {
				return err
			}
			return cu.MemcpyDtoH(unsafe.Pointer(&tr[0]), s.traces[i], int64(8*len(tr)))
		}); err != nil {
			return "", fmt.Errorf("trace of program %d: %w", i, err)
		}
		if end := slices.Max(tr); tr[0] != 0 && end > bestEnd {
			best, bestEnd, bestTrace = i, end, tr
		}
	}
	if best < 0 {
		return "", fmt.Errorf("no program ran")
	}
	return profileTable(s.programs[best], bestTrace, int64(s.lay.Gate.Bytes+s.lay.Up.Bytes), int64(s.lay.Down.Bytes), bw)
}
