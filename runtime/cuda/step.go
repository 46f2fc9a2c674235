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
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// A captured decode step (engine.Stepper). The step's kernels are captured
// once into CUDA graphs and replayed, so a step costs one or a few graph
// launches instead of ~20 launches per layer from Go.
//
// What changes between steps lives in device memory: the step state
// (token, position: kernels/decode.cu) and, per layer, the routed group's
// row table (GroupTable: weights written by route_step, row addresses
// gathered on the device at full residency or written by the host after the
// cache served the group at partial residency).
//
//   - graph-full (full residency: no row ever moves): one graph for the
//     whole step (embed, every layer with routing on the GPU, final norm)
//     plus a head graph (lm_head, argmax). The host waits for the token,
//     then reads every layer's routed ids from mapped memory and accounts
//     them as cache hits (cache.RecordHits).
//   - graph-segmented (partial residency): L+1 graphs cut at the routing
//     reads: segment 0 = embed + attention and routing of layer 0, segment
//     l = experts of layer l-1 + attention and routing of layer l, segment
//     L = experts of layer L-1 + final norm. Between segments the host reads
//     the routed ids, acquires the rows from the cache (misses are copied
//     then, on the copy stream, published after completion), writes their
//     addresses into the layer's device table and launches the next segment.
//
// Fusions, each with the op-by-op path's rounding (so the bits match):
// q|k|v one matvec over the fused weight (engine.LayerWeights.QKV); q/k norm
// one launch; RoPE + KV append one launch; o_proj adds the residual in its
// epilogue; the routed down projection adds the residual (no shared
// expert); Qwen's shared gate|up|mix one matvec and its gated add plus
// residual one launch.
type stepper struct {
	b    *Backend
	spec engine.StepSpec
	cfg  model.Config
	lay  qpack.RecordLayout
	mode string
	L, A int

	pinned engine.PinnedRows // graph-full only

	// Device buffers the stepper owns.
	bufs   []*Tensor
	st     cu.DevicePtr // int32[4]: token, position
	qkv    cu.DevicePtr // [Hq*hd + 2*Hkv*hd]
	att    cu.DevicePtr // [Hq*hd]
	rlog   cu.DevicePtr // router logits [E]
	moe    cu.DevicePtr // [D]
	act    cu.DevicePtr // [A*F]
	sgum   cu.DevicePtr // Qwen: [2S+1] shared gate | up | mix
	sa     cu.DevicePtr // Qwen: [S]
	sd     cu.DevicePtr // Qwen: [D]
	groups cu.DevicePtr // [L] GroupTable
	tables cu.DevicePtr // graph-full: [L][E] row addresses
	masked cu.DevicePtr // EOS ids
	part   cu.DevicePtr // argmax: one candidate per block
	ticket cu.DevicePtr // argmax: blocks done (the last one resets it)
	argG   int          // argmax blocks

	// host: mapped pinned memory the step kernels write: flags [L+1] int32
	// (route_step of layer l sets flag l, argmax_step flag L), the token,
	// and ids [L][A] int32.
	host   mappedBuf
	tokOff int
	idsOff int

	body  *graph    // graph-full
	segs  []*graph  // graph-segmented
	heads [2]*graph // [0] nothing masked, [1] EOS masked

	ids  []int  // scratch: one layer's routed ids
	recs []byte // scratch: one layer's row addresses
}

var _ engine.StepperBackend = (*Backend)(nil)

// NewStepper implements engine.StepperBackend. It returns (nil, nil) when
// the device cannot run captured steps (kernels cannot write mapped host
// memory): the engine then issues op by op.
func (b *Backend) NewStepper(spec engine.StepSpec) (engine.Stepper, error) {
	if !b.results.ok {
		return nil, nil
	}
	s := &stepper{b: b, spec: spec, cfg: spec.Config, lay: spec.Layout, L: spec.Config.NumLayers, A: spec.Config.TopK}
	if err := s.check(); err != nil {
		return nil, err
	}
	s.mode = engine.StepGraphSegmented
	if p, ok := spec.Experts.(engine.PinnedRows); ok && p.FullResidency() {
		s.mode, s.pinned = engine.StepGraphFull, p
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
	switch s.spec.Executor {
	case "scalar-v1", "grouped-v1", "fused-topk-v1":
	default:
		return fmt.Errorf("cuda: stepper: executor %q", s.spec.Executor)
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

// Mode implements engine.Stepper.
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
		{&s.st, 4, backend.Bytes}, {&s.qkv, Q + 2*KV, backend.F32}, {&s.att, Q, backend.F32},
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
		wants = append(wants, want{&s.tables, s.L * E * 8, backend.Bytes})
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
	p, d, err := hostAllocMapped(s.idsOff + 4*s.L*s.A)
	if err != nil {
		return err
	}
	s.host = mappedBuf{p: p, dev: d, n: s.idsOff + 4*s.L*s.A, ok: true}
	clear(s.host.bytes())

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
	for m := range s.heads {
		if s.heads[m], err = capture("head", func() error { return s.issueHead(m == 1) }); err != nil {
			return err
		}
	}
	if s.pinned != nil {
		s.body, err = capture("step", func() error {
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
		return err
	}
	s.segs = make([]*graph, s.L+1)
	for l := 0; l <= s.L; l++ {
		s.segs[l], err = capture(fmt.Sprintf("segment %d", l), func() error {
			if l == 0 {
				if err := s.issueEmbed(); err != nil {
					return err
				}
			} else if err := s.issueExperts(l - 1); err != nil {
				return err
			}
			if l < s.L {
				return s.issueAttention(l)
			}
			return nil
		})
		if err != nil {
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
	if lw.QNorm != nil && lw.QNorm.Len()%hd == 0 && lw.KNorm.Len()%hd == 0 {
		gq, gk := lw.QNorm.Len(), lw.KNorm.Len()
		if err := b.launch(b.k.qkNormRopeKVStep, Q/gq+KV/gk, block, 0, argPtr(q), argPtr(k), argPtr(v), argPtr(kc), argPtr(vc),
			argPtr(ptr(lw.QNorm)), argPtr(ptr(lw.KNorm)), argInt(wkind(lw.QNorm)), argInt(cfg.NumHeads), argInt(cfg.NumKVHeads),
			argInt(hd), argInt(gq), argInt(gk), argPtr(s.st), argF64(cfg.RopeTheta), argF32(float32(cfg.RMSNormEps))); err != nil {
			return err
		}
	} else if err := s.issueNormRope(l, q, k, v, kc, vc); err != nil {
		return err
	}
	if err := b.launch(b.k.attentionStep, cfg.NumHeads, block, (s.spec.MaxSeq+attWarps*hd)*4, argPtr(s.att), argPtr(q),
		argPtr(kc), argPtr(vc), argPtr(s.st), argInt(cfg.NumHeads), argInt(cfg.NumKVHeads), argInt(hd)); err != nil {
		return err
	}
	if err := b.matvecF16Launch(x, ptr(lw.O), s.att, x, 2, D, Q, normSpec{}); err != nil {
		return err
	}
	if err := b.matvecF16Launch(s.rlog, ptr(lw.Router), x, 0, 0, E, D, s.norm(lw.PostNorm)); err != nil {
		return err
	}
	var table cu.DevicePtr
	if s.pinned != nil {
		table = s.tables + cu.DevicePtr(8*l*E)
	}
	norm := 0
	if cfg.NormTopKProb {
		norm = 1
	}
	return b.launch(b.k.routeStep, 1, 32, 0, argPtr(s.rlog), argInt(E), argInt(s.A), argInt(norm),
		argPtr(table), argPtr(s.group(l)), argPtr(s.host.dev+cu.DevicePtr(s.idsOff+4*l*s.A)), argPtr(s.host.dev+cu.DevicePtr(4*l)))
}

func (s *stepper) group(l int) cu.DevicePtr { return s.groups + cu.DevicePtr(l*tableBytes) }

// issueExperts: the routed experts of layer l in the executor's launch
// structure (grouped-v1 and fused-topk-v1: one gate/up and one down launch
// for the group; scalar-v1: one of each per expert, combined in k order),
// then Qwen's shared expert, then the residual add.
func (s *stepper) issueExperts(l int) error {
	b, cfg, lw := s.b, s.cfg, &s.spec.Weights.Layers[l]
	D := cfg.HiddenSize
	x := ptr(s.spec.X)
	post := s.norm(lw.PostNorm) // every consumer of the post-attention norm computes it while staging x
	shared := cfg.HasSharedExpert()
	grp := s.group(l)
	if s.spec.Executor == "scalar-v1" {
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
	} else {
		if err := b.gateUpLaunchFrom(s.act, x, s.A, s.lay, rowTable{dev: grp, norm: post}); err != nil {
			return err
		}
		if !shared {
			return b.downLaunchFrom(x, s.act, s.A, s.lay, rowTable{dev: grp}, x, false)
		}
		if err := b.downLaunchFrom(s.moe, s.act, s.A, s.lay, rowTable{dev: grp}, 0, false); err != nil {
			return err
		}
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
		argPtr(s.part), argPtr(s.ticket), argPtr(s.host.dev+cu.DevicePtr(s.tokOff)), argPtr(s.host.dev+cu.DevicePtr(4*s.L)))
}

// flag is host-visible flag i.
func (s *stepper) flag(i int) *int32 { return (*int32)(unsafe.Add(s.host.p, 4*i)) }

// wait spins until flag i is set. After flagPatience it waits for the
// compute stream instead (which also surfaces a failed launch) and then
// requires the flag.
func (s *stepper) wait(i int) error {
	f := s.flag(i)
	start := time.Now()
	for n := 1; ; n++ {
		if atomic.LoadInt32(f) != 0 {
			return nil
		}
		if n&1023 == 0 && time.Since(start) > flagPatience {
			if err := s.b.Synchronize(); err != nil {
				return err
			}
			if atomic.LoadInt32(f) != 0 {
				return nil
			}
			return fmt.Errorf("cuda: stepper: the step completed without setting flag %d", i)
		}
	}
}

const flagPatience = 50 * time.Millisecond

// layerIDs reads layer l's routed ids from mapped memory into s.ids.
func (s *stepper) layerIDs(l int) []int {
	base := unsafe.Add(s.host.p, s.idsOff+4*l*s.A)
	for k := range s.A {
		s.ids[k] = int(*(*int32)(unsafe.Add(base, 4*k)))
	}
	return s.ids
}

// Step implements engine.Stepper.
func (s *stepper) Step(tok, pos int, set, head, suppress bool) (int, error) {
	if pos < 0 || pos >= s.spec.MaxSeq {
		return 0, fmt.Errorf("cuda: stepper: position %d outside the KV cache of %d", pos, s.spec.MaxSeq)
	}
	if set && (tok < 0 || tok >= s.cfg.VocabSize) {
		return 0, fmt.Errorf("cuda: stepper: token %d outside the vocabulary of %d", tok, s.cfg.VocabSize)
	}
	for i := 0; i <= s.L; i++ {
		atomic.StoreInt32(s.flag(i), 0)
	}
	b := s.b
	h := s.heads[0]
	if suppress {
		h = s.heads[1]
	}
	start := func(g *graph) error {
		return b.o.async(func() error {
			if set {
				if err := b.launch(b.k.stepSet, 1, 1, 0, argPtr(s.st), argInt(tok), argInt(pos)); err != nil {
					return fmt.Errorf("cuda: stepper: set state: %w", err)
				}
			}
			return g.launch(b.compute)
		})
	}
	launch := func(g *graph) error { return b.o.async(func() error { return g.launch(b.compute) }) }
	if s.pinned != nil {
		if err := start(s.body); err != nil {
			return 0, err
		}
		last := s.L - 1
		if head {
			if err := launch(h); err != nil {
				return 0, err
			}
			last = s.L
		}
		if err := s.wait(last); err != nil {
			return 0, err
		}
		for l := range s.L {
			if err := s.pinned.RecordHits(l, s.layerIDs(l)); err != nil {
				return 0, fmt.Errorf("cuda: stepper: layer %d: %w", l, err)
			}
		}
	} else {
		if err := start(s.segs[0]); err != nil {
			return 0, err
		}
		for l := range s.L {
			if err := s.wait(l); err != nil {
				return 0, err
			}
			ids := s.layerIDs(l)
			rows, release, err := s.spec.Experts.Acquire(l, ids)
			if err != nil {
				return 0, fmt.Errorf("cuda: stepper: layer %d: acquire experts %v: %w", l, ids, err)
			}
			for k, r := range rows {
				t, ok := r.(*Tensor)
				if !ok || t.n < s.lay.Size {
					release()
					return 0, fmt.Errorf("cuda: stepper: layer %d: expert %d: row %T is not a CUDA row of %d bytes", l, ids[k], r, s.lay.Size)
				}
				*(*uint64)(unsafe.Pointer(&s.recs[8*k])) = uint64(t.ptr)
			}
			err = b.upload(s.group(l), s.recs)
			if err == nil {
				err = launch(s.segs[l+1])
			}
			release()
			if err != nil {
				return 0, fmt.Errorf("cuda: stepper: layer %d: %w", l, err)
			}
		}
		if head {
			if err := launch(h); err != nil {
				return 0, err
			}
			if err := s.wait(s.L); err != nil {
				return 0, err
			}
		}
	}
	if !head {
		return 0, nil
	}
	return int(*(*int32)(unsafe.Add(s.host.p, s.tokOff))), nil
}

// Close implements engine.Stepper: it waits for the device, then frees the
// graphs, buffers and mapped memory.
func (s *stepper) Close() error {
	b := s.b
	return b.o.do(func() error {
		errs := []error{b.compute.Synchronize()}
		gs := append([]*graph{s.body, s.heads[0], s.heads[1]}, s.segs...)
		for _, g := range gs {
			if g != nil {
				errs = append(errs, g.destroy())
			}
		}
		s.body, s.segs, s.heads = nil, nil, [2]*graph{}
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
