package engine

import (
	"fmt"
	"strings"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/plan"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// Batched prefill: the prompt runs as the plan with T = its length (at most
// PrefillChunk positions a batch, the KV cache carried from one batch to the
// next), op by op on a backend that runs batched ops (backend.Batched: the
// CPU backend, and the CUDA backend, whose captured decode steps then start
// from the KV cache the batches filled: generateDevice). Per layer:
//
//   - the projections (q, k, v, o_proj, the router, Qwen's shared expert)
//     are one MatMul over the batch's T rows: each weight row is read once;
//   - norms and elementwise ops run over all T rows in one op (a norm
//     normalises each group of its weight's length: each token);
//   - RoPE, the KV append, attention and top-k run per token, on the
//     token's row: token t attends to positions 0..pos0+t of a cache that
//     already holds the whole batch's K and V (causal); a backend.RowOps
//     backend runs each of them over the batch's rows in one op, with the
//     per-token op's bits;
//   - the routed experts are computed by expert, not by token: the layer's
//     distinct routed experts, in first-use order (token order, then slot
//     order) with those the cache has published first at partial residency
//     (publishedFirst: no miss evicts an expert the batch still needs), are
//     leased TopK at a time through the cache (LeaseBatch, Serve:
//     the one protocol, with its publication and lease rules; a wave never
//     needs more rows than a routed group does, so it fits every capacity).
//     Each expert's matrices are read once for all of its (token, slot)
//     pairs (ExpertMatMul: gate and up into the wave's consecutive scratch
//     rows, one SiLU·up over the wave's pairs, down into each pair's
//     slot), the wave is released, and the next one is leased. At full
//     residency, where no wave can miss or evict, every wave is leased and
//     served first and then all of the layer's experts run as one wave (one
//     op per matrix), before the leases are released. After the last wave
//     every token combines its slots in slot order, as the executors do (a
//     backend.RowOps backend in one CombineRows op).
//
// Every op gives each token the bits of the per-token op (backend.Batched),
// and the combine runs in the executors' order, so batched prefill gives
// token-at-a-time prefill's logits and tokens bit for bit, on every
// executor and capacity. What changes is how often the cache is asked:
// once per distinct expert of a layer and batch instead of once per token
// and slot. Every (token, slot) pair still counts one lookup: the first
// pair of an expert in its wave is a hit or a miss as Serve finds it, the
// others hits (LeaseBatch: they read the row the lease holds), so
// hits + misses stay top-k x layers x positions, and misses and H2D bytes
// are those of the waves. Next-layer prefetch predicts one token's next
// group between two layers, so with it on the prompt runs token at a time.

// PrefillChunk is the most prompt positions one batch runs.
const PrefillChunk = 512

// Prefill modes (LoadOptions.Prefill).
const (
	// PrefillAuto runs batched prefill where the backend runs batched ops
	// and defaults to them (backend.BatchedDefault: the CPU backend, and
	// the CUDA backend since session 20) and next-layer prefetch is off,
	// and token at a time otherwise.
	PrefillAuto = "auto"
	// PrefillBatched asks for batched prefill; Load fails where it cannot run.
	PrefillBatched = "batched"
	// PrefillToken runs the prompt one position at a time (the plan with
	// T = 1), as decode steps run.
	PrefillToken = "token"
)

// PrefillModes lists the accepted prefill modes.
func PrefillModes() []string { return []string{PrefillAuto, PrefillBatched, PrefillToken} }

// ParsePrefill maps "" to PrefillAuto and checks the name.
func ParsePrefill(s string) (string, error) {
	switch s {
	case "", PrefillAuto:
		return PrefillAuto, nil
	case PrefillBatched, PrefillToken:
		return s, nil
	}
	return "", fmt.Errorf("prefill %q: want one of %s", s, strings.Join(PrefillModes(), ", "))
}

// usePrefill resolves mode on this engine's backend, step mode and
// prefetch.
func (e *Engine) usePrefill(mode string) error {
	bb, ok := e.be.(backend.Batched)
	can := ok && e.pf == nil
	switch mode {
	case PrefillToken:
		return nil
	case PrefillBatched:
		if !can {
			why := fmt.Sprintf("the %s backend has no batched ops", e.be.Name())
			if ok {
				why = fmt.Sprintf("prefetch %s predicts each position's next group between two layers", PrefetchNextLayer)
			}
			return fmt.Errorf("prefill %s: %s", PrefillBatched, why)
		}
	}
	if can && mode == PrefillAuto {
		if d, ok := e.be.(backend.BatchedDefault); ok && !d.BatchedDefault() {
			can = false
		}
	}
	if can {
		e.batched = bb
	}
	return nil
}

// PrefillMode is the prefill this engine runs: PrefillBatched or
// PrefillToken.
func (e *Engine) PrefillMode() string {
	if e.batched != nil {
		return PrefillBatched
	}
	return PrefillToken
}

// batch is the scratch of a batch of up to cap prompt positions, [T, *]
// row-major, allocated on the first batched prefill and kept.
type batch struct {
	cap                 int
	x, xn               backend.Tensor // [T, D]
	q, att, ao          backend.Tensor // [T, Hq*hd], [T, Hq*hd], [T, D]
	qn                  backend.Tensor // [T, Hq*hd]: QKRoPEKVRows' normalised q (models with q/k norms), swapped with q
	k, v                backend.Tensor // [T, Hkv*hd]
	rl                  backend.Tensor // router logits [T, E]
	moe                 backend.Tensor // [T, D]
	gate, up, act, outs backend.Tensor // per (token, slot): [T*A, F] x3, [T*A, D]
	sg, su, sa, sd, mix backend.Tensor // Qwen: [T, S] x3, [T, D], [T, 1]
	zeros               []float32      // [D]
	// The routed group of every token of the batch (the plan's group
	// buffer, on the host): ids[t*A+k], weights[t*A+k].
	ids     []int
	weights []float32
	// Device routing (backend.DeviceRouting, full residency): the layer's
	// routing RouteRows left on the device (route sets it, routed-experts
	// takes it), and the routings whose leases are still to be counted
	// (countDeviceLeases: a layer behind, the last before the selection).
	routing backend.Routing
	pending []pendingRouting
}

// pendingRouting is a layer's device routing whose leases the batch has
// yet to count.
type pendingRouting struct {
	layer int
	r     backend.Routing
}

// batchScratchStep is the position count batch scratch is sized in: a
// prompt longer than any before it frees and reallocates the scratch (on
// CUDA a free waits for the device) inside its time to first token, so the
// sizes come in steps of this many positions, up to a batch's most.
const batchScratchStep = 64

// batchFor returns scratch for T positions (at least; see batchScratchStep).
func (e *Engine) batchFor(T int) (*batch, error) {
	if e.bt != nil && e.bt.cap >= T {
		return e.bt, nil
	}
	if e.bt != nil {
		if err := e.freeBatch(); err != nil {
			return nil, err
		}
	}
	most := PrefillChunk
	if e.chunk > 0 {
		most = e.chunk
	}
	T = max(T, min((T+batchScratchStep-1)/batchScratchStep*batchScratchStep, most))
	cfg := e.cfg
	D, Q, KV, A, F := cfg.HiddenSize, cfg.NumHeads*cfg.HeadDim(), cfg.KVDim(), cfg.TopK, e.layout.Gate.Rows
	bt := &batch{cap: T, zeros: make([]float32, D), ids: make([]int, T*A), weights: make([]float32, T*A)}
	var err error
	alloc := func(n int) backend.Tensor {
		if err != nil {
			return nil
		}
		var t backend.Tensor
		t, err = e.be.Alloc(n)
		return t
	}
	bt.x, bt.xn, bt.q, bt.att, bt.ao = alloc(T*D), alloc(T*D), alloc(T*Q), alloc(T*Q), alloc(T*D)
	bt.k, bt.v, bt.rl, bt.moe = alloc(T*KV), alloc(T*KV), alloc(T*cfg.NumExperts), alloc(T*D)
	bt.gate, bt.up, bt.act, bt.outs = alloc(T*A*F), alloc(T*A*F), alloc(T*A*F), alloc(T*A*D)
	if cfg.HasSharedExpert() {
		S := cfg.SharedFFN
		bt.sg, bt.su, bt.sa, bt.sd, bt.mix = alloc(T*S), alloc(T*S), alloc(T*S), alloc(T*D), alloc(T)
	}
	if e.attnInFused(0) && e.w.Layers[0].QNorm != nil {
		bt.qn = alloc(T * Q)
	}
	if err != nil {
		e.bt = bt
		return nil, fmt.Errorf("batched prefill scratch for %d positions: %w", T, err)
	}
	e.bt = bt
	return bt, nil
}

// freeBatch frees the batch scratch.
func (e *Engine) freeBatch() error {
	bt := e.bt
	e.bt = nil
	if bt == nil {
		return nil
	}
	var errs []error
	for _, t := range []backend.Tensor{bt.x, bt.xn, bt.q, bt.qn, bt.att, bt.ao, bt.k, bt.v, bt.rl, bt.moe,
		bt.gate, bt.up, bt.act, bt.outs, bt.sg, bt.su, bt.sa, bt.sd, bt.mix} {
		if t != nil {
			if err := e.be.Free(t); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("free batched prefill scratch: %w", errs[0])
	}
	return nil
}

// prefillBatched runs the prompt in batches of at most PrefillChunk
// positions and returns the greedy next token (the last position's head
// and select, masked excluded).
func (e *Engine) prefillBatched(prompt []int, masked []int) (next int, err error) {
	if ps, ok := e.be.(backend.PrefillScope); ok {
		if err := ps.BeginPrefill(); err != nil {
			return -1, fmt.Errorf("batched prefill: %w", err)
		}
		defer func() {
			if eerr := ps.EndPrefill(); eerr != nil && err == nil {
				next, err = -1, fmt.Errorf("batched prefill: %w", eerr)
			}
		}()
	}
	n, chunk := len(prompt), PrefillChunk
	if e.chunk > 0 {
		chunk = e.chunk
	}
	next = -1
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		p, err := plan.Build(e.cfg, plan.Options{T: hi - lo, MaxSeq: e.maxSeq, Head: hi == n})
		if err != nil {
			return -1, err
		}
		if next, err = e.runBatch(p, prompt[lo:hi], lo, masked); err != nil {
			return -1, fmt.Errorf("prefill positions %d..%d: %w", lo, hi-1, err)
		}
	}
	return next, nil
}

// runBatch executes plan p (T = len(toks) positions from pos0) on the
// batch scratch; a plan with a head runs it on the last position, leaving
// its logits in e.logits, and returns the selected token.
func (e *Engine) runBatch(p *plan.Plan, toks []int, pos0 int, masked []int) (int, error) {
	T := len(toks)
	if p.T != T {
		return -1, fmt.Errorf("engine: a plan of T = %d for %d positions", p.T, T)
	}
	if pos0+T > e.maxSeq {
		return -1, fmt.Errorf("positions %d..%d beyond the KV cache of %d positions", pos0, pos0+T-1, e.maxSeq)
	}
	bt, err := e.batchFor(T)
	if err != nil {
		return -1, err
	}
	// A failed batch releases the device routings it holds (their leases
	// are not counted: the request fails).
	defer func() {
		if bt.routing != nil {
			bt.routing.Release()
			bt.routing = nil
		}
		for _, p := range bt.pending {
			p.r.Release()
		}
		bt.pending = nil
	}()
	cfg, be, bb := e.cfg, e.be, e.batched
	D := cfg.HiddenSize
	row := func(t backend.Tensor, width, i int) (backend.Tensor, error) { return bb.Rows(t, width, i, 1) }
	// part is rows [0, T) of a scratch tensor of width per row.
	part := func(t backend.Tensor, width int) (backend.Tensor, error) { return bb.Rows(t, width, 0, T) }
	next := -1
	for i := range p.Instrs {
		in := &p.Instrs[i]
		if e.prof != nil {
			if err := e.prof.begin(be); err != nil {
				return -1, err
			}
		}
		var err error
		switch in.Op {
		case plan.OpEmbed:
			if ro, ok := be.(backend.RowOps); ok {
				var xt backend.Tensor
				if xt, err = part(bt.x, D); err == nil {
					err = ro.EmbedRows(xt, e.w.Embed, toks)
				}
				break
			}
			err = forTokens(T, func(t int) error {
				xt, err := row(bt.x, D, t)
				if err != nil {
					return err
				}
				return be.Embed(xt, e.w.Embed, toks[t])
			})
		case plan.OpAttnIn:
			err = e.attnInBatch(bt, in.Layer, T, pos0)
		case plan.OpAttention:
			Q := cfg.NumHeads * cfg.HeadDim()
			if ro, ok := be.(backend.RowOps); ok {
				err = withParts(part, []backend.Tensor{bt.att, bt.q}, []int{Q, Q}, func(v []backend.Tensor) error {
					return ro.AttentionRows(v[0], v[1], e.kCache[in.Layer], e.vCache[in.Layer], T, pos0, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim())
				})
				break
			}
			err = forTokens(T, func(t int) error {
				at, err := row(bt.att, Q, t)
				if err != nil {
					return err
				}
				qt, err := row(bt.q, Q, t)
				if err != nil {
					return err
				}
				return be.Attention(at, qt, e.kCache[in.Layer], e.vCache[in.Layer], pos0+t+1, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim())
			})
		case plan.OpAttnOut:
			err = e.attnOutBatch(bt, in.Layer, T, part)
		case plan.OpRoute:
			err = e.routeBatch(bt, in.Layer, T, part, row)
		case plan.OpRoutedExperts:
			err = e.routedExpertsBatch(bt, in.Layer, T, row)
		case plan.OpSharedExpert:
			err = e.sharedExpertBatch(bt, in.Layer, T, part, row)
		case plan.OpMoEResidual:
			err = withParts(part, []backend.Tensor{bt.x, bt.moe}, []int{D, D}, func(v []backend.Tensor) error { return be.Add(v[0], v[0], v[1]) })
		case plan.OpHead:
			var last backend.Tensor
			if last, err = row(bt.x, D, T-1); err != nil {
				return -1, err
			}
			if err = be.RMSNorm(e.xn, last, e.w.Norm, e.eps); err != nil {
				return -1, fmt.Errorf("final norm: %w", err)
			}
			if err = be.MatVec(e.logits, e.w.LMHead, e.xn, nil); err != nil {
				return -1, fmt.Errorf("lm_head: %w", err)
			}
			if e.headDone != nil {
				e.headDone()
			}
		case plan.OpSelect:
			// The device-routed layers' leases are counted while the
			// head runs, before the selection waits for it.
			if err = e.countDeviceLeases(bt, -1); err != nil {
				return -1, err
			}
			if next, err = be.Argmax(e.logits, masked); err != nil {
				return -1, fmt.Errorf("select: %w", err)
			}
		default:
			return -1, fmt.Errorf("engine: plan instruction %d: %s is not an instruction the batched interpreter executes", i, in.Op)
		}
		if err != nil {
			if in.Layer >= 0 {
				return -1, fmt.Errorf("layer %d %s: %w", in.Layer, in.Op, err)
			}
			return -1, fmt.Errorf("%s: %w", in.Op, err)
		}
		if e.prof != nil {
			if err := e.prof.end(be, in.Op.String()); err != nil {
				return -1, err
			}
		}
	}
	if err := e.countDeviceLeases(bt, -1); err != nil {
		return -1, err
	}
	return next, nil
}

// forTokens runs f for t = 0..T-1 in order.
func forTokens(T int, f func(t int) error) error {
	for t := range T {
		if err := f(t); err != nil {
			return fmt.Errorf("token %d: %w", t, err)
		}
	}
	return nil
}

// withParts calls f with the first T rows of each tensor (widths per
// tensor), through part.
func withParts(part func(backend.Tensor, int) (backend.Tensor, error), ts []backend.Tensor, widths []int, f func([]backend.Tensor) error) error {
	vs := make([]backend.Tensor, len(ts))
	for i, t := range ts {
		v, err := part(t, widths[i])
		if err != nil {
			return err
		}
		vs[i] = v
	}
	return f(vs)
}

// attnInBatch is attn-in over T positions from pos0: the input norm, the
// q/k/v projections as MatMuls, OLMoE's q/k norms, and per token RoPE and
// the KV append.
func (e *Engine) attnInBatch(bt *batch, l, T, pos0 int) error {
	cfg, be, bb, lw := e.cfg, e.be, e.batched, &e.w.Layers[l]
	D, Q, KV, hd := cfg.HiddenSize, cfg.NumHeads*cfg.HeadDim(), cfg.KVDim(), cfg.HeadDim()
	x, xn, q, k, v := bt.x, bt.xn, bt.q, bt.k, bt.v
	var err error
	for _, pv := range []struct {
		t     *backend.Tensor
		width int
	}{{&x, D}, {&xn, D}, {&q, Q}, {&k, KV}, {&v, KV}} {
		if *pv.t, err = bb.Rows(*pv.t, pv.width, 0, T); err != nil {
			return err
		}
	}
	steps := []opStep{{"input norm", func() error { return be.RMSNorm(xn, x, lw.InputNorm, e.eps) }}}
	if parts := e.denseParts(lw.QKV); parts != nil {
		// The fused q|k|v weight (and bias) in one op, each projection's bits.
		steps = append(steps, opStep{"q|k|v_proj", func() error {
			return parts([]backend.Tensor{q, k, v}, []int{Q, KV, KV}, xn, lw.QKVBias, T)
		}})
	} else {
		steps = append(steps,
			opStep{"q_proj", func() error { return e.denseMatMul(q, lw.Q, xn, lw.QBias, T) }},
			opStep{"k_proj", func() error { return e.denseMatMul(k, lw.K, xn, lw.KBias, T) }},
			opStep{"v_proj", func() error { return e.denseMatMul(v, lw.V, xn, lw.VBias, T) }})
	}
	if e.attnInFused(l) && (lw.QNorm == nil || bt.qn != nil) {
		// The norms, RoPE and the KV append in one op; with norms the
		// normalised q lands in qn, which then becomes the batch's q.
		ar := be.(backend.AttnInRows)
		qo := q
		if lw.QNorm != nil {
			if qo, err = bb.Rows(bt.qn, Q, 0, T); err != nil {
				return err
			}
		}
		steps = append(steps, opStep{"q/k norm, rope and kv append", func() error {
			return ar.QKRoPEKVRows(qo, q, k, v, e.kCache[l], e.vCache[l], lw.QNorm, lw.KNorm, T, pos0, cfg.NumHeads, cfg.NumKVHeads, hd,
				cfg.RopeTheta, e.eps)
		}})
		if err := runSteps(steps); err != nil {
			return err
		}
		if lw.QNorm != nil {
			bt.q, bt.qn = bt.qn, bt.q
		}
		return nil
	}
	if lw.QNorm != nil {
		steps = append(steps,
			opStep{"q_norm", func() error { return be.RMSNorm(q, q, lw.QNorm, e.eps) }},
			opStep{"k_norm", func() error { return be.RMSNorm(k, k, lw.KNorm, e.eps) }})
	}
	steps = append(steps, opStep{"rope and kv append", func() error {
		if ro, ok := be.(backend.RowOps); ok {
			if err := ro.RoPERows(q, T, cfg.NumHeads, hd, pos0, cfg.RopeTheta); err != nil {
				return fmt.Errorf("rope q: %w", err)
			}
			if err := ro.RoPERows(k, T, cfg.NumKVHeads, hd, pos0, cfg.RopeTheta); err != nil {
				return fmt.Errorf("rope k: %w", err)
			}
			return ro.KVAppendRows(e.kCache[l], e.vCache[l], k, v, T, pos0)
		}
		return forTokens(T, func(t int) error {
			qt, err := bb.Rows(q, Q, t, 1)
			if err != nil {
				return err
			}
			kt, err := bb.Rows(k, KV, t, 1)
			if err != nil {
				return err
			}
			vt, err := bb.Rows(v, KV, t, 1)
			if err != nil {
				return err
			}
			if err := be.RoPE(qt, cfg.NumHeads, hd, pos0+t, cfg.RopeTheta); err != nil {
				return fmt.Errorf("rope q: %w", err)
			}
			if err := be.RoPE(kt, cfg.NumKVHeads, hd, pos0+t, cfg.RopeTheta); err != nil {
				return fmt.Errorf("rope k: %w", err)
			}
			return be.KVAppend(e.kCache[l], e.vCache[l], kt, vt, pos0+t)
		})
	}})
	return runSteps(steps)
}

// attnInFused says whether layer l's batched attn-in runs its q/k norms,
// RoPE and KV append as one backend.AttnInRows op: the backend asks for it,
// and the layer's norms (if any) each hold whole heads.
func (e *Engine) attnInFused(l int) bool {
	ar, ok := e.be.(backend.AttnInRows)
	if !ok || !ar.FusesAttnIn() {
		return false
	}
	lw, hd := &e.w.Layers[l], e.cfg.HeadDim()
	if (lw.QNorm == nil) != (lw.KNorm == nil) {
		return false
	}
	return lw.QNorm == nil || lw.QNorm.Len()%hd == 0 && lw.KNorm.Len()%hd == 0
}

// attnOutBatch is attn-out over T positions: x = x + Wo·att.
func (e *Engine) attnOutBatch(bt *batch, l, T int, part func(backend.Tensor, int) (backend.Tensor, error)) error {
	cfg := e.cfg
	D, Q := cfg.HiddenSize, cfg.NumHeads*cfg.HeadDim()
	return withParts(part, []backend.Tensor{bt.x, bt.att, bt.ao}, []int{D, Q, D}, func(v []backend.Tensor) error {
		if err := e.denseMatMul(v[2], e.w.Layers[l].O, v[1], nil, T); err != nil {
			return fmt.Errorf("o_proj: %w", err)
		}
		if err := e.be.Add(v[0], v[0], v[2]); err != nil {
			return fmt.Errorf("attention residual: %w", err)
		}
		return nil
	})
}

// routeBatch is route over T positions: the post-attention norm, the
// router as one MatMul, and each token's top-k into bt.ids and bt.weights.
func (e *Engine) routeBatch(bt *batch, l, T int, part func(backend.Tensor, int) (backend.Tensor, error),
	row func(backend.Tensor, int, int) (backend.Tensor, error)) error {
	cfg, lw := e.cfg, &e.w.Layers[l]
	D, E, A := cfg.HiddenSize, cfg.NumExperts, cfg.TopK
	err := withParts(part, []backend.Tensor{bt.x, bt.xn, bt.rl}, []int{D, D, E}, func(v []backend.Tensor) error {
		if err := e.be.RMSNorm(v[1], v[0], lw.PostNorm, e.eps); err != nil {
			return fmt.Errorf("post-attention norm: %w", err)
		}
		if err := e.batched.MatMul(v[2], lw.Router, v[1], nil, T); err != nil {
			return fmt.Errorf("router: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if dr, rows := e.deviceRouting(l); dr != nil {
		rl, err := part(bt.rl, E)
		if err != nil {
			return err
		}
		if bt.routing, err = dr.RouteRows(rl, T, A, rows, e.layout); err != nil {
			return fmt.Errorf("router top-%d on the device: %w", A, err)
		}
		return nil
	}
	if ro, ok := e.be.(backend.RowOps); ok {
		rl, err := part(bt.rl, E)
		if err != nil {
			return err
		}
		ids, weights, err := ro.TopKRows(rl, T, A, cfg.NormTopKProb)
		if err != nil {
			return fmt.Errorf("router top-%d: %w", A, err)
		}
		if len(ids) != T*A || len(weights) != T*A {
			return fmt.Errorf("router top-%d of %d rows returned %d ids and %d weights", A, T, len(ids), len(weights))
		}
		copy(bt.ids, ids)
		copy(bt.weights, weights)
		return nil
	}
	return forTokens(T, func(t int) error {
		lt, err := row(bt.rl, E, t)
		if err != nil {
			return err
		}
		ids, weights, err := e.be.TopK(lt, A, cfg.NormTopKProb)
		if err != nil {
			return fmt.Errorf("router top-%d: %w", A, err)
		}
		if len(ids) != A || len(weights) != A {
			return fmt.Errorf("router top-%d returned %d ids and %d weights", A, len(ids), len(weights))
		}
		copy(bt.ids[t*A:], ids)
		copy(bt.weights[t*A:], weights)
		return nil
	})
}

// routedExperts over T positions, by expert in waves (see the file's
// comment): bt.moe[t] = Σ_k weights[t,k] · expert(ids[t,k])(xn[t]).
func (e *Engine) routedExpertsBatch(bt *batch, l, T int, row func(backend.Tensor, int, int) (backend.Tensor, error)) error {
	cfg, be, lay := e.cfg, e.be, e.layout
	D, A := cfg.HiddenSize, cfg.TopK
	if r := bt.routing; r != nil {
		bt.routing = nil
		bt.pending = append(bt.pending, pendingRouting{l, r})
		if err := e.routedExpertsDevice(bt, T, r); err != nil {
			return err
		}
		// The layers before this one are counted now, while the GPU
		// still has this layer's experts to run: the host's lease work
		// then stays off the batch's tail.
		return e.countDeviceLeases(bt, len(bt.pending)-1)
	}
	// The layer's distinct experts in first-use order, and the (token,
	// slot) pairs of each: slot s = t*A + k.
	order, slots, err := groupSlots(bt.ids[:T*A], cfg.NumExperts)
	if err != nil {
		return fmt.Errorf("layer %d: %w", l, err)
	}
	// At full residency (a pinned snapshot: no miss and no eviction can
	// happen) every wave is leased and served first and the layer's experts
	// then run together, one op per matrix for all of them, and the leases
	// are released after. The leases, and so the counters and the trace,
	// are the waves' either way; a pair's results do not depend on which
	// experts share its op (backend.ExpertGroups).
	snap, err := e.experts.Snapshot(l)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if !snap.Pinned {
		order = publishedFirst(order, snap.Rows)
	}
	var held []device.Lease
	releaseHeld := func() {
		for _, ls := range held {
			ls.Release()
		}
		held = nil
	}
	var allIDs []int
	var allRows []backend.Tensor
	err = e.leaseWaves(l, order, slots, snap.Pinned, func(ls device.Lease, wave []int, rows []backend.Tensor) error {
		if snap.Pinned {
			held = append(held, ls)
			allIDs, allRows = append(allIDs, wave...), append(allRows, rows...)
			return nil
		}
		defer ls.Release()
		if err := e.waveExperts(bt, wave, rows, slots, lay); err != nil {
			return fmt.Errorf("experts %v: %w", wave, err)
		}
		return nil
	})
	if err != nil {
		releaseHeld()
		return err
	}
	if len(allIDs) > 0 {
		if err := e.prof.lapOf(be, "routed-experts:leases"); err != nil {
			return err
		}
		err := e.waveExperts(bt, allIDs, allRows, slots, lay)
		releaseHeld()
		if err != nil {
			return fmt.Errorf("experts %v: %w", allIDs, err)
		}
	}
	if err := e.prof.lapOf(be, "routed-experts:waves"); err != nil {
		return err
	}
	if ro, ok := be.(backend.RowOps); ok {
		// One op for the T tokens' weighted sums, the per-token bits.
		mt, err := e.batched.Rows(bt.moe, D, 0, T)
		if err != nil {
			return err
		}
		ot, err := e.batched.Rows(bt.outs, D, 0, T*A)
		if err != nil {
			return err
		}
		if err := ro.CombineRows(mt, ot, bt.weights[:T*A], T, A); err != nil {
			return fmt.Errorf("combine: %w", err)
		}
		return nil
	}
	return forTokens(T, func(t int) error {
		mt, err := row(bt.moe, D, t)
		if err != nil {
			return err
		}
		if err := be.WriteF32(mt, bt.zeros); err != nil {
			return fmt.Errorf("clear output: %w", err)
		}
		for k := range A {
			ot, err := row(bt.outs, D, t*A+k)
			if err != nil {
				return err
			}
			if err := be.AddScaled(mt, ot, bt.weights[t*A+k]); err != nil {
				return fmt.Errorf("combine slot %d: %w", k, err)
			}
		}
		return nil
	})
}

// leaseWaves takes layer l's leases as a batched prefill does: the
// distinct experts of order in waves of top-k, each wave's (token, slot)
// pairs counted as lookups (LeaseBatch with every expert's pair count, the
// first a hit or a miss as Serve finds it, the others hits), then served.
// Each served wave goes to use, which owns the lease: it releases it, or
// holds it (keep true: at full residency every wave is leased and served
// before the layer's experts run together). A lease use does not take is
// released here.
func (e *Engine) leaseWaves(l int, order []int, slots [][]int, keep bool, use func(ls device.Lease, wave []int, rows []backend.Tensor) error) error {
	A := e.cfg.TopK
	for w0 := 0; w0 < len(order); w0 += A {
		wave := order[w0:min(w0+A, len(order))]
		uses := make([]int, len(wave))
		for i, id := range wave {
			uses[i] = len(slots[id])
		}
		ls, err := e.experts.LeaseBatch(l, wave, uses)
		if err != nil {
			return fmt.Errorf("lease experts %v: %w", wave, err)
		}
		rows, err := ls.Serve()
		if err != nil {
			ls.Release()
			return fmt.Errorf("experts %v: %w", wave, err)
		}
		if err := use(ls, wave, rows); err != nil {
			if !keep {
				ls.Release()
			}
			return err
		}
	}
	return nil
}

// deviceRouting returns the backend's device routing and layer l's rows
// (every expert's, from the pinned snapshot) where the batched prefill
// routes layer l on the device: a backend.DeviceRouting that asks for it
// for the experts' scheme, a pinned snapshot (full residency) with every
// row published, no renormalised top-k (RouteRows has none) and no
// prefill profile (it times the host's leases between the ops). Else nil:
// TopKRows reads the routing back.
func (e *Engine) deviceRouting(l int) (backend.DeviceRouting, []backend.Tensor) {
	dr, ok := e.be.(backend.DeviceRouting)
	if !ok || !dr.RoutesOnDevice(e.layout.Scheme) || e.cfg.NormTopKProb || e.prof != nil {
		return nil, nil
	}
	snap, err := e.experts.Snapshot(l)
	if err != nil || !snap.Pinned || len(snap.Rows) != e.cfg.NumExperts {
		return nil, nil
	}
	for _, r := range snap.Rows {
		if r == nil {
			return nil, nil
		}
	}
	return dr, snap.Rows
}

// routedExpertsDevice is routed-experts over a device routing r: gate and
// up of every pair (packed in expert order) and SiLU·up (one
// RoutedGateUp, which the backend may run as one pass), down into the
// pairs' slots and the combine, with no read back. The layer's leases are
// counted after the batch (countDeviceLeases).
func (e *Engine) routedExpertsDevice(bt *batch, T int, r backend.Routing) error {
	dr := e.be.(backend.DeviceRouting)
	bb, lay := e.batched, e.layout
	D, A, F := e.cfg.HiddenSize, e.cfg.TopK, lay.Gate.Rows
	P := T * A
	xn, err := bb.Rows(bt.xn, D, 0, T)
	if err != nil {
		return err
	}
	v := make([]backend.Tensor, 3)
	for i, t := range []backend.Tensor{bt.act, bt.gate, bt.up} {
		if v[i], err = bb.Rows(t, F, 0, P); err != nil {
			return err
		}
	}
	outs, err := bb.Rows(bt.outs, D, 0, P)
	if err != nil {
		return err
	}
	moe, err := bb.Rows(bt.moe, D, 0, T)
	if err != nil {
		return err
	}
	return runSteps([]opStep{
		{"gate|up", func() error { return dr.RoutedGateUp(v[0], v[1], v[2], r, lay.Gate, lay.Up, xn) }},
		{"down", func() error { return dr.RoutedMatMul(outs, r, lay.Down, v[0], true) }},
		{"combine", func() error { return dr.CombineRouted(moe, outs, r) }},
	})
}

// countDeviceLeases serves the leases of the first n of the batch's
// pending device-routed layers (n < 0: all of them), in layer order, as the
// read-back path takes them (leaseWaves over the layer's ids, every wave
// held until the layer's are served, then released): the snapshot was
// pinned, so the rows the ops read were those the leases find, and the
// counters and the routing trace are the same. Each routing counted is
// released, also on an error.
func (e *Engine) countDeviceLeases(bt *batch, n int) error {
	if n < 0 || n > len(bt.pending) {
		n = len(bt.pending)
	}
	pend := bt.pending[:n:n]
	bt.pending = bt.pending[n:]
	defer func() {
		for _, p := range pend {
			p.r.Release()
		}
	}()
	for _, p := range pend {
		ids, err := p.r.IDs()
		if err != nil {
			return fmt.Errorf("layer %d: read the device routing: %w", p.layer, err)
		}
		order, slots, err := groupSlots(ids, e.cfg.NumExperts)
		if err != nil {
			return fmt.Errorf("layer %d: %w", p.layer, err)
		}
		var held []device.Lease
		err = e.leaseWaves(p.layer, order, slots, true, func(ls device.Lease, _ []int, _ []backend.Tensor) error {
			held = append(held, ls)
			return nil
		})
		for _, ls := range held {
			ls.Release()
		}
		if err != nil {
			return fmt.Errorf("layer %d: %w", p.layer, err)
		}
	}
	return nil
}

// groupSlots groups a layer's routing by expert: order holds the distinct
// experts of ids (expert ids below E) in first-use order, and slots[e] the
// indexes s of ids routed to e, increasing (nil for an expert not routed).
// A counting sort over one flat array: at 512 tokens x top-8 of 64 experts
// it takes ~21 µs a layer where the map of appends it replaced took ~115
// (BenchmarkGroupSlots, the build machine). An id outside 0..E-1 is an
// error.
func groupSlots(ids []int, E int) (order []int, slots [][]int, err error) {
	counts := make([]int, E)
	for s, id := range ids {
		if id < 0 || id >= E {
			return nil, nil, fmt.Errorf("routing slot %d names expert %d, outside 0..%d", s, id, E-1)
		}
		if counts[id] == 0 {
			order = append(order, id)
		}
		counts[id]++
	}
	flat := make([]int, len(ids))
	slots = make([][]int, E)
	next := make([]int, E) // where expert id's next slot goes in flat
	off := 0
	for _, id := range order {
		slots[id] = flat[off : off+counts[id] : off+counts[id]]
		next[id] = off
		off += counts[id]
	}
	for s, id := range ids {
		flat[next[id]] = s
		next[id]++
	}
	return order, slots, nil
}

// publishedFirst returns order with the experts published in rows (a
// snapshot's: non-nil) first and the others after them, each kind in the
// order it had in order. At partial residency the waves then serve every expert
// of the layer that is resident before any miss can evict it: a miss's
// victims are never experts the batch still needs, so the batch misses
// exactly its distinct experts that were not resident. In first-use order
// a miss could evict a resident expert a later wave needed, which then
// missed too, as a scan longer than the cache thrashes LRU: session 40's
// prefill-v1 c30 traces replayed this way miss 44-56% less (results/s42).
// A pair's results do not depend on its wave, so tokens cannot change.
func publishedFirst(order []int, rows []backend.Tensor) []int {
	out := make([]int, 0, len(order))
	for _, pub := range []bool{true, false} {
		for _, e := range order {
			if (e < len(rows) && rows[e] != nil) == pub {
				out = append(out, e)
			}
		}
	}
	return out
}

// waveExperts computes one wave's experts for their (token, slot) pairs.
// The wave's P pairs get consecutive rows of the gate, up and act scratch
// (expert j's pairs after those of experts 0..j-1): gate and up of
// xn[token] into them, one SiLU·up over the P rows (elementwise: each row
// the per-pair op's bits), and down of each pair's act row into
// bt.outs[slot]. Each matrix is one op for the wave's experts where the
// backend groups them (backend.ExpertGroups), with the per-expert ops' bits.
func (e *Engine) waveExperts(bt *batch, wave []int, rows []backend.Tensor, slots [][]int, lay qpack.RecordLayout) error {
	be, bb, A, F := e.be, e.batched, e.cfg.TopK, lay.Gate.Rows
	at := make([][]int, len(wave))   // expert j's pairs' rows in the wave's scratch
	toks := make([][]int, len(wave)) // expert j's pairs' tokens
	outs := make([][]int, len(wave)) // expert j's pairs' slots
	P := 0
	for j, id := range wave {
		ss := slots[id]
		toks[j], at[j], outs[j] = make([]int, len(ss)), make([]int, len(ss)), ss
		for i, s := range ss {
			toks[j][i], at[j][i] = s/A, P+i
		}
		P += len(ss)
	}
	// matmuls runs one matrix of every expert of the wave: one op where
	// the backend groups experts, else one per expert.
	matmuls := func(what string, dst backend.Tensor, dstRows [][]int, m qpack.MatrixLayout, x backend.Tensor, xRows [][]int) error {
		if g, ok := be.(backend.ExpertGroups); ok {
			if err := g.ExpertMatMulGroup(dst, dstRows, rows, m, lay.Scheme, x, xRows); err != nil {
				return fmt.Errorf("experts %v %s: %w", wave, what, err)
			}
			return nil
		}
		for j, id := range wave {
			if err := bb.ExpertMatMul(dst, dstRows[j], rows[j], m, lay.Scheme, x, xRows[j]); err != nil {
				return fmt.Errorf("expert %d %s: %w", id, what, err)
			}
		}
		return nil
	}
	if err := matmuls("gate", bt.gate, at, lay.Gate, bt.xn, toks); err != nil {
		return err
	}
	if err := matmuls("up", bt.up, at, lay.Up, bt.xn, toks); err != nil {
		return err
	}
	if err := e.prof.lapOf(be, "routed-experts:gate+up"); err != nil {
		return err
	}
	v := make([]backend.Tensor, 3)
	for i, t := range []backend.Tensor{bt.act, bt.gate, bt.up} {
		var err error
		if v[i], err = bb.Rows(t, F, 0, P); err != nil {
			return err
		}
	}
	if err := be.SiLUMul(v[0], v[1], v[2]); err != nil {
		return fmt.Errorf("experts %v act: %w", wave, err)
	}
	if err := e.prof.lapOf(be, "routed-experts:act"); err != nil {
		return err
	}
	if err := matmuls("down", bt.outs, outs, lay.Down, bt.act, at); err != nil {
		return err
	}
	return e.prof.lapOf(be, "routed-experts:down")
}

// sharedExpertBatch is shared-expert (Qwen) over T positions: moe[t] +=
// sigmoid(w_mix·xn[t]) · shared(xn[t]).
func (e *Engine) sharedExpertBatch(bt *batch, l, T int, part func(backend.Tensor, int) (backend.Tensor, error),
	row func(backend.Tensor, int, int) (backend.Tensor, error)) error {
	cfg, be, bb, lw := e.cfg, e.be, e.batched, &e.w.Layers[l]
	D, S := cfg.HiddenSize, cfg.SharedFFN
	err := withParts(part, []backend.Tensor{bt.xn, bt.sg, bt.su, bt.sa, bt.sd, bt.mix}, []int{D, S, S, S, D, 1}, func(v []backend.Tensor) error {
		xn, sg, su, sa, sd, mix := v[0], v[1], v[2], v[3], v[4], v[5]
		return runSteps([]opStep{
			{"shared gate_proj", func() error { return e.denseMatMul(sg, lw.SharedGate, xn, nil, T) }},
			{"shared up_proj", func() error { return e.denseMatMul(su, lw.SharedUp, xn, nil, T) }},
			{"shared act", func() error { return be.SiLUMul(sa, sg, su) }},
			{"shared down_proj", func() error { return e.denseMatMul(sd, lw.SharedDown, sa, nil, T) }},
			{"shared_expert_gate", func() error { return bb.MatMul(mix, lw.SharedMix, xn, nil, T) }},
		})
	})
	if err != nil {
		return err
	}
	if ro, ok := be.(backend.RowOps); ok {
		return withParts(part, []backend.Tensor{bt.moe, bt.sd, bt.mix}, []int{D, D, 1}, func(v []backend.Tensor) error {
			if err := ro.AddGatedRows(v[0], v[1], v[2], T); err != nil {
				return fmt.Errorf("shared combine: %w", err)
			}
			return nil
		})
	}
	return forTokens(T, func(t int) error {
		mt, err := row(bt.moe, D, t)
		if err != nil {
			return err
		}
		sdt, err := row(bt.sd, D, t)
		if err != nil {
			return err
		}
		gt, err := row(bt.mix, 1, t)
		if err != nil {
			return err
		}
		if err := be.AddGated(mt, sdt, gt); err != nil {
			return fmt.Errorf("shared combine: %w", err)
		}
		return nil
	})
}
