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

// A captured decode step (device.Stepper). The step's kernels are captured
// once into CUDA graphs and replayed, so a step costs one or a few graph
// launches instead of ~20 launches per layer from Go.
//
// What changes between steps lives in device memory: the step state
// (token, position: kernels/decode.cu) and, per layer, the routed group's
// row table (GroupTable: weights written by route_step, row addresses
// gathered on the device from a table of resident rows, or written by the
// host after the cache served the group).
//
//   - graph-full (full residency: no row ever moves): one graph for the
//     whole step (embed, every layer with routing on the GPU) plus a head
//     graph (lm_head, argmax). The host waits for the token, then reads
//     every layer's routed ids from mapped memory and accounts them as
//     cache hits (cache.RecordHits). With lookahead the next decode step is
//     launched before the host waits (see Step).
//   - graph-segmented (partial residency, the default there): L+1 graphs
//     cut at the routing reads: segment 0 = embed + attention and routing
//     of layer 0, segment l = experts of layer l-1 + attention and routing
//     of layer l, segment L = experts of layer L-1. Between segments the
//     host reads the routed ids, acquires the rows from the cache (misses
//     are copied then, on the copy stream, published after completion),
//     writes their addresses into the layer's table and launches the next
//     segment.
//     With overlap (StepSpec.Overlap) the host first leases the group's
//     resident rows and launches their gate/up while the cache copies
//     the misses; then the misses' gate/up and segment l+1 without the
//     routed gate/up (rest[l+1]) follow. Each expert's gate/up rows run
//     the same kernel code either way, so the bits do not change.
//   - graph-wait (partial residency, on request): one graph per step like
//     graph-full; routing gathers rows from a table of resident rows the
//     host keeps in mapped memory; a layer with a missing expert waits on
//     the device (await_step) until the host has loaded it through the
//     cache and answered.
//
// Fusions, each with the op-by-op path's rounding (so the bits match):
// every RMSNorm is computed by its consumers while they stage their input
// (q|k|v, router, gate/up, shared gate|up|mix, lm_head), so no norm kernel
// runs; q|k|v is one matvec over the fused weight (device.LayerWeights.QKV);
// q/k norm + RoPE + KV append is one launch; o_proj adds the residual in
// its epilogue; the routed down projection adds the residual (no shared
// expert); Qwen's shared gate|up|mix is one matvec and its gated add plus
// residual one launch.
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

	pinned device.PinnedRows     // graph-full only
	pub    device.PublishedRows  // graph-wait only
	lease  device.ResidentLeaser // graph-segmented with overlap only

	// Device buffers the stepper owns.
	bufs   []*Tensor
	st     cu.DevicePtr // int32[4]: token, position
	qkv    cu.DevicePtr // [Hq*hd + 2*Hkv*hd]
	qn     cu.DevicePtr // [Hq*hd]: normalised, rotated q (qk_norm_rope_kv_step)
	att    cu.DevicePtr // [Hq*hd]
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

	body  [2]*graph    // graph-full, graph-wait: [slot]
	segs  []*graph     // graph-segmented
	rest  []*graph     // graph-segmented with overlap: segs without layer l-1's routed gate/up
	heads [2][2]*graph // [slot][0 nothing masked, 1 EOS masked]

	cur       int      // the slot being captured
	next      int      // graph-full: the slot of the next step launched
	lookahead bool     // graph-full: launch decode step t+1 before waiting for step t
	ahead     *pending // graph-full: a decode step launched ahead, not yet consumed

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
	p, _ := spec.Experts.(device.PinnedRows)
	full := p != nil && p.FullResidency()
	pub, _ := spec.Experts.(device.PublishedRows)
	switch spec.Mode {
	case "", "auto":
		s.mode = device.StepGraphSegmented
		if full {
			s.mode = device.StepGraphFull
		}
	case device.StepGraphFull:
		if !full {
			return nil, fmt.Errorf("cuda: stepper: %s needs full residency", spec.Mode)
		}
		s.mode = spec.Mode
	case device.StepGraphWait:
		if pub == nil {
			return nil, fmt.Errorf("cuda: stepper: %s needs a cache that lists its published rows", spec.Mode)
		}
		s.mode = spec.Mode
	case device.StepGraphSegmented:
		s.mode = spec.Mode
	default:
		return nil, fmt.Errorf("cuda: stepper: step mode %q", spec.Mode)
	}
	switch s.mode {
	case device.StepGraphFull:
		s.pinned = p
	case device.StepGraphWait:
		s.pub = pub
		s.answered = make([]int32, s.L)
		s.tableSeq = make([]uint64, s.L)
	}
	if spec.Overlap {
		lr, ok := spec.Experts.(device.ResidentLeaser)
		switch {
		case s.mode != device.StepGraphSegmented:
			return nil, fmt.Errorf("cuda: stepper: overlap needs %s steps, not %s", device.StepGraphSegmented, s.mode)
		case !ok:
			return nil, fmt.Errorf("cuda: stepper: overlap: the expert rows (%T) cannot lease resident rows", spec.Experts)
		case s.strategy != executor.PerGroup:
			return nil, fmt.Errorf("cuda: stepper: overlap needs the %s strategy (grouped-v1); %s is %s: it interleaves each expert's gate/up and down",
				executor.PerGroup, spec.Executor.Name(), s.strategy)
		}
		s.lease = lr
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
	hd := cfg.HeadDim()
	if hd > 256 || hd%2 != 0 {
		return fmt.Errorf("cuda: stepper: head dim %d (want even, at most 256)", hd)
	}
	if smem := (s.spec.MaxSeq + attWarps*hd) * 4; smem > b.smemMax {
		return fmt.Errorf("cuda: stepper: %d positions need %d bytes of shared memory for attention, above %d", s.spec.MaxSeq, smem, b.smemMax)
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
		{&s.rlog, E, backend.F32}, {&s.moe, D, backend.F32}, {&s.act, s.A * s.lay.Gate.Rows, backend.F32},
		{&s.groups, s.L * tableBytes, backend.Bytes}, {&s.masked, max(1, len(cfg.EOSTokenIDs)) * 4, backend.Bytes},
		{&s.part, 4 * s.argG, backend.Bytes}, {&s.ticket, 4, backend.Bytes},
	}
	wants[0].n = 16
	if cfg.HasSharedExpert() {
		S := cfg.SharedFFN
		wants = append(wants, want{&s.sgum, 2*S + 1, backend.F32}, want{&s.sa, S, backend.F32}, want{&s.sd, D, backend.F32})
	}
	if s.pinned != nil {
		wants = append(wants, want{&s.tables, s.L * E * 8, backend.Bytes}, want{&s.idsDev, s.L * s.A * 4, backend.Bytes})
	}
	if s.pub != nil {
		wants = append(wants, want{&s.need, s.L * 8, backend.Bytes})
	}
	for _, w := range wants {
		p, err := alloc(w.n, w.dt)
		if err != nil {
			return err
		}
		*w.dst = p
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
	if s.pinned != nil {
		addr := make([]uint64, s.L*E)
		for l := range s.L {
			rows, err := s.pinned.PinnedRows(l)
			if err != nil {
				return err
			}
			for e, r := range rows {
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
	if s.pub != nil {
		for l := range s.L {
			if err := s.refreshTable(l); err != nil {
				return err
			}
		}
	}

	capture := func(what string, issue func() error) (*graph, error) {
		if err := beginCapture(b.compute); err != nil {
			return nil, fmt.Errorf("capture %s: %w", what, err)
		}
		ierr := issue()
		g, err := endCapture(b.compute)
		if ierr != nil || err != nil {
			if g != nil {
				_ = g.destroy()
			}
			return nil, fmt.Errorf("capture %s: %w", what, errors.Join(ierr, err))
		}
		return g, nil
	}
	slots := 1
	if s.mode == device.StepGraphFull {
		slots = 2
	}
	for slot := range slots {
		s.cur = slot
		for m := range s.heads[slot] {
			if s.heads[slot][m], err = capture("head", func() error { return s.issueHead(m == 1) }); err != nil {
				return err
			}
		}
		if s.mode == device.StepGraphSegmented {
			continue
		}
		s.body[slot], err = capture("step", func() error {
			if err := s.issueEmbed(); err != nil {
				return err
			}
			for l := range s.L {
				if err := s.issueAttention(l); err != nil {
					return err
				}
				if err := s.issueExperts(l); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	s.cur = 0
	if s.mode != device.StepGraphSegmented {
		return nil
	}
	segment := func(l int, gateUp bool) func() error {
		return func() error {
			if l == 0 {
				if err := s.issueEmbed(); err != nil {
					return err
				}
			} else if err := s.issueExpertsFrom(l-1, gateUp); err != nil {
				return err
			}
			if l < s.L {
				return s.issueAttention(l)
			}
			return nil
		}
	}
	s.segs = make([]*graph, s.L+1)
	for l := 0; l <= s.L; l++ {
		if s.segs[l], err = capture(fmt.Sprintf("segment %d", l), segment(l, true)); err != nil {
			return err
		}
	}
	if s.lease == nil {
		return nil
	}
	s.rest = make([]*graph, s.L+1)
	for l := 1; l <= s.L; l++ {
		if s.rest[l], err = capture(fmt.Sprintf("segment %d without the routed gate/up", l), segment(l, false)); err != nil {
			return err
		}
	}
	return nil
}

// ptr is a weight's device address (0 for nil).
func ptr(t backend.Tensor) cu.DevicePtr {
	if t == nil {
		return 0
	}
	return t.(*Tensor).ptr
}

// wkind is the kernels' weight-kind argument: 1 FP16, 2 FP32.
func wkind(t backend.Tensor) int {
	if t.DType() == backend.F16 {
		return 1
	}
	return 2
}

func (s *stepper) issueEmbed() error {
	w := s.spec.Weights.Embed
	D := s.cfg.HiddenSize
	return s.b.launch(s.b.k.embedStep, s.b.elementwiseGrid(D), block, 0,
		argPtr(ptr(s.spec.X)), argPtr(ptr(w)), argInt(wkind(w)), argPtr(s.st), argInt(D))
}

// norm asks a consumer kernel to stage RMSNorm(x)·w (one group over the
// hidden size) instead of x: the captured step launches no norm kernel.
func (s *stepper) norm(w backend.Tensor) normSpec {
	return normSpec{w: ptr(w), kind: wkind(w), eps: float32(s.cfg.RMSNormEps)}
}

// issueAttention: input norm, q|k|v, q/k norm, RoPE + KV append,
// attention, o_proj + residual, post-attention norm, router, routing.
func (s *stepper) issueAttention(l int) error {
	b, cfg, lw := s.b, s.cfg, &s.spec.Weights.Layers[l]
	D, E, KV, hd := cfg.HiddenSize, cfg.NumExperts, cfg.KVDim(), cfg.HeadDim()
	Q := cfg.NumHeads * hd
	x := ptr(s.spec.X)
	q, k, v := s.qkv, s.qkv+cu.DevicePtr(4*Q), s.qkv+cu.DevicePtr(4*(Q+KV))
	bk := 0
	if lw.QKVBias != nil {
		bk = wkind(lw.QKVBias)
	}
	if err := b.matvecF16Launch(s.qkv, ptr(lw.QKV), x, ptr(lw.QKVBias), bk, Q+2*KV, D, s.norm(lw.InputNorm)); err != nil {
		return err
	}
	kc, vc := ptr(s.spec.KCache[l]), ptr(s.spec.VCache[l])
	qa := q // the query attention reads
	if lw.QNorm != nil && lw.QNorm.Len()%hd == 0 && lw.KNorm.Len()%hd == 0 {
		// One block per head, queries out of place into qn.
		gq, gk := lw.QNorm.Len(), lw.KNorm.Len()
		qa = s.qn
		if err := b.launch(b.k.qkNormRopeKVStep, cfg.NumHeads+cfg.NumKVHeads, block, 0, argPtr(s.qn), argPtr(q), argPtr(k), argPtr(v), argPtr(kc), argPtr(vc),
			argPtr(ptr(lw.QNorm)), argPtr(ptr(lw.KNorm)), argInt(wkind(lw.QNorm)), argInt(cfg.NumHeads), argInt(cfg.NumKVHeads),
			argInt(hd), argInt(gq), argInt(gk), argPtr(s.st), argF64(cfg.RopeTheta), argF32(float32(cfg.RMSNormEps))); err != nil {
			return err
		}
	} else if err := s.issueNormRope(l, q, k, v, kc, vc); err != nil {
		return err
	}
	if err := b.launch(b.k.attentionStep, cfg.NumHeads, block, (s.spec.MaxSeq+attWarps*hd)*4, argPtr(s.att), argPtr(qa),
		argPtr(kc), argPtr(vc), argPtr(s.st), argInt(cfg.NumHeads), argInt(cfg.NumKVHeads), argInt(hd)); err != nil {
		return err
	}
	if err := b.matvecF16Launch(x, ptr(lw.O), s.att, x, 2, D, Q, normSpec{}); err != nil {
		return err
	}
	if err := b.matvecF16Launch(s.rlog, ptr(lw.Router), x, 0, 0, E, D, s.norm(lw.PostNorm)); err != nil {
		return err
	}
	var table, need cu.DevicePtr
	switch {
	case s.pinned != nil:
		table = s.tables + cu.DevicePtr(8*l*E)
	case s.pub != nil:
		table = s.host.dev + cu.DevicePtr(s.tableOff+8*l*E)
		need = s.need + cu.DevicePtr(8*l)
	}
	norm := 0
	if cfg.NormTopKProb {
		norm = 1
	}
	ids := s.host.dev + cu.DevicePtr(s.idsAt(s.cur, l))
	flag := s.host.dev + cu.DevicePtr(s.flagAt(s.cur, l))
	var copySrc, copyDst cu.DevicePtr
	copyN := 0
	if s.mode == device.StepGraphFull {
		// The host reads the ids only after the step: every layer writes
		// them to device memory, and the last layer's routing publishes
		// all of them with one system fence and its flag.
		ids = s.idsDev + cu.DevicePtr(4*l*s.A)
		if l < s.L-1 {
			flag = 0
		} else {
			copySrc, copyDst, copyN = s.idsDev, s.host.dev+cu.DevicePtr(s.idsAt(s.cur, 0)), s.L*s.A
		}
	}
	return b.launch(b.k.routeStep, 1, 32, 0, argPtr(s.rlog), argInt(E), argInt(s.A), argInt(norm),
		argPtr(table), argPtr(s.group(l)), argPtr(need), argPtr(ids), argPtr(flag),
		argPtr(copySrc), argPtr(copyDst), argInt(copyN))
}

func (s *stepper) group(l int) cu.DevicePtr { return s.groups + cu.DevicePtr(l*tableBytes) }

// issueExperts: the routed experts of layer l in the executor's launch
// structure, its Strategy (executor.PerGroup, grouped-v1: one gate/up and
// one down launch for the group; executor.PerExpert, scalar-v1: one of each
// per expert, combined in k order), then Qwen's shared expert, then the
// residual add.
func (s *stepper) issueExperts(l int) error { return s.issueExpertsFrom(l, true) }

// issueExpertsFrom is issueExperts; without gateUp the PerGroup strategy's
// routed gate/up is left out (overlap issued it outside the segment:
// gateUpRuns).
func (s *stepper) issueExpertsFrom(l int, gateUp bool) error {
	b, cfg, lw := s.b, s.cfg, &s.spec.Weights.Layers[l]
	D := cfg.HiddenSize
	x := ptr(s.spec.X)
	post := s.norm(lw.PostNorm) // every consumer of the post-attention norm computes it while staging x
	shared := cfg.HasSharedExpert()
	grp := s.group(l)
	if s.pub != nil {
		if err := b.launch(b.k.awaitStep, 1, 32, 0, argPtr(s.need+cu.DevicePtr(8*l)), argPtr(s.host.dev+cu.DevicePtr(s.readyOff+8*l)),
			argPtr(s.host.dev+cu.DevicePtr(s.fixOff+8*l*s.A)), argPtr(grp), argInt(s.A)); err != nil {
			return err
		}
	}
	switch s.strategy {
	case executor.PerExpert:
		F := s.lay.Gate.Rows
		for k := range s.A {
			act := s.act + cu.DevicePtr(4*k*F)
			if err := b.gateUpLaunchFrom(act, x, 1, s.lay, rowTable{dev: grp, k0: k, norm: post}); err != nil {
				return err
			}
			if err := b.downLaunchFrom(s.moe, act, 1, s.lay, rowTable{dev: grp, k0: k}, 0, k > 0); err != nil {
				return err
			}
		}
		if !shared {
			return b.launch(b.k.add, b.elementwiseGrid(D), block, 0, argPtr(x), argPtr(x), argPtr(s.moe), argInt(D))
		}
	case executor.PerGroup:
		if gateUp {
			if err := b.gateUpLaunchFrom(s.act, x, s.A, s.lay, rowTable{dev: grp, norm: post}); err != nil {
				return err
			}
		}
		if !shared {
			return b.downLaunchFrom(x, s.act, s.A, s.lay, rowTable{dev: grp}, x, false)
		}
		if err := b.downLaunchFrom(s.moe, s.act, s.A, s.lay, rowTable{dev: grp}, 0, false); err != nil {
			return err
		}
	default:
		return fmt.Errorf("cuda: stepper: executor strategy %s", s.strategy) // check refused it
	}
	S := cfg.SharedFFN
	if err := b.matvecF16Launch(s.sgum, ptr(lw.SharedGUM), x, 0, 0, 2*S+1, D, post); err != nil {
		return err
	}
	if err := b.launch(b.k.siluMul, b.elementwiseGrid(S), block, 0, argPtr(s.sa), argPtr(s.sgum),
		argPtr(s.sgum+cu.DevicePtr(4*S)), argInt(S)); err != nil {
		return err
	}
	if err := b.matvecF16Launch(s.sd, ptr(lw.SharedDown), s.sa, 0, 0, D, S, normSpec{}); err != nil {
		return err
	}
	return b.launch(b.k.addGatedResidStep, b.elementwiseGrid(D), block, 0, argPtr(x), argPtr(s.moe), argPtr(s.sd),
		argPtr(s.sgum+cu.DevicePtr(4*2*S)), argInt(D))
}

func (s *stepper) issueHead(masked bool) error {
	b, cfg := s.b, s.cfg
	V, D := cfg.VocabSize, cfg.HiddenSize
	logits := ptr(s.spec.Logits)
	if err := b.matvecF16Launch(logits, ptr(s.spec.Weights.LMHead), ptr(s.spec.X), 0, 0, V, D, s.norm(s.spec.Weights.Norm)); err != nil {
		return err
	}
	nm := 0
	if masked {
		nm = len(cfg.EOSTokenIDs)
	}
	return b.launch(b.k.argmaxStep, s.argG, 1024, 0, argPtr(logits), argInt(V), argPtr(s.masked), argInt(nm), argPtr(s.st),
		argPtr(s.part), argPtr(s.ticket), argPtr(s.host.dev+cu.DevicePtr(s.slotBytes*s.cur+s.tokOff)),
		argPtr(s.host.dev+cu.DevicePtr(s.flagAt(s.cur, s.L))))
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
	launchStep := func(slot int, set, head bool) error {
		for i := 0; i <= s.L; i++ {
			atomic.StoreInt32(s.flag(slot, i), 0)
		}
		g, h := s.body[slot], s.heads[slot][mask]
		if s.mode == device.StepGraphSegmented {
			g = s.segs[0]
		}
		return b.o.async(func() error {
			if set {
				if err := b.launch(b.k.stepSet, 1, 1, 0, argPtr(s.st), argInt(tok), argInt(pos)); err != nil {
					return fmt.Errorf("cuda: stepper: set state: %w", err)
				}
			}
			if err := g.launch(b.compute); err != nil {
				return err
			}
			if head && s.mode == device.StepGraphFull {
				return h.launch(b.compute)
			}
			return nil
		})
	}
	launch := func(g *graph) error { return b.o.async(func() error { return g.launch(b.compute) }) }
	switch s.mode {
	case device.StepGraphFull:
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
		for l := range s.L {
			if err := s.pinned.RecordHits(l, s.layerIDs(slot, l)); err != nil {
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
			if err := launch(s.heads[0][mask]); err != nil {
				return 0, err
			}
		}
		for l := range s.L {
			if err := s.serveLayer(l); err != nil {
				s.abort()
				return 0, fmt.Errorf("cuda: stepper: layer %d: %w", l, err)
			}
		}
	default: // graph-segmented
		if err := launchStep(0, set, false); err != nil {
			return 0, err
		}
		for l := range s.L {
			if err := s.wait(0, l); err != nil {
				return 0, err
			}
			if err := s.serveSegment(l); err != nil {
				return 0, fmt.Errorf("cuda: stepper: layer %d: %w", l, err)
			}
		}
		if head {
			if err := launch(s.heads[0][mask]); err != nil {
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
		gs := append([]*graph{s.body[0], s.body[1], s.heads[0][0], s.heads[0][1], s.heads[1][0], s.heads[1][1]}, s.segs...)
		gs = append(gs, s.rest...)
		for _, g := range gs {
			if g != nil {
				errs = append(errs, g.destroy())
			}
		}
		s.body, s.segs, s.rest, s.heads, s.ahead = [2]*graph{}, nil, nil, [2][2]*graph{}, nil
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

// issueNormRope is the unfused q/k norm (when the model has one) and RoPE +
// KV append: for norms whose groups do not hold whole heads, and models
// without a q/k norm (Qwen).
func (s *stepper) issueNormRope(l int, q, k, v, kc, vc cu.DevicePtr) error {
	b, cfg, lw := s.b, s.cfg, &s.spec.Weights.Layers[l]
	KV, hd := cfg.KVDim(), cfg.HeadDim()
	Q := cfg.NumHeads * hd
	if lw.QNorm != nil {
		gq, gk := lw.QNorm.Len(), lw.KNorm.Len()
		if err := b.launch(b.k.qkNormStep, Q/gq+KV/gk, block, 0, argPtr(q), argPtr(k), argPtr(ptr(lw.QNorm)),
			argPtr(ptr(lw.KNorm)), argInt(wkind(lw.QNorm)), argInt(Q), argInt(gq), argInt(gk), argF32(float32(cfg.RMSNormEps))); err != nil {
			return err
		}
	}
	return b.launch(b.k.ropeKVStep, b.elementwiseGrid(Q/2+KV/2+KV), block, 0, argPtr(q), argPtr(k), argPtr(v),
		argPtr(kc), argPtr(vc), argInt(cfg.NumHeads), argInt(cfg.NumKVHeads), argInt(hd), argPtr(s.st), argF64(cfg.RopeTheta))
}

// serveSegment is the host's side of layer l in a graph-segmented step,
// once its routing is on the host: acquire the routed group from the cache
// (misses are copied and published), write the rows' addresses into the
// layer's table and launch segment l+1. With overlap, when the group mixes
// hits and misses, the hits' rows are leased first and their gate/up
// launched before the acquire, so they compute while the misses copy; the
// misses' gate/up and rest[l+1] follow the acquire.
func (s *stepper) serveSegment(l int) error {
	b := s.b
	ids := s.layerIDs(0, l)
	var early []bool // early[k]: expert k's gate/up was launched before the acquire
	if s.lease != nil {
		hits, releaseHits, err := s.lease.LeaseResident(l, ids)
		if err != nil {
			return fmt.Errorf("lease resident experts of %v: %w", ids, err)
		}
		defer releaseHits()
		n := 0
		for _, r := range hits {
			if r != nil {
				n++
			}
		}
		if n > 0 && n < len(ids) {
			clear(s.recs)
			for k, r := range hits {
				if r == nil {
					continue
				}
				if err := s.rowAddrs(l, ids[k:k+1], hits[k:k+1], s.recs[8*k:8*k+8]); err != nil {
					return err
				}
			}
			early = make([]bool, len(ids))
			for k, r := range hits {
				early[k] = r != nil
			}
			if err := b.upload(s.group(l), s.recs); err != nil {
				return err
			}
			if err := s.gateUpRuns(l, early, true); err != nil {
				return fmt.Errorf("hit gate/up: %w", err)
			}
			s.splitLayers++
			s.earlyExperts += int64(n)
		}
	}
	rows, release, err := s.spec.Experts.Acquire(l, ids)
	if err != nil {
		return fmt.Errorf("acquire experts %v: %w", ids, err)
	}
	defer release()
	if err := s.rowAddrs(l, ids, rows, s.recs); err != nil {
		return err
	}
	if err := b.upload(s.group(l), s.recs); err != nil {
		return err
	}
	if early == nil {
		return b.o.async(func() error { return s.segs[l+1].launch(b.compute) })
	}
	if err := s.gateUpRuns(l, early, false); err != nil {
		return fmt.Errorf("miss gate/up: %w", err)
	}
	return b.o.async(func() error { return s.rest[l+1].launch(b.compute) })
}

// gateUpRuns launches layer l's routed gate/up for the experts k with
// early[k] == want, one launch per run of consecutive such k (the kernel
// takes a contiguous slice of the group's table and writes act[k]).
func (s *stepper) gateUpRuns(l int, early []bool, want bool) error {
	b := s.b
	F := s.lay.Gate.Rows
	post := s.norm(s.spec.Weights.Layers[l].PostNorm)
	x := ptr(s.spec.X)
	for k := 0; k < len(early); {
		if early[k] != want {
			k++
			continue
		}
		k1 := k
		for k1 < len(early) && early[k1] == want {
			k1++
		}
		k0, n := k, k1-k
		if err := b.o.async(func() error {
			return b.gateUpLaunchFrom(s.act+cu.DevicePtr(4*k0*F), x, n, s.lay, rowTable{dev: s.group(l), k0: k0, norm: post})
		}); err != nil {
			return err
		}
		k = k1
	}
	return nil
}

// rowAddrs writes the device addresses of rows (the cache's answer for the
// routed ids of layer l) into dst (8 bytes each).
func (s *stepper) rowAddrs(l int, ids []int, rows []backend.Tensor, dst []byte) error {
	for k, r := range rows {
		t, ok := r.(*Tensor)
		if !ok || t.n < s.lay.Size {
			return fmt.Errorf("cuda: stepper: layer %d: expert %d: row %T is not a CUDA row of %d bytes", l, ids[k], r, s.lay.Size)
		}
		*(*uint64)(unsafe.Pointer(&dst[8*k])) = uint64(t.ptr)
	}
	return nil
}

// serveLayer is the host's side of layer l in a graph-wait step: wait for
// the routing, acquire the group from the cache (which copies and publishes
// any missing expert), and when the device found a missing row, hand it the
// group's row addresses and answer its miss ticket. When the generation
// changed, the layer's table is rebuilt for the next step. The lease is
// released at once: the step that reads the rows was launched before, so
// the compute event recorded now covers it.
func (s *stepper) serveLayer(l int) error {
	if err := s.wait(0, l); err != nil {
		return err
	}
	ids := s.layerIDs(0, l)
	E := s.cfg.NumExperts
	table := unsafe.Slice((*uint64)(unsafe.Add(s.host.p, s.tableOff+8*l*E)), E)
	missing := false
	for _, e := range ids {
		missing = missing || table[e] == 0
	}
	rows, release, err := s.spec.Experts.Acquire(l, ids)
	if err != nil {
		return fmt.Errorf("acquire experts %v: %w", ids, err)
	}
	defer release()
	fix := unsafe.Slice((*byte)(unsafe.Add(s.host.p, s.fixOff+8*l*s.A)), 8*s.A)
	if err := s.rowAddrs(l, ids, rows, fix); err != nil {
		return err
	}
	if missing {
		s.answered[l]++
		atomic.StoreInt32((*int32)(unsafe.Add(s.host.p, s.readyOff+8*l)), s.answered[l])
	} else {
		// The device used the table's rows: they must be the cache's.
		for k, e := range ids {
			if got := *(*uint64)(unsafe.Pointer(&fix[8*k])); got != table[e] {
				return fmt.Errorf("expert %d: the device table holds row %#x, the cache %#x", e, table[e], got)
			}
		}
	}
	return s.refreshTable(l)
}

// refreshTable rewrites layer l's table of resident rows when the cache's
// generation changed since it was last written. Only the host writes the
// table, and a step reads layer l's part only in its routing kernel, which
// ran before the host served the layer; the next step's reads come after
// this write (the next step is launched after the host served every layer).
func (s *stepper) refreshTable(l int) error {
	rows, seq, err := s.pub.PublishedRows(l)
	if err != nil {
		return err
	}
	if seq == s.tableSeq[l] && seq != 0 {
		return nil
	}
	E := s.cfg.NumExperts
	table := unsafe.Slice((*uint64)(unsafe.Add(s.host.p, s.tableOff+8*l*E)), E)
	for e, r := range rows {
		var addr uint64
		if r != nil {
			t, ok := r.(*Tensor)
			if !ok || t.n < s.lay.Size {
				return fmt.Errorf("cuda: stepper: layer %d: expert %d: row %T is not a CUDA row of %d bytes", l, e, r, s.lay.Size)
			}
			addr = uint64(t.ptr)
		}
		atomic.StoreUint64(&table[e], addr)
	}
	s.tableSeq[l] = seq
	return nil
}

// abort makes every gate/up kernel waiting for the host trap instead of
// waiting for an answer that will not come.
func (s *stepper) abort() {
	if s.pub == nil || !s.host.ok {
		return
	}
	for l := range s.L {
		atomic.StoreInt32((*int32)(unsafe.Add(s.host.p, s.readyOff+8*l+4)), 1)
	}
}

// OverlapCounts implements device.OverlapCounter.
func (s *stepper) OverlapCounts() (split, early int64) { return s.splitLayers, s.earlyExperts }
