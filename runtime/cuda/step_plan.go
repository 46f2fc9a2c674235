//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/plan"
)

// issueBody issues body[lo:hi) into the stream being captured. Without
// gateUp the first instruction, a routed-experts, leaves out its group's
// gate/up (overlap issued it outside the segment: gateUpRuns).
func (s *stepper) issueBody(lo, hi int, gateUp bool) error {
	timeline := s.timelineOn() && lo == 0 && hi == len(s.prog.body)
	if timeline {
		if err := s.timelineMark(s.tl.start, s.b.compute); err != nil {
			return err
		}
	}
	for i := lo; i < hi; i++ {
		in := s.prog.body[i]
		if err := s.forkPrefetch(i); err != nil {
			return fmt.Errorf("instruction %d (%s): %w", i, in.Op, err)
		}
		if s.b.rec != nil {
			s.b.recTag = fmt.Sprintf("%s L%d", in.Op, in.Layer)
		}
		var err error
		switch in.Op {
		case plan.OpEmbed:
			err = s.issueEmbed()
		case plan.OpAttnIn:
			err = s.issueAttnIn(in.Layer)
		case plan.OpAttention:
			err = s.attFenceMark(1)
			if err == nil {
				err = s.issueAttention(in.Layer)
			}
			if err == nil {
				err = s.attFenceMark(2)
			}
		case plan.OpAttnOut:
			err = s.issueAttnOut(in.Layer)
		case plan.OpRoute:
			err = s.issueRoute(i, in.Layer)
		case plan.OpRoutedExperts:
			err = s.issueRoutedExperts(i, in.Layer, gateUp || i != lo)
		case plan.OpSharedExpert:
			err = s.issueSharedExpert(i, in.Layer)
		case plan.OpMoEResidual:
			err = s.issueMoEResidual(i)
		default:
			err = fmt.Errorf("%s has no kernel in a captured step", in.Op) // compile refused it
		}
		if err != nil {
			return fmt.Errorf("instruction %d (%s): %w", i, in.Op, err)
		}
		if timeline {
			if err := s.timelineMark(s.tl.ends[i], s.b.compute); err != nil {
				return fmt.Errorf("instruction %d (%s): %w", i, in.Op, err)
			}
		}
	}
	return nil
}

// issueHead issues the head instructions: head (lm_head staging the final
// norm) and select (argmax, EOS ids masked when masked). With timed, the
// prefill timer's end event is recorded between them (the select kernel
// then follows an event node, so it is launched plainly).
func (s *stepper) issueHead(masked, timed bool) error {
	for _, in := range s.prog.head {
		if s.b.rec != nil {
			s.b.recTag = in.Op.String()
		}
		var err error
		switch in.Op {
		case plan.OpHead:
			err = s.issueLMHead()
		case plan.OpSelect:
			if timed {
				// An event record node of the graph (a plain record
				// during capture would record nothing at launch).
				if err := recordEventExternal(s.evHead, s.b.compute); err != nil {
					return fmt.Errorf("record the prefill end event: %w", err)
				}
				s.b.pdlPrev = false
			}
			err = s.issueSelect(masked)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", in.Op, err)
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

// norm asks a consumer kernel to stage RMSNorm(x)·w (one group over the
// hidden size) instead of x: the captured step launches no norm kernel.
func (s *stepper) norm(w backend.Tensor) normSpec {
	return normSpec{w: ptr(w), kind: wkind(w), eps: float32(s.cfg.RMSNormEps)}
}

// stagedNorm is the norm an instruction that reads xn stages from x: that
// of the instruction that wrote xn (attn-in: the input norm, route: the
// post-attention norm).
func (s *stepper) stagedNorm(i int) (normSpec, error) {
	j := s.prog.xnFrom[i]
	if j < 0 {
		return normSpec{}, fmt.Errorf("reads no xn")
	}
	w := s.spec.Weights.Layers[s.prog.body[j].Layer]
	switch s.prog.body[j].Op {
	case plan.OpAttnIn:
		return s.norm(w.InputNorm), nil
	case plan.OpRoute:
		return s.norm(w.PostNorm), nil
	}
	return normSpec{}, fmt.Errorf("xn written by %s", s.prog.body[j].Op)
}

// issueEmbed is embed: x = E[token].
func (s *stepper) issueEmbed() error {
	w := s.spec.Weights.Embed
	D := s.cfg.HiddenSize
	return s.b.launch(s.b.k.embedStep, s.b.elementwiseGrid(D), block, 0,
		argPtr(ptr(s.spec.X)), argPtr(ptr(w)), argInt(wkind(w)), argPtr(s.st), argInt(D))
}

// issueAttnIn is attn-in: q|k|v = W·rmsnorm(x) (+bias) in one matvec over
// the fused weight (device.LayerWeights.QKV). When attention_in_step runs
// the q/k norm, RoPE and KV append (attentionIn) that is all; else they
// follow in one launch (one block per head) when the norms hold whole
// heads, or as the unfused q/k norm and RoPE + KV append.
func (s *stepper) issueAttnIn(l int) error {
	b, cfg, lw := s.b, s.cfg, &s.spec.Weights.Layers[l]
	D, KV, hd := cfg.HiddenSize, cfg.KVDim(), cfg.HeadDim()
	Q := cfg.NumHeads * hd
	q, k, v := s.qkv, s.qkv+cu.DevicePtr(4*Q), s.qkv+cu.DevicePtr(4*(Q+KV))
	bk := 0
	if lw.QKVBias != nil {
		bk = wkind(lw.QKVBias)
	}
	if s.ropeInQKV(l) {
		// matvec_f16_rope_kv: the rows in RoPE pairs, rotated and appended in the epilogue
		kk := s.kvKernels(l)
		fn, smem := kk.matvecRopeKV, xsBytes(D)+16
		nm := s.norm(lw.InputNorm)
		b.ropeInQKVLaunches++
		return b.launch(fn, b.rowGrid(fn, smem, (Q+2*KV)/2), block, smem, argPtr(s.qkv), argPtr(ptr(lw.QKV)), argPtr(ptr(s.spec.X)),
			argPtr(ptr(lw.QKVBias)), argInt(bk), argInt(D), argPtr(nm.w), argInt(nm.kind), argF32(nm.eps),
			argPtr(ptr(s.spec.KCache[l])), argPtr(ptr(s.spec.VCache[l])), argInt(cfg.NumHeads), argInt(cfg.NumKVHeads), argInt(hd),
			argPtr(s.st), argF64(cfg.RopeTheta))
	}
	if err := b.matvecF16Launch(s.qkv, ptr(lw.QKV), ptr(s.spec.X), ptr(lw.QKVBias), bk, Q+2*KV, D, s.norm(lw.InputNorm)); err != nil {
		return err
	}
	if s.attentionIn(l) {
		return nil // attention_in_step normalises, rotates and appends (issueAttention)
	}
	kc, vc := ptr(s.spec.KCache[l]), ptr(s.spec.VCache[l])
	kk := s.kvKernels(l)
	if s.headNorms(l) {
		gq, gk := lw.QNorm.Len(), lw.KNorm.Len()
		return b.launch(kk.qkNormRopeKVStep, cfg.NumHeads+cfg.NumKVHeads, block, 0, argPtr(s.qn), argPtr(q), argPtr(k), argPtr(v), argPtr(kc), argPtr(vc),
			argPtr(ptr(lw.QNorm)), argPtr(ptr(lw.KNorm)), argInt(wkind(lw.QNorm)), argInt(cfg.NumHeads), argInt(cfg.NumKVHeads),
			argInt(hd), argInt(gq), argInt(gk), argPtr(s.st), argF64(cfg.RopeTheta), argF32(float32(cfg.RMSNormEps)))
	}
	if lw.QNorm != nil {
		gq, gk := lw.QNorm.Len(), lw.KNorm.Len()
		if err := b.launch(b.k.qkNormStep, Q/gq+KV/gk, block, 0, argPtr(q), argPtr(k), argPtr(ptr(lw.QNorm)),
			argPtr(ptr(lw.KNorm)), argInt(wkind(lw.QNorm)), argInt(Q), argInt(gq), argInt(gk), argF32(float32(cfg.RMSNormEps))); err != nil {
			return err
		}
	}
	return b.launch(kk.ropeKVStep, b.elementwiseGrid(Q/2+KV/2+KV), block, 0, argPtr(q), argPtr(k), argPtr(v),
		argPtr(kc), argPtr(vc), argInt(cfg.NumHeads), argInt(cfg.NumKVHeads), argInt(hd), argPtr(s.st), argF64(cfg.RopeTheta))
}

// kvKernels are the KV kernels for layer l's caches' element type (FP32, or
// the _kv16 twins over FP16 caches).
func (s *stepper) kvKernels(l int) *kvKernels {
	return &s.b.k.kv[kvIndex(s.spec.KCache[l].DType())]
}

// ropeInQKV: layer l's q|k|v matvec rotates and appends in its epilogue
// (matvec_f16_rope_kv) instead of a rope_kv_step launch after it, with the
// same bits, when tuning.ropeInQKV asks for it, the layer has no q/k norms
// (they need the whole projection first), attention_in_step does not do it
// (attentionIn), the stepper is not recording a persistent program (the
// interpreter has no such instruction), the staged input and pos fit
// shared memory, and the head dim is even.
func (s *stepper) ropeInQKV(l int) bool {
	b, cfg := s.b, s.cfg
	return b.tune.ropeInQKV && b.rec == nil && s.spec.Weights.Layers[l].QNorm == nil && !s.attentionIn(l) &&
		xsBytes(cfg.HiddenSize)+16 <= b.smemMax && cfg.HeadDim()%2 == 0
}

// headNorms: layer l has q/k norms whose groups hold whole heads, so one
// launch normalises, rotates and appends per head, writing the rotated
// queries out of place (qn).
func (s *stepper) headNorms(l int) bool {
	lw, hd := &s.spec.Weights.Layers[l], s.cfg.HeadDim()
	return lw.QNorm != nil && lw.QNorm.Len()%hd == 0 && lw.KNorm.Len()%hd == 0
}

// issueAttention is attention over K, V[0..pos] of layer l in one launch,
// split over positions (heads x attSplit blocks; the last block of each head
// merges its partials): attention_split in kernels/step.cuh, the op-by-op
// kernel's body, so the bits are the same. Under attentionIn the launch is
// attention_in_step, which first normalises and rotates each block's query
// head and appends the new position's K and V rows (attention_in). With
// tuning.attPrefetch the launch is attention_pf_step, whose blocks first ask
// L2 for their range's first K/V rows: under programmatic dependent launch
// they are resident while the rope/append kernel before them runs, which
// moves almost no bytes (a hint only; the same bits). With tuning.attPipe
// it is attention_pipe_step: over an FP16 cache each warp loads the next
// round's K/V rows while it computes a round (same bits: the arithmetic is
// att_round's either way), after the same prefetch when attPrefetch is set.
// With tuning.attTrace (before all of these) it is attention_trace_step,
// attention_step recording each block's times and SM (step_att_trace.go);
// with tuning.attB3, attention_b3_step (three blocks an SM); with
// none of these, attention_cs_step (streaming K/V loads: the default;
// tuning.noAttStream, or a persistent program being recorded: attention_step). Under the
// diagnostic tuning.attAliasKV every layer's attention reads layer 0's
// cache.
// With tuning.attRing (before attPipe) it is attention_ring_step: each warp
// keeps its next two rounds' K/V rows copying into shared memory while it
// computes one (an FP16 cache up to hd 128; the same bits).
func (s *stepper) issueAttention(l int) error {
	b, cfg, lw := s.b, s.cfg, &s.spec.Weights.Layers[l]
	hd, Q, KV := cfg.HeadDim(), cfg.NumHeads*cfg.HeadDim(), cfg.KVDim()
	kc, vc := argPtr(ptr(s.spec.KCache[l])), argPtr(ptr(s.spec.VCache[l]))
	if b.tune.attAliasKV && b.rec == nil && !s.attentionIn(l) {
		kc, vc = argPtr(ptr(s.spec.KCache[0])), argPtr(ptr(s.spec.VCache[0])) // a diagnostic that changes tokens
	}
	H, Hkv := argInt(cfg.NumHeads), argInt(cfg.NumKVHeads)
	if s.attentionIn(l) {
		q, k, v := s.qkv, s.qkv+cu.DevicePtr(4*Q), s.qkv+cu.DevicePtr(4*(Q+KV))
		var qw, kw cu.DevicePtr
		wk, gq, gk := 0, hd, hd
		if lw.QNorm != nil {
			qw, kw, wk, gq, gk = ptr(lw.QNorm), ptr(lw.KNorm), wkind(lw.QNorm), lw.QNorm.Len(), lw.KNorm.Len()
		}
		return b.launch(s.kvKernels(l).attentionInStep, cfg.NumHeads*attSplit, block, 0, argPtr(s.att), argPtr(s.apart), argPtr(s.acnt),
			argPtr(q), argPtr(k), argPtr(v), kc, vc, argPtr(qw), argPtr(kw), argInt(wk), H, Hkv, argInt(hd), argInt(gq), argInt(gk),
			argPtr(s.st), argF64(cfg.RopeTheta), argF32(float32(cfg.RMSNormEps)))
	}
	qa := s.qkv // the unfused path rotates q in place
	if s.headNorms(l) {
		qa = s.qn
	}
	st := s.st
	if s.stWin != 0 {
		st = s.stWin // tuning.attWindow: a diagnostic that changes tokens
	}
	if s.attTraceOn() {
		b.attTraceLaunches++
		return b.launch(s.kvKernels(l).attentionTraceStep, cfg.NumHeads*attSplit, block, 0, argPtr(s.att), argPtr(s.apart),
			argPtr(s.acnt), argPtr(qa), kc, vc, argPtr(st), H, Hkv, argInt(hd), argPtr(s.attTraceAt(l)))
	}
	if b.tune.attB3 && b.rec == nil {
		b.attB3Launches++
		return b.launch(s.kvKernels(l).attentionB3Step, cfg.NumHeads*attSplit, block, 0, argPtr(s.att), argPtr(s.apart),
			argPtr(s.acnt), argPtr(qa), kc, vc, argPtr(st), H, Hkv, argInt(hd))
	}
	if b.tune.attRing && b.rec == nil {
		b.attRingLaunches++
		smem := 0 // an FP32 cache runs the plain loop
		if s.spec.KCache[l].DType() == backend.F16 {
			smem = attRingSmem
		}
		return b.launch(s.kvKernels(l).attentionRingStep, cfg.NumHeads*attSplit, block, smem, argPtr(s.att), argPtr(s.apart),
			argPtr(s.acnt), argPtr(qa), kc, vc, argPtr(st), H, Hkv, argInt(hd))
	}
	if b.tune.attPipe && b.rec == nil {
		b.attPipeLaunches++
		return b.launch(s.kvKernels(l).attentionPipeStep, cfg.NumHeads*attSplit, block, 0, argPtr(s.att), argPtr(s.apart), argPtr(s.acnt),
			argPtr(qa), kc, vc, argPtr(st), H, Hkv, argInt(hd), argInt(b.tune.attPrefetch))
	}
	if rows := b.tune.attPrefetch; rows > 0 && b.rec == nil {
		b.attPrefetchLaunches++
		return b.launch(s.kvKernels(l).attentionPfStep, cfg.NumHeads*attSplit, block, 0, argPtr(s.att), argPtr(s.apart), argPtr(s.acnt),
			argPtr(qa), kc, vc, argPtr(st), H, Hkv, argInt(hd), argInt(rows))
	}
	if !b.tune.noAttStream && b.rec == nil {
		b.attCsLaunches++
		return b.launch(s.kvKernels(l).attentionCsStep, cfg.NumHeads*attSplit, block, 0, argPtr(s.att), argPtr(s.apart),
			argPtr(s.acnt), argPtr(qa), kc, vc, argPtr(st), H, Hkv, argInt(hd))
	}
	return b.launch(s.kvKernels(l).attentionStep, cfg.NumHeads*attSplit, block, 0, argPtr(s.att), argPtr(s.apart), argPtr(s.acnt),
		argPtr(qa), kc, vc, argPtr(st), H, Hkv, argInt(hd))
}

// attentionIn: layer l's q/k norm, RoPE and KV append run inside the
// attention launch (attention_in_step) when tuning.attnIn asks for it, its
// norms, if any, hold whole heads, and no persistent program is being
// recorded (the persistent kernel interprets the separate launches). Off
// by default: on the H200 it decodes 2.3% (OLMoE shape) and 0.9% (Qwen)
// slower than the separate launches, and 3-6% slower at depths 1,900 and
// 3,968 (results/attention-one-launch-h200): every one of the heads x 16
// blocks normalises and rotates its query head before its first K/V load.
func (s *stepper) attentionIn(l int) bool {
	return s.b.tune.attnIn && s.b.rec == nil && (s.spec.Weights.Layers[l].QNorm == nil || s.headNorms(l))
}

// issueAttnOut is attn-out: o_proj with the residual added in its epilogue.
func (s *stepper) issueAttnOut(l int) error {
	cfg := s.cfg
	x := ptr(s.spec.X)
	return s.b.matvecF16Launch(x, ptr(s.spec.Weights.Layers[l].O), s.att, x, 2, cfg.HiddenSize, cfg.NumHeads*cfg.HeadDim(), normSpec{})
}

// issueRoute is route: router logits over the staged post-attention norm,
// then route_step (top-k, the group's weights and, by mode, its rows:
// graph-full gathers them from the device table of pinned rows, graph-wait
// from the host's table of resident rows, noting misses for await_step;
// graph-segmented leaves them to the host). Route_step sets layer l's flag
// when the host must see the ids; a graph-full step publishes every
// layer's ids at the last route instead, with one system fence.
func (s *stepper) issueRoute(i, l int) error {
	b, cfg, lw := s.b, s.cfg, &s.spec.Weights.Layers[l]
	if j, ok := s.sharedForkOf(i); ok {
		if err := s.forkShared(j); err != nil {
			return err
		}
	}
	E := cfg.NumExperts
	if s.routeIn() {
		// the routed experts' kernels route (issueRoutedIn)
		return b.matvecF16Launch(s.rlog, ptr(lw.Router), ptr(s.spec.X), 0, 0, E, cfg.HiddenSize, s.norm(lw.PostNorm))
	}
	ro := s.routeOut(l, i == s.prog.lastRoute)
	route := []uint64{argInt(s.A), argInt(ro.norm), argPtr(ro.table), argPtr(s.group(l)), argPtr(ro.need), argPtr(ro.ids), argPtr(ro.flag),
		argPtr(ro.copySrc), argPtr(ro.copyDst), argInt(ro.copyN)}
	if s.routeFused() {
		nm := s.norm(lw.PostNorm)
		smem := xsBytes(cfg.HiddenSize)
		grid := b.rowGrid(b.k.routerRouteStep, smem, E)
		return b.launch(b.k.routerRouteStep, grid, block, smem, append([]uint64{argPtr(s.rlog), argPtr(ptr(lw.Router)),
			argPtr(ptr(s.spec.X)), argInt(E), argInt(cfg.HiddenSize), argPtr(nm.w), argInt(nm.kind), argF32(nm.eps),
			argPtr(s.rtick + cu.DevicePtr(4*l))}, route...)...)
	}
	if err := b.matvecF16Launch(s.rlog, ptr(lw.Router), ptr(s.spec.X), 0, 0, E, cfg.HiddenSize, s.norm(lw.PostNorm)); err != nil {
		return err
	}
	return b.launch(b.k.routeStep, 1, 32, 0, append([]uint64{argPtr(s.rlog), argInt(E)}, route...)...)
}

// routeDest is where layer l's routing goes (route_step's arguments but the
// logits and the group table): the table rows are gathered from (0 when
// graph-segmented: the host writes the rows), the miss ticket (graph-wait),
// the ids, the flag raised for the host (0: none) and the copy of every
// layer's ids that the last route of a graph-full step publishes.
type routeDest struct {
	norm                   int
	table, need, ids, flag cu.DevicePtr
	copySrc, copyDst       cu.DevicePtr
	copyN                  int
}

// routeOut is layer l's routeDest; last: its route is the step's last.
func (s *stepper) routeOut(l int, last bool) routeDest {
	var r routeDest
	E := s.cfg.NumExperts
	switch s.mode {
	case device.StepGraphFull, device.StepPersistent:
		r.table = s.tables + cu.DevicePtr(8*l*E)
	case device.StepGraphWait:
		r.table = s.host.dev + cu.DevicePtr(s.tableOff+8*l*E)
		r.need = s.need + cu.DevicePtr(8*l)
	}
	if s.cfg.NormTopKProb {
		r.norm = 1
	}
	r.ids = s.host.dev + cu.DevicePtr(s.idsAt(s.cur, l))
	r.flag = s.host.dev + cu.DevicePtr(s.flagAt(s.cur, l))
	if s.deviceTables() {
		r.ids = s.idsDev + cu.DevicePtr(4*l*s.A)
		if !last {
			r.flag = 0
		} else {
			r.copySrc, r.copyDst, r.copyN = s.idsDev, s.host.dev+cu.DevicePtr(s.idsAt(s.cur, 0)), s.L*s.A
		}
	}
	return r
}

// routeIn: each layer's routing runs inside its routed experts' gate/up
// and down launches (experts_routed.cu: every block routes from the
// router's logits into its shared memory, block 0 of the gate/up publishes
// the ids), so no route_step is launched, with the same bits. It applies
// when tuning.routeIn asks for it, to graph-full steps (rows from the
// device table of pinned rows) of the grouped-v1 strategy that neither
// record a persistent program nor fuse route or experts otherwise, when
// both kernels stage their activations in shared memory within what the
// route-in kernels may request (routeInSmem) and route_step_body takes
// the shape (E <= 256 experts, at most 64 routed).
func (s *stepper) routeIn() bool {
	b := s.b
	if !b.tune.routeIn || b.rec != nil || s.mode != device.StepGraphFull || s.strategy != executor.PerGroup ||
		s.fusedExperts() || s.routeFused() || s.cfg.NumExperts > 256 || s.A > 64 {
		return false
	}
	if stagedBytes(s.lay.Scheme, s.lay.Gate.Cols) > b.routeInSmem {
		return false
	}
	_, _, smem, v := b.downShape(s.A, s.lay)
	return v == 0 && smem <= b.routeInSmem
}

// routeFused: route runs as one router_route_step launch (the router
// matvec, then route_step on the last block to finish) instead of two,
// with the same bits, when tuning.routeFused asks for it, the hidden size
// stages in shared memory, and the stepper is not recording a persistent
// program (the interpreter has no such instruction).
func (s *stepper) routeFused() bool {
	return s.b.tune.routeFused && s.b.rec == nil && xsBytes(s.cfg.HiddenSize) <= s.b.smemMax
}

// fusedExperts: a PerGroup routed-experts instruction runs as one launch
// of experts_moe_int4_t (gate/up, a grid barrier, down; experts_fused.cu)
// instead of the gate/up and down launches, with the same bits. Off by
// default (tuning.fusedMoE turns it on): on the H200 it decodes 1-2%
// slower than the two launches with programmatic dependent launch
// (results/fused-experts-h200). It applies to int4 records whose staging
// fits (moeShape), never while the stepper records a persistent program
// (the interpreter has no such instruction) nor when the gate/up was
// issued outside the segment (overlap: the caller checks gateUp).
func (s *stepper) fusedExperts() bool {
	if !s.b.tune.fusedMoE || s.b.rec != nil || s.strategy != executor.PerGroup {
		return false
	}
	_, _, _, _, ok := s.b.moeShape(s.A, s.lay)
	return ok
}

func (s *stepper) group(l int) cu.DevicePtr { return s.groups + cu.DevicePtr(l*tableBytes) }

// issueRoutedExperts is routed-experts in the executor's launch structure,
// its Strategy: executor.PerGroup (grouped-v1) one gate/up and one down
// launch for the group, executor.PerExpert (scalar-v1) one of each per
// expert, accumulated in k order. A graph-wait step first waits on the
// device for the host's answer when the group had a miss (await_step).
// Without gateUp the PerGroup gate/up is left out (overlap issued it).
func (s *stepper) issueRoutedExperts(i, l int, gateUp bool) error {
	b := s.b
	x := ptr(s.spec.X)
	xn, err := s.stagedNorm(i)
	if err != nil {
		return err
	}
	grp := s.group(l)
	if s.mode == device.StepGraphWait {
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
			if err := b.gateUpLaunchFrom(act, x, 1, s.lay, rowTable{dev: grp, k0: k, norm: xn}); err != nil {
				return err
			}
			if err := b.downLaunchFrom(s.moe, act, 1, s.lay, rowTable{dev: grp, k0: k}, 0, k > 0); err != nil {
				return err
			}
		}
		return nil
	case executor.PerGroup:
		if gateUp && s.fusedExperts() {
			out, resid := s.moe, cu.DevicePtr(0)
			if s.prog.downAddsResidual(i, s.strategy) {
				out, resid = x, x
			}
			if err := b.moeLaunch(out, s.act, x, s.A, s.lay, rowTable{dev: grp, norm: xn}, resid, s.bar+cu.DevicePtr(4*l)); err != nil {
				return err
			}
			switch f := b.tune.moeFlags; {
			case f&moeNoDown != 0:
				// the fused kernel ran gate/up only (a diagnostic tuning): the down kernel follows
				return b.downLaunchFrom(out, s.act, s.A, s.lay, rowTable{dev: grp}, resid, false)
			case f&moeNoBarrier != 0:
				return fmt.Errorf("fused routed experts: moeFlags %d drops the barrier but keeps the down phase", f)
			}
			return nil
		}
		if gateUp && s.routeIn() {
			return s.issueRoutedIn(i, l, xn)
		}
		if gateUp {
			if err := b.gateUpLaunchFrom(s.act, x, s.A, s.lay, rowTable{dev: grp, norm: xn}); err != nil {
				return err
			}
		}
		if s.prog.downAddsResidual(i, s.strategy) {
			return b.downLaunchFrom(x, s.act, s.A, s.lay, rowTable{dev: grp}, x, false)
		}
		return b.downLaunchFrom(s.moe, s.act, s.A, s.lay, rowTable{dev: grp}, 0, false)
	}
	return fmt.Errorf("executor strategy %s", s.strategy) // check refused it
}

// issueRoutedIn is a grouped-v1 routed-experts under routeIn: the route-in
// gate/up (block 0 publishing the ids, and the group table when the down
// kernel reads it: tuning.routeInWait), then the route-in down, or the _t
// down waiting before it reads the table.
func (s *stepper) issueRoutedIn(i, l int, xn normSpec) error {
	b, lay, E := s.b, s.lay, s.cfg.NumExperts
	x := ptr(s.spec.X)
	ro := s.routeOut(l, s.prog.body[s.prog.lastRoute].Layer == l)
	si, pi := schemeIndex(lay.Scheme), b.gateUpIndex()
	F, D := lay.Gate.Rows, lay.Gate.Cols
	nrp := gateUpNRP[pi]
	fn := b.k.gateupR[si][pi]
	smem := stagedBytes(lay.Scheme, D)
	b.routeInLaunches++
	var tbl cu.DevicePtr
	if b.tune.routeInWait {
		tbl = s.group(l)
	}
	if err := b.launch(fn, b.rowGrid(fn, smem, s.A*((F+nrp-1)/nrp)), block, smem, argPtr(s.act), argPtr(x), argInt(s.A),
		argInt(F), argInt(D), argInt(lay.Gate.Offset), argInt(lay.Up.Offset), argInt(lay.Gate.ColsPadded), argInt(lay.Gate.ScalesOffset),
		argPtr(xn.w), argInt(xn.kind), argF32(xn.eps), argPtr(s.rlog), argInt(E), argInt(ro.norm), argPtr(ro.table), argPtr(tbl),
		argPtr(ro.ids), argPtr(ro.flag), argPtr(ro.copySrc), argPtr(ro.copyDst), argInt(ro.copyN)); err != nil {
		return err
	}
	out, resid := s.moe, cu.DevicePtr(0)
	if s.prog.downAddsResidual(i, s.strategy) {
		out, resid = x, x
	}
	if b.tune.routeInWait {
		return b.downLaunchFrom(out, s.act, s.A, lay, rowTable{dev: tbl, late: true}, resid, false)
	}
	vi, R, dsmem, _ := b.downShape(s.A, lay)
	Dd, Fd := lay.Down.Rows, lay.Down.Cols
	return b.launch(b.k.downR[si][vi], (Dd+R-1)/R, block, dsmem, argPtr(out), argPtr(s.act), argInt(s.A), argInt(Dd), argInt(Fd),
		argInt(lay.Down.Offset), argInt(lay.Down.ColsPadded), argInt(lay.Down.ScalesOffset), argInt(R), argPtr(resid), argInt(0),
		argPtr(s.rlog), argInt(E), argInt(ro.norm), argPtr(ro.table))
}

// issueSharedExpert is shared-expert (Qwen) with the moe-residual that
// follows it (sharedAddsResidual, which compile requires): gate|up|mix in
// one matvec over the staged norm, then SiLU·up, down and x = x + moe +
// sigmoid(mix)·shared in one launch (sharedDownFused), or in three.
func (s *stepper) issueSharedExpert(i, l int) error {
	b, cfg, lw := s.b, s.cfg, &s.spec.Weights.Layers[l]
	D, S := cfg.HiddenSize, cfg.SharedFFN
	x := ptr(s.spec.X)
	xn, err := s.stagedNorm(i)
	if err != nil {
		return err
	}
	forked, err := s.joinShared(l)
	if err != nil {
		return err
	}
	if forked && b.tune.sharedForkEmpty {
		forked = false // the branch ran an empty kernel: the shared expert runs in line
	}
	if !forked {
		if err := b.matvecF16Launch(s.sgum, ptr(lw.SharedGUM), x, 0, 0, 2*S+1, D, xn); err != nil {
			return err
		}
	}
	if forked && !b.tune.sharedForkGUM {
		// the branch ran SiLU·up and the down matvec into sd
		return b.launch(b.k.addGatedResidStep, b.elementwiseGrid(D), block, 0, argPtr(x), argPtr(s.moe), argPtr(s.sd),
			argPtr(s.sgum+cu.DevicePtr(4*2*S)), argInt(D))
	}
	if s.sharedDownFused() {
		// shared_down_f16: SiLU·up staged, the down rows, and the gated
		// residual x += moe + sigmoid(mix)·shared in the epilogue.
		nr := b.pickNR(f16NR[:], len(f16NR), b.tune.f16NR, D)
		fn, smem := b.k.sharedDown[nr], xsBytes(S)+16
		return b.launch(fn, b.rowGrid(fn, smem, (D+f16NR[nr]-1)/f16NR[nr]), block, smem, argPtr(x), argPtr(ptr(lw.SharedDown)),
			argPtr(s.sgum), argPtr(s.moe), argInt(D), argInt(S))
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

// sharedDownFused: a shared expert's SiLU·up, down matvec and gated
// residual run as one shared_down_f16 launch instead of three, with the same
// bits, unless tuning.noSharedDown asks for three, the stepper records a
// persistent program (the interpreter has no such instruction), or the
// staged SiLU·up and the gate's sigmoid do not fit shared memory.
func (s *stepper) sharedDownFused() bool {
	return !s.b.tune.noSharedDown && s.b.rec == nil && xsBytes(s.cfg.SharedFFN)+16 <= s.b.smemMax
}

// issueMoEResidual is moe-residual: x = x + moe, unless the instruction
// before it already wrote x (residualFused).
func (s *stepper) issueMoEResidual(i int) error {
	if s.prog.residualFused(i, s.strategy) {
		return nil
	}
	x, D := ptr(s.spec.X), s.cfg.HiddenSize
	return s.b.launch(s.b.k.add, s.b.elementwiseGrid(D), block, 0, argPtr(x), argPtr(x), argPtr(s.moe), argInt(D))
}

// issueLMHead is head: logits = W_lm · rmsnorm(x)·norm (the norm staged).
func (s *stepper) issueLMHead() error {
	cfg := s.cfg
	return s.b.matvecF16Launch(ptr(s.spec.Logits), ptr(s.spec.Weights.LMHead), ptr(s.spec.X), 0, 0, cfg.VocabSize, cfg.HiddenSize, s.norm(s.spec.Weights.Norm))
}

// issueSelect is select: the greedy next token (argmax_step, EOS ids
// excluded when masked), written to the device's step state and the
// slot's token, and flag L set.
func (s *stepper) issueSelect(masked bool) error {
	b, cfg := s.b, s.cfg
	nm := 0
	if masked {
		nm = len(cfg.EOSTokenIDs)
	}
	return b.launch(b.k.argmaxStep, s.argG, 1024, 0, argPtr(ptr(s.spec.Logits)), argInt(cfg.VocabSize), argPtr(s.masked), argInt(nm), argPtr(s.st),
		argPtr(s.part), argPtr(s.ticket), argPtr(s.host.dev+cu.DevicePtr(s.slotBytes*s.cur+s.tokOff)),
		argPtr(s.host.dev+cu.DevicePtr(s.flagAt(s.cur, s.L))))
}
