//go:build cuda

package cuda

import (
	"encoding/binary"
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// An attention trace of a captured step (tuning.attTrace): every layer's
// decode attention runs as attention_trace_step (kernels/decode.cu), whose
// blocks each record on the device's clock when they became resident, when
// their dependency wait returned, when they ended, and on which SM. Unlike
// tuning.timeline it adds no node to the graph, so the step keeps its
// schedule (programmatic dependent launches, Qwen's shared-expert branch);
// it was written to see why that branch makes the attention ~200 µs slower
// at depth 8,064 (results/h200-s28, call 7). The arithmetic is
// attention_step's: the same bits.

// attTraceWords is one block's record: entry, start and end (globaltimer
// ns) and (SM << 32) | cycles run.
const attTraceWords = 4

// attTraceBuf is the live stepper's trace buffer: layers x blocks records.
type attTraceBuf struct {
	owner          *stepper
	ptr            cu.DevicePtr
	layers, blocks int
}

// attTraceBlocks is one layer's attention blocks (heads x attSplit).
func (s *stepper) attTraceBlocks() int { return s.cfg.NumHeads * attSplit }

// attTraceLen is the trace buffer's size in uint64 words.
func (s *stepper) attTraceLen() int { return s.L * s.attTraceBlocks() * attTraceWords }

// attTraceAt is layer l's part of the trace buffer.
func (s *stepper) attTraceAt(l int) cu.DevicePtr {
	return s.atr + cu.DevicePtr(8*l*s.attTraceBlocks()*attTraceWords)
}

// attTraceOn reports whether this stepper's captured attention launches
// record the trace.
func (s *stepper) attTraceOn() bool { return s.atr != 0 && s.b.rec == nil }

// registerAttTrace makes s's buffer the one readAttTrace reads; owner
// thread.
func (s *stepper) registerAttTrace() {
	s.b.attTrace = &attTraceBuf{owner: s, ptr: s.atr, layers: s.L, blocks: s.attTraceBlocks()}
}

// dropAttTrace forgets s's buffer when it is the registered one; owner
// thread.
func (s *stepper) dropAttTrace() {
	if s.b.attTrace != nil && s.b.attTrace.owner == s {
		s.b.attTrace = nil
	}
}

// readAttTrace reads the registered trace of the last completed step;
// owner thread, after the step completed.
func (b *Backend) readAttTrace() ([]attLaunch, error) {
	tr := b.attTrace
	if tr == nil {
		return nil, fmt.Errorf("cuda: no attention trace (tuning.attTrace and a captured step)")
	}
	n := tr.layers * tr.blocks * attTraceWords
	raw, err := b.read(tr.ptr, 8*n)
	if err != nil {
		return nil, fmt.Errorf("cuda: attention trace: %w", err)
	}
	out := make([]attLaunch, tr.layers)
	for l := range out {
		bl := make([]attBlock, tr.blocks)
		for i := range bl {
			w := raw[8*attTraceWords*(l*tr.blocks+i):]
			smc := binary.LittleEndian.Uint64(w[24:])
			bl[i] = attBlock{entry: binary.LittleEndian.Uint64(w), start: binary.LittleEndian.Uint64(w[8:]),
				end: binary.LittleEndian.Uint64(w[16:]), sm: int(smc >> 32), cycles: uint32(smc)}
		}
		out[l] = summariseAttLaunch(bl)
	}
	return out, nil
}

// setAttCarveout sets the decode attention kernels' preferred shared-memory
// carveout to tuning.attCarveout percent, or back to the driver's default
// when it is 0 (the attribute belongs to the function, so every stepper
// set up sets it); owner thread.
func (s *stepper) setAttCarveout() error {
	pct := -1
	if s.b.tune.attCarveout > 0 {
		pct = min(s.b.tune.attCarveout, 100)
	}
	for _, kv := range s.b.k.kv {
		for _, fn := range []cu.Function{kv.attentionStep, kv.attentionPfStep, kv.attentionPipeStep, kv.attentionTraceStep, kv.attentionB3Step} {
			if err := setCarveout(fn, pct); err != nil {
				return fmt.Errorf("attention carveout: %w", err)
			}
		}
	}
	return nil
}

// setupAttFence makes tuning.attFence's event for a captured mode; owner
// thread.
func (s *stepper) setupAttFence() error {
	if s.b.tune.attFence == 0 || s.mode == device.StepPersistent {
		return nil
	}
	ev, err := cu.MakeEvent(cu.DisableTiming)
	if err != nil {
		return fmt.Errorf("attention fence event: %w", err)
	}
	s.fence = ev
	return nil
}

// closeAttFence frees the fence event.
func (s *stepper) closeAttFence() error {
	if s.fence == (cu.Event{}) {
		return nil
	}
	err := cu.DestroyEvent(&s.fence)
	s.fence = cu.Event{}
	return err
}

// attFenceMark records an event node on the compute stream of the capture
// in progress when tuning.attFence has bit `at` (1 before an attention
// instruction, 2 after it); the kernel after it is a plain launch.
func (s *stepper) attFenceMark(at int) error {
	if s.fence == (cu.Event{}) || s.b.tune.attFence&at == 0 || !s.b.capturing || s.b.rec != nil {
		return nil
	}
	if err := recordEventExternal(s.fence, s.b.compute); err != nil {
		return fmt.Errorf("attention fence: %w", err)
	}
	s.b.pdlPrev = false
	s.b.attFences++
	return nil
}
