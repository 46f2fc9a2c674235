//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// A captured decode step (device.Stepper): the decode step plan
// (StepSpec.Plan, runtime/plan) issued instruction by instruction into CUDA
// graphs (step_plan.go) that are replayed, so a step costs one or a few
// graph launches instead of ~20 launches per layer from Go.
//
// What changes between steps lives in device memory: the step state
// (token, position: kernels/decode.cu) and, per layer, the routed group's
// row table (GroupTable: weights written by route_step, row addresses
// gathered on the device from a table of rows, or written by the host after
// the cache served the group). The host meets the cache only at the plan's
// routed-rows instructions, through its one protocol (device.ExpertRows:
// snapshot, lease, serve, release; step_serve.go).
//
//   - graph-full (full residency: the snapshot is pinned, no row ever
//     moves): one graph for the plan's body (embed, every layer with
//     routing on the GPU through a device table of every layer's pinned
//     rows) plus a head graph (head, select). The host waits for the token,
//     then reads every layer's routed ids from mapped memory and serves a
//     lease per layer to count the hits. With lookahead the next decode
//     step is launched before the host waits (see Step).
//   - graph-segmented (partial residency, the default there): the body cut
//     before every routed-rows instruction, L+1 graphs: segment 0 = embed
//     .. route of layer 0, segment l = routed-experts of layer l-1 .. route
//     of layer l, segment L = routed-experts .. moe-residual of layer L-1.
//     Between segments the host reads the routed ids, leases and serves
//     the group (misses are copied then, on the copy stream, published
//     after completion), writes the rows' addresses into the layer's table
//     and launches the next segment.
//     With overlap (StepSpec.Overlap) the host launches the gate/up of the
//     rows the lease holds already (Lease.Resident) before Serve copies
//     the misses; then the misses' gate/up and segment l+1 without the
//     routed gate/up (rest[l+1]) follow. Each expert's gate/up rows run
//     the same kernel code either way, so the bits do not change.
//   - graph-wait (partial residency, on request): one body graph per step
//     like graph-full; routing gathers rows from a table the host keeps in
//     mapped memory from the layer's snapshot; a layer with a missing
//     expert waits on the device (await_step) until the host has served
//     the lease and answered.
//
// The instructions' kernels keep the op-by-op path's rounding, so the bits
// match: attn-in's norm is staged by the q|k|v matvec over the fused
// weight (device.LayerWeights.QKV), and q/k norm + RoPE + KV append is one
// launch; attn-out adds the residual in o_proj's epilogue; route stages
// its norm in the router; routed-experts and shared-expert stage xn from x
// (no norm kernel runs); and moe-residual is folded into the instruction
// before it where a kernel does both (downAddsResidual,
// sharedAddsResidual).
type stepper struct {
	b    *Backend
	spec device.StepSpec
	cfg  model.Config
	lay  qpack.RecordLayout
	mode string
	// strategy is the launch structure of the routed experts, asked of
	// the engine's executor (StepSpec.Executor): the executor decides what
	// the captured step launches, as Forward does op by op.
	strategy executor.Strategy
	L, A     int
	// prog is the plan as the graphs are cut from it (step_plan.go).
	prog *program
	// side is the captured steps' L2 prefetch branch (step_prefetch.go);
	// nil unless tuning.l2Prefetch is set, and always op by op and in
	// persistent steps.
	side *sideBranch
	// sfork is graph-full's shared-expert branch (step_shared_fork.go);
	// nil when tuning.noSharedFork is set or the model has no shared expert.
	sfork *sharedBranch
	tl    *instrTimeline // tuning.timeline (step_timeline.go)
	fence cu.Event       // tuning.attFence's event (step_att_trace.go); the zero Event without it

	// Device buffers the stepper owns.
	bufs   []*Tensor
	st     cu.DevicePtr // int32[4]: token, position
	stWin  cu.DevicePtr // int32[4]: the attention's state under tuning.attWindow (position attWindow-1 for ever); 0 without it
	atr    cu.DevicePtr // tuning.attTrace: [L][heads x attSplit][attTraceWords] uint64 (step_att_trace.go); 0 without it
	qkv    cu.DevicePtr // [Hq*hd + 2*Hkv*hd]
	qn     cu.DevicePtr // [Hq*hd]: normalised, rotated q (qk_norm_rope_kv_step)
	att    cu.DevicePtr // [Hq*hd]
	apart  cu.DevicePtr // attention partials [Hq][attSplit][hd+2] (attention_step)
	acnt   cu.DevicePtr // uint32[Hq]: attention_step's per-head ticket (the last block resets it)
	rlog   cu.DevicePtr // router logits [E]
	moe    cu.DevicePtr // [D]
	act    cu.DevicePtr // [A*F]
	sgum   cu.DevicePtr // Qwen: [2S+1] shared gate | up | mix
	sa     cu.DevicePtr // Qwen: [S]
	sd     cu.DevicePtr // Qwen: [D]
	groups cu.DevicePtr // [L] GroupTable
	tables cu.DevicePtr // graph-full: [L][E] row addresses
	idsDev cu.DevicePtr // graph-full: [L][A] routed ids (route_step), published to the host by the last layer
	masked cu.DevicePtr // EOS ids
	need   cu.DevicePtr // graph-wait: [L][2] int32: miss ticket, miss count (route_step)
	part   cu.DevicePtr // argmax: one candidate per block
	ticket cu.DevicePtr // argmax: blocks done (the last one resets it)
	bar    cu.DevicePtr // uint32[L]: the fused routed-experts kernel's grid barrier, per layer (self-resetting)
	rtick  cu.DevicePtr // uint32[L]: router_route_step's blocks done, per layer (the last block resets it)
	argG   int          // argmax blocks

	// host: mapped pinned memory shared with the step kernels: flags
	// [L+1] int32 (route_step of layer l sets flag l, argmax_step flag L),
	// the token, ids [L][A] int32; in graph-wait mode also the host's
	// answers ready [L][2] int32 (ticket answered, abort), the table of
	// resident rows [L][E] uint64 (0: not resident) and the routed groups'
	// row addresses fix [L][A] uint64.
	host      mappedBuf
	slotBytes int // the flags, token and ids come in two slots (graph-full runs one step ahead)
	tokOff    int // within a slot
	idsOff    int // within a slot
	readyOff  int
	tableOff  int
	fixOff    int

	answered []int32  // graph-wait: per layer, the last miss ticket answered
	tableSeq []uint64 // graph-wait: per layer, the generation the table shows

	// Prefill timing (device.PrefillTimer; not in persistent steps):
	// admission is an event recorded on tstream, a stream that runs nothing
	// else, so it completes at once; headsTimed are the head graphs with an
	// event (evHead) recorded between the head and the selection kernel,
	// launched for the prompt's last position.
	tstream        cu.Stream
	evAdm, evHead  cu.Event
	timing, marked bool
	headsTimed     [2][2]*graph

	body  [2]*graph    // graph-full, graph-wait: [slot]
	segs  []*graph     // graph-segmented
	rest  []*graph     // graph-segmented with overlap: segs without layer l-1's routed gate/up
	heads [2][2]*graph // [slot][0 nothing masked, 1 EOS masked]

	cur       int      // the slot being captured
	next      int      // graph-full: the slot of the next step launched
	lookahead bool     // graph-full: launch decode step t+1 before waiting for step t
	ahead     *pending // graph-full: a decode step launched ahead, not yet consumed

	// persistent: the programs (for listings) and the control block.
	programs [][]pinstr
	traces   []cu.DevicePtr // [program]: 3 timestamps per unit, or 0 (tuning.traceUnits)
	ctl      cu.DevicePtr
	ctlN     int

	ids  []int  // scratch: one layer's routed ids
	recs []byte // scratch: one layer's row addresses

	// Overlap counters (graph-segmented with overlap): layers whose
	// group mixed hits and misses, and the hit experts computed while
	// the misses copied.
	splitLayers, earlyExperts int64
}

var _ device.StepperBackend = (*Backend)(nil)

// NewStepper implements device.StepperBackend. It returns (nil, nil) when
// the device cannot run captured steps (kernels cannot write mapped host
// memory): the engine then issues op by op.
func (b *Backend) NewStepper(spec device.StepSpec) (device.Stepper, error) {
	if !b.results.ok {
		return nil, nil
	}
	s := &stepper{b: b, spec: spec, cfg: spec.Config, lay: spec.Layout, L: spec.Config.NumLayers, A: spec.Config.TopK}
	if spec.Executor == nil {
		return nil, fmt.Errorf("cuda: stepper: no executor")
	}
	s.strategy = spec.Executor.Strategy()
	if err := s.check(); err != nil {
		return nil, err
	}
	prog, err := compile(spec.Plan, s.cfg)
	if err != nil {
		return nil, fmt.Errorf("cuda: stepper: plan: %w", err)
	}
	s.prog = prog
	if spec.Experts == nil {
		return nil, fmt.Errorf("cuda: stepper: no expert rows")
	}
	snap, err := spec.Experts.Snapshot(0)
	if err != nil {
		return nil, fmt.Errorf("cuda: stepper: snapshot of layer 0: %w", err)
	}
	full := snap.Pinned
	switch spec.Mode {
	case "", "auto":
		s.mode = device.StepGraphSegmented
		if full {
			s.mode = device.StepGraphFull
		}
	case device.StepGraphFull, device.StepPersistent:
		if !full {
			return nil, fmt.Errorf("cuda: stepper: %s needs full residency (a pinned snapshot)", spec.Mode)
		}
		s.mode = spec.Mode
	case device.StepGraphWait, device.StepGraphSegmented:
		s.mode = spec.Mode
	default:
		return nil, fmt.Errorf("cuda: stepper: step mode %q", spec.Mode)
	}
	if s.mode == device.StepGraphWait {
		s.answered = make([]int32, s.L)
		s.tableSeq = make([]uint64, s.L)
	}
	if spec.Overlap {
		switch {
		case s.mode != device.StepGraphSegmented:
			return nil, fmt.Errorf("cuda: stepper: overlap needs %s steps, not %s", device.StepGraphSegmented, s.mode)
		case s.strategy != executor.PerGroup:
			return nil, fmt.Errorf("cuda: stepper: overlap needs the %s strategy (grouped-v1); %s is %s: it interleaves each expert's gate/up and down",
				executor.PerGroup, spec.Executor.Name(), s.strategy)
		}
	}
	s.ids = make([]int, s.A)
	s.recs = make([]byte, 8*s.A)
	if err := b.o.do(s.setup); err != nil {
		return nil, errors.Join(fmt.Errorf("cuda: stepper: %w", err), s.Close())
	}
	return s, nil
}

// check validates what the step kernels assume.
func (s *stepper) check() error {
	cfg, b := s.cfg, s.b
	if s.A < 1 || s.A > maxGroup {
		return fmt.Errorf("cuda: stepper: top-%d outside 1..%d", s.A, maxGroup)
	}
	if s.lay.Scheme != qpack.SchemeInt4 && s.lay.Scheme != qpack.SchemeFP16 {
		return fmt.Errorf("cuda: stepper: expert scheme %q", s.lay.Scheme)
	}
	if !s.strategy.Valid() {
		return fmt.Errorf("cuda: stepper: executor %s: strategy %s", s.spec.Executor.Name(), s.strategy)
	}
	if err := attentionHeadDimOK(cfg.HeadDim()); err != nil {
		return fmt.Errorf("cuda: stepper: %w", err)
	}
	for l := range s.spec.KCache {
		if _, _, err := b.kvCaches("stepper", s.spec.KCache[l], s.spec.VCache[l]); err != nil {
			return fmt.Errorf("cuda: stepper: layer %d: %w", l, err)
		}
		if s.spec.KCache[l].DType() == backend.F16 && s.spec.Mode == device.StepPersistent {
			// persistent.cu interprets the FP32 KV kernels only.
			return fmt.Errorf("cuda: stepper: step mode %s runs an FP32 KV cache only (this engine's is FP16)", device.StepPersistent)
		}
	}
	if cfg.NumExperts > routeMaxExperts {
		return fmt.Errorf("cuda: stepper: %d experts, the routing kernel takes at most %d", cfg.NumExperts, routeMaxExperts)
	}
	if len(cfg.EOSTokenIDs) > argmaxMaxMasked {
		return fmt.Errorf("cuda: stepper: %d EOS ids, the argmax kernel masks at most %d", len(cfg.EOSTokenIDs), argmaxMaxMasked)
	}
	for l, lw := range s.spec.Weights.Layers {
		if lw.QKV == nil || (cfg.HasSharedExpert() && lw.SharedGUM == nil) || (cfg.HasQKVBias() && lw.QKVBias == nil) {
			return fmt.Errorf("cuda: stepper: layer %d has no fused q|k|v (or shared gate|up|mix) weights", l)
		}
	}
	return b.checkGlobalFallback("stepper", s.lay, s.A)
}

// Limits of decode.cu: ROUTE_MAX_PER_LANE*32 experts, ARGMAX_MAX_MASKED ids.
const (
	routeMaxExperts = 256
	argmaxMaxMasked = 8
)

// argmaxChunk is the logits one argmax_step block scans (two per thread).
const argmaxChunk = 2048

// Mode implements device.Stepper.
func (s *stepper) Mode() string { return s.mode }

// setup allocates the buffers, fills the full-residency tables and captures
// the graphs; owner thread.
func (s *stepper) setup() error {
	b, cfg := s.b, s.cfg
	D, E, KV, hd := cfg.HiddenSize, cfg.NumExperts, cfg.KVDim(), cfg.HeadDim()
	Q := cfg.NumHeads * hd
	s.argG = max(1, min(1024, (cfg.VocabSize+argmaxChunk-1)/argmaxChunk))
	alloc := func(n int, dt backend.DType) (cu.DevicePtr, error) {
		t, err := b.alloc(n, dt)
		if err != nil {
			return 0, err
		}
		s.bufs = append(s.bufs, t)
		return t.ptr, nil
	}
	type want struct {
		dst *cu.DevicePtr
		n   int
		dt  backend.DType
	}
	wants := []want{
		{&s.st, 4, backend.Bytes}, {&s.qkv, Q + 2*KV, backend.F32}, {&s.qn, Q, backend.F32}, {&s.att, Q, backend.F32},
		{&s.apart, attPartFloats(cfg.NumHeads, cfg.HeadDim()), backend.F32}, {&s.acnt, 4 * cfg.NumHeads, backend.Bytes},
		{&s.rlog, E, backend.F32}, {&s.moe, D, backend.F32}, {&s.act, s.A * s.lay.Gate.Rows, backend.F32},
		{&s.groups, s.L * tableBytes, backend.Bytes}, {&s.masked, max(1, len(cfg.EOSTokenIDs)) * 4, backend.Bytes},
		{&s.part, 4 * s.argG, backend.Bytes}, {&s.ticket, 4, backend.Bytes}, {&s.bar, 4 * s.L, backend.Bytes},
		{&s.rtick, 4 * s.L, backend.Bytes},
	}
	wants[0].n = 16
	if cfg.HasSharedExpert() {
		S := cfg.SharedFFN
		wants = append(wants, want{&s.sgum, 2*S + 1, backend.F32}, want{&s.sa, S, backend.F32}, want{&s.sd, D, backend.F32})
	}
	if s.deviceTables() {
		wants = append(wants, want{&s.tables, s.L * E * 8, backend.Bytes}, want{&s.idsDev, s.L * s.A * 4, backend.Bytes})
	}
	if s.mode == device.StepGraphWait {
		wants = append(wants, want{&s.need, s.L * 8, backend.Bytes})
	}
	if b.tune.attWindow > 0 {
		wants = append(wants, want{&s.stWin, 16, backend.Bytes})
	}
	if b.tune.attTrace && s.mode != device.StepPersistent {
		wants = append(wants, want{&s.atr, 8 * s.attTraceLen(), backend.Bytes})
	}
	for _, w := range wants {
		p, err := alloc(w.n, w.dt)
		if err != nil {
			return err
		}
		*w.dst = p
	}
	if w := b.tune.attWindow; w > 0 {
		st := [4]int32{0, int32(w - 1)}
		if err := b.copyIn(s.stWin, unsafe.Pointer(&st[0]), 16); err != nil {
			return fmt.Errorf("attention window state: %w", err)
		}
	}
	if len(cfg.EOSTokenIDs) > 0 {
		ids := make([]int32, len(cfg.EOSTokenIDs))
		for i, id := range cfg.EOSTokenIDs {
			ids[i] = int32(id)
		}
		if err := b.copyIn(s.masked, unsafe.Pointer(&ids[0]), 4*len(ids)); err != nil {
			return fmt.Errorf("EOS ids: %w", err)
		}
	}
	if s.deviceTables() {
		addr := make([]uint64, s.L*E)
		for l := range s.L {
			snap, err := s.spec.Experts.Snapshot(l)
			if err != nil {
				return err
			}
			if !snap.Pinned {
				return fmt.Errorf("layer %d: the snapshot is not pinned (generation %d)", l, snap.Seq)
			}
			for e, r := range snap.Rows {
				t, err := b.tensorOf("stepper", "expert row", r, backend.Bytes)
				if err != nil {
					return err
				}
				if t.n < s.lay.Size {
					return fmt.Errorf("layer %d expert %d: row of %d bytes, the record needs %d", l, e, t.n, s.lay.Size)
				}
				addr[l*E+e] = uint64(t.ptr)
			}
		}
		if err := b.copyIn(s.tables, unsafe.Pointer(&addr[0]), 8*len(addr)); err != nil {
			return fmt.Errorf("row tables: %w", err)
		}
	}
	s.tokOff = 4 * (s.L + 1)
	s.idsOff = (s.tokOff + 4 + 15) / 16 * 16
	s.slotBytes = (s.idsOff + 4*s.L*s.A + 15) / 16 * 16
	s.readyOff = 2 * s.slotBytes
	s.tableOff = (s.readyOff + 8*s.L + 15) / 16 * 16
	s.fixOff = s.tableOff + 8*s.L*E
	size := s.fixOff + 8*s.L*s.A
	p, d, err := hostAllocMapped(size)
	if err != nil {
		return err
	}
	s.host = mappedBuf{p: p, dev: d, n: size, ok: true}
	clear(s.host.bytes())
	if s.mode == device.StepGraphWait {
		for l := range s.L {
			if err := s.refreshTable(l); err != nil {
				return err
			}
		}
	}

	if s.mode != device.StepPersistent && b.tune.l2Prefetch {
		if err := s.setupPrefetch(); err != nil {
			return err
		}
	}
	if err := s.setupSharedFork(); err != nil {
		return err
	}
	if err := s.setupTimeline(); err != nil {
		return err
	}
	if s.atr != 0 {
		s.registerAttTrace()
	}
	if err := s.setupAttFence(); err != nil {
		return err
	}
	if s.mode != device.StepPersistent {
		if err := s.setAttCarveout(); err != nil {
			return err
		}
	}
	if s.mode != device.StepPersistent {
		if err := s.setupTiming(); err != nil {
			return err
		}
	}
	capture := s.capture
	slots := 1
	if s.deviceTables() {
		slots = 2
	}
	for slot := range slots {
		s.cur = slot
		if s.mode == device.StepPersistent {
			// One program per slot for the body alone (a prefill step)
			// and one per slot and EOS rule for body and head.
			body := func() error { return s.issueBody(0, len(s.prog.body), true) }
			if s.body[slot], err = s.persistentGraph("step", body); err != nil {
				return err
			}
			for m := range s.heads[slot] {
				whole := func() error { return errors.Join(body(), s.issueHead(m == 1, false)) }
				if s.heads[slot][m], err = s.persistentGraph("step and head", whole); err != nil {
					return err
				}
			}
			continue
		}
		for m := range s.heads[slot] {
			if s.heads[slot][m], err = capture("head", func() error { return s.issueHead(m == 1, false) }); err != nil {
				return err
			}
			if s.headsTimed[slot][m], err = capture("timed head", func() error { return s.issueHead(m == 1, true) }); err != nil {
				return err
			}
		}
		if s.mode == device.StepGraphSegmented {
			continue
		}
		s.body[slot], err = capture("step", func() error { return s.issueBody(0, len(s.prog.body), true) })
		if err != nil {
			return err
		}
	}
	s.cur = 0
	if s.mode != device.StepGraphSegmented {
		return nil
	}
	// Segment k runs from the (k-1)-th routed-rows instruction to the
	// k-th; rest[k] is segment k without its first instruction's routed
	// gate/up.
	cuts := append(append([]int{0}, s.prog.cuts...), len(s.prog.body))
	s.segs = make([]*graph, len(cuts)-1)
	for k := range s.segs {
		if s.segs[k], err = capture(fmt.Sprintf("segment %d", k), func() error { return s.issueBody(cuts[k], cuts[k+1], true) }); err != nil {
			return err
		}
	}
	if !s.spec.Overlap {
		return nil
	}
	s.rest = make([]*graph, len(s.segs))
	for k := 1; k < len(s.segs); k++ {
		if s.rest[k], err = capture(fmt.Sprintf("segment %d without the routed gate/up", k), func() error { return s.issueBody(cuts[k], cuts[k+1], false) }); err != nil {
			return err
		}
	}
	return nil
}

// capture captures what issue enqueues on the compute stream as a graph;
// owner thread.
func (s *stepper) capture(what string, issue func() error) (*graph, error) {
	b := s.b
	if err := beginCapture(b.compute); err != nil {
		return nil, fmt.Errorf("capture %s: %w", what, err)
	}
	b.pdl, b.pdlPrev, b.capturing = !b.tune.noPDL, false, true
	ierr := errors.Join(issue(), s.joinPrefetch())
	b.pdl, b.pdlPrev, b.capturing = b.opPDL(), false, false
	g, err := endCapture(b.compute)
	if ierr != nil || err != nil {
		if g != nil {
			_ = g.destroy()
		}
		return nil, fmt.Errorf("capture %s: %w", what, errors.Join(ierr, err))
	}
	return g, nil
}

// deviceTables reports whether routing reads every layer's pinned rows
// from a device table and the host reads the routed ids once per step,
// running one step ahead in two slots: graph-full and persistent.
func (s *stepper) deviceTables() bool {
	return s.mode == device.StepGraphFull || s.mode == device.StepPersistent
}

// flagAt and idsAt are the offsets of flag i and of layer l's routed ids in
// the mapped buffer's slot.
func (s *stepper) flagAt(slot, i int) int { return s.slotBytes*slot + 4*i }
func (s *stepper) idsAt(slot, l int) int  { return s.slotBytes*slot + s.idsOff + 4*l*s.A }

// flag is host-visible flag i of slot.
func (s *stepper) flag(slot, i int) *int32 {
	return (*int32)(unsafe.Add(s.host.p, s.flagAt(slot, i)))
}

// wait spins until flag i is set. Every flagPatience it asks the owner
// whether the context is still healthy (an earlier asynchronous failure, or
// a kernel that trapped, fails the wait) without waiting for the stream: in
// a graph-wait step the stream may be waiting for this very host. It gives
// up after flagTimeout.
func (s *stepper) wait(slot, i int) error {
	f := s.flag(slot, i)
	start, last := time.Now(), time.Now()
	for n := 1; ; n++ {
		if atomic.LoadInt32(f) != 0 {
			return nil
		}
		if n&1023 != 0 || time.Since(last) < flagPatience {
			continue
		}
		last = time.Now()
		err := s.b.o.do(func() error {
			if err := s.b.compute.Query(); err != nil && !errors.Is(err, cu.NotReady) {
				return err
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("cuda: stepper: waiting for flag %d: %w", i, err)
		}
		if time.Since(start) > flagTimeout {
			return fmt.Errorf("cuda: stepper: flag %d not set after %v", i, flagTimeout)
		}
	}
}

const flagTimeout = time.Minute

const flagPatience = 50 * time.Millisecond

// layerIDs reads layer l's routed ids of slot from mapped memory into s.ids.
func (s *stepper) layerIDs(slot, l int) []int {
	base := unsafe.Add(s.host.p, s.idsAt(slot, l))
	for k := range s.A {
		s.ids[k] = int(*(*int32)(unsafe.Add(base, 4*k)))
	}
	return s.ids
}

// pending is a graph-full decode step launched ahead of the Step call that
// consumes it.
type pending struct {
	slot, pos int
	suppress  bool
}

// SetLookahead implements device.Stepper.
func (s *stepper) SetLookahead(on bool) { s.lookahead = on }

// Step implements device.Stepper.
//
// In graph-full mode with lookahead, a step that runs the head also launches
// the next decode step right away: that step reads the token and position
// argmax_step leaves on the device, so it needs nothing from the host, and
// the GPU goes from one step to the next without waiting for the host to see
// the token and launch again. The two steps use the two slots of the mapped
// buffer. A Step call for exactly that step (decode, next position, same EOS
// rule) only waits for it; any other call first waits for it to finish and
// discards it (it wrote the KV cache one position ahead, which a later step
// overwrites before anything reads it). A discarded step is never accounted
// to the cache.
func (s *stepper) Step(tok, pos int, set, head, suppress bool) (int, error) {
	if pos < 0 || pos >= s.spec.MaxSeq {
		return 0, fmt.Errorf("cuda: stepper: position %d outside the KV cache of %d", pos, s.spec.MaxSeq)
	}
	if set && (tok < 0 || tok >= s.cfg.VocabSize) {
		return 0, fmt.Errorf("cuda: stepper: token %d outside the vocabulary of %d", tok, s.cfg.VocabSize)
	}
	b := s.b
	mask := 0
	if suppress {
		mask = 1
	}
	if set && s.mode == device.StepGraphWait {
		// The cache may have moved rows since this stepper last served
		// (a batched prefill leases op by op): every step that read the
		// tables has been served, so they are rewritten before this one.
		for l := range s.L {
			if err := s.refreshTable(l); err != nil {
				return 0, fmt.Errorf("cuda: stepper: layer %d table: %w", l, err)
			}
		}
	}
	launchStep := func(slot int, set, head bool) error {
		for i := 0; i <= s.L; i++ {
			atomic.StoreInt32(s.flag(slot, i), 0)
		}
		g, h := s.body[slot], s.heads[slot][mask]
		if set && head && s.timing {
			h = s.headsTimed[slot][mask] // the prompt's last position: its logits are timed
		}
		switch s.mode {
		case device.StepGraphSegmented:
			g = s.segs[0]
		case device.StepPersistent:
			if head {
				g, h = h, nil // one launch: the body and the head
			}
		}
		return b.o.async(func() error {
			if set {
				if err := b.launch(b.k.stepSet, 1, 1, 0, argPtr(s.st), argInt(tok), argInt(pos)); err != nil {
					return fmt.Errorf("cuda: stepper: set state: %w", err)
				}
			}
			if err := b.launchGraph(g); err != nil {
				return err
			}
			if head && s.mode == device.StepGraphFull {
				return b.launchGraph(h)
			}
			return nil
		})
	}
	launch := func(g *graph) error { return b.o.async(func() error { return b.launchGraph(g) }) }
	switch s.mode {
	case device.StepGraphFull, device.StepPersistent:
		slot := -1
		if a := s.ahead; a != nil {
			s.ahead = nil
			if !set && head && a.pos == pos && a.suppress == suppress {
				slot = a.slot
			} else {
				if err := s.wait(a.slot, s.L); err != nil {
					return 0, fmt.Errorf("cuda: stepper: discarding the step launched ahead: %w", err)
				}
				if !set {
					// The discarded step advanced the device's token and
					// position past what this call continues from.
					return 0, fmt.Errorf("cuda: stepper: a decode step at position %d cannot follow the step launched ahead for position %d; set the state", pos, a.pos)
				}
			}
		}
		if slot < 0 {
			slot, s.next = s.next, s.next^1
			if err := launchStep(slot, set, head); err != nil {
				return 0, err
			}
		}
		if head && s.lookahead && pos+1 < s.spec.MaxSeq {
			a := &pending{slot: s.next, pos: pos + 1, suppress: suppress}
			s.next ^= 1
			if err := launchStep(a.slot, false, true); err != nil {
				return 0, err
			}
			s.ahead = a
		}
		last := s.L - 1
		if head {
			last = s.L
		}
		if err := s.wait(slot, last); err != nil {
			return 0, err
		}
		for _, i := range s.prog.cuts {
			l := s.prog.body[i].Layer
			if err := s.countPinned(l, s.layerIDs(slot, l)); err != nil {
				return 0, fmt.Errorf("cuda: stepper: layer %d: %w", l, err)
			}
		}
		if !head {
			return 0, nil
		}
		return s.token(slot), nil
	case device.StepGraphWait:
		if err := launchStep(0, set, false); err != nil {
			return 0, err
		}
		if head {
			if err := launch(s.headGraph(set, mask)); err != nil {
				return 0, err
			}
		}
		for _, i := range s.prog.cuts {
			l := s.prog.body[i].Layer
			if err := s.serveLayer(l); err != nil {
				s.abort()
				return 0, fmt.Errorf("cuda: stepper: layer %d: %w", l, err)
			}
		}
	default: // graph-segmented
		if err := launchStep(0, set, false); err != nil {
			return 0, err
		}
		for k, i := range s.prog.cuts {
			l := s.prog.body[i].Layer
			if err := s.wait(0, l); err != nil {
				return 0, err
			}
			if err := s.serveSegment(k); err != nil {
				return 0, fmt.Errorf("cuda: stepper: layer %d: %w", l, err)
			}
		}
		if head {
			if err := launch(s.headGraph(set, mask)); err != nil {
				return 0, err
			}
		}
	}
	if !head {
		return 0, nil
	}
	if err := s.wait(0, s.L); err != nil {
		return 0, err
	}
	return s.token(0), nil
}

// token is the token argmax_step wrote into slot.
func (s *stepper) token(slot int) int {
	return int(atomic.LoadInt32((*int32)(unsafe.Add(s.host.p, s.slotBytes*slot+s.tokOff))))
}

// Close implements device.Stepper: it waits for the device, then frees the
// graphs, buffers and mapped memory.
func (s *stepper) Close() error {
	b := s.b
	s.abort()
	return b.o.do(func() error {
		errs := []error{b.compute.Synchronize()}
		gs := append([]*graph{s.body[0], s.body[1], s.heads[0][0], s.heads[0][1], s.heads[1][0], s.heads[1][1],
			s.headsTimed[0][0], s.headsTimed[0][1], s.headsTimed[1][0], s.headsTimed[1][1]}, s.segs...)
		gs = append(gs, s.rest...)
		for _, g := range gs {
			if g != nil {
				errs = append(errs, g.destroy())
			}
		}
		s.body, s.segs, s.rest, s.heads, s.headsTimed, s.ahead = [2]*graph{}, nil, nil, [2][2]*graph{}, [2][2]*graph{}, nil
		errs = append(errs, s.closeTiming())
		errs = append(errs, s.closePrefetch(), s.closeSharedFork(), s.closeTimeline())
		s.dropAttTrace()
		errs = append(errs, s.closeAttFence())
		for _, t := range s.bufs {
			errs = append(errs, cu.MemFree(t.ptr))
		}
		s.bufs = nil
		if s.host.ok {
			errs = append(errs, hostFree(s.host.p))
			s.host = mappedBuf{}
		}
		return errors.Join(errs...)
	})
}
