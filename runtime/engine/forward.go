package engine

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/plan"
)

// The forward pass is the step plan (runtime/plan): the engine builds it
// once per model, and run interprets it op by op on the engine's backend,
// in plan order. That interpretation is the oracle every other execution of
// the plan is compared with. Op for op it follows transformers:
//
//	x = embed[tok]
//	per layer:
//	  attn-in:        h = rmsnorm(x)·input_layernorm
//	                  q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv)      Qwen: biases
//	                  q,k = rmsnorm(q)·q_norm, rmsnorm(k)·k_norm      OLMoE: over the full projection
//	                  q,k = rope(q,k,pos); cache k,v
//	  attention:      a = attention(q, K[0..pos], V[0..pos])
//	  attn-out:       x = x + Wo a
//	  route:          h = rmsnorm(x)·post_attention_layernorm
//	                  p = softmax(Wrouter h); top-A (renormalised if norm_topk_prob)
//	  routed-experts: m = Σ_k p_k expert_k(h)
//	  shared-expert:  m = m + sigmoid(w_mix·h) · shared(h)            Qwen
//	  moe-residual:   x = x + m
//	head:   logits = W_lm rmsnorm(x)·norm
//	select: next = argmax(logits), EOS masked on request

// buildPlans builds the engine's two step plans: body (a prompt position
// before the last: no head) and full (the last prompt position and every
// decode step: head and select).
func (e *Engine) buildPlans() error {
	var err error
	if e.body, err = plan.Build(e.cfg, plan.Options{T: 1, MaxSeq: e.maxSeq}); err != nil {
		return err
	}
	e.full, err = plan.Build(e.cfg, plan.Options{T: 1, MaxSeq: e.maxSeq, Head: true})
	return err
}

// Plan is the decode step's plan (T = 1, head and select): the single
// description of the forward pass that this engine executes.
func (e *Engine) Plan() *plan.Plan { return e.full }

// run executes plan p for token tok at position pos. A plan with a head
// leaves the next-token logits [V] in e.logits and returns the greedy next
// token with the masked ids excluded; a plan without one returns -1.
func (e *Engine) run(p *plan.Plan, tok, pos int, masked []int) (int, error) {
	if p.T != 1 {
		return -1, fmt.Errorf("engine: a plan of T = %d tokens: the op-by-op interpreter runs one token per step", p.T)
	}
	if pos >= e.maxSeq {
		return -1, fmt.Errorf("position %d beyond the KV cache of %d positions", pos, e.maxSeq)
	}
	next := -1
	for i := range p.Instrs {
		in := &p.Instrs[i]
		var err error
		switch in.Op {
		case plan.OpEmbed:
			if err = e.be.Embed(e.x, e.w.Embed, tok); err != nil {
				return -1, fmt.Errorf("embed token %d: %w", tok, err)
			}
			continue
		case plan.OpAttnIn:
			err = e.attnIn(in.Layer, pos)
		case plan.OpAttention:
			cfg := e.cfg
			err = e.be.Attention(e.att, e.q, e.kCache[in.Layer], e.vCache[in.Layer], pos+1, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim())
		case plan.OpAttnOut:
			err = e.attnOut(in.Layer)
		case plan.OpRoute:
			err = e.route(in.Layer)
		case plan.OpRoutedExperts:
			err = e.routedExperts(in.Layer)
		case plan.OpSharedExpert:
			err = e.sharedExpert(in.Layer)
		case plan.OpMoEResidual:
			err = e.be.Add(e.x, e.x, e.moe)
		case plan.OpHead:
			if err = e.be.RMSNorm(e.xn, e.x, e.w.Norm, e.eps); err != nil {
				return -1, fmt.Errorf("final norm: %w", err)
			}
			if err = e.be.MatVec(e.logits, e.w.LMHead, e.xn, nil); err != nil {
				return -1, fmt.Errorf("lm_head: %w", err)
			}
			if e.headDone != nil {
				e.headDone()
			}
			continue
		case plan.OpSelect:
			if next, err = e.be.Argmax(e.logits, masked); err != nil {
				return -1, fmt.Errorf("select: %w", err)
			}
			continue
		default:
			return -1, fmt.Errorf("engine: plan instruction %d: %s is not an instruction this engine executes", i, in.Op)
		}
		if err != nil {
			return -1, fmt.Errorf("layer %d %s: %w", in.Layer, in.Op, err)
		}
	}
	return next, nil
}

// opStep is one backend op of an instruction, named for its error.
type opStep struct {
	what string
	run  func() error
}

// runSteps runs an instruction's ops in order.
func runSteps(steps []opStep) error {
	for _, s := range steps {
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// attnIn is attn-in: xn = rmsnorm(x), the q/k/v projections (+ biases),
// OLMoE's q/k norms, RoPE at pos and the KV append.
func (e *Engine) attnIn(l, pos int) error {
	cfg, be, lw := e.cfg, e.be, &e.w.Layers[l]
	hd := cfg.HeadDim()
	steps := []opStep{
		{"input norm", func() error { return be.RMSNorm(e.xn, e.x, lw.InputNorm, e.eps) }},
		{"q_proj", func() error { return be.MatVec(e.q, lw.Q, e.xn, lw.QBias) }},
		{"k_proj", func() error { return be.MatVec(e.k, lw.K, e.xn, lw.KBias) }},
		{"v_proj", func() error { return be.MatVec(e.v, lw.V, e.xn, lw.VBias) }},
	}
	if lw.QNorm != nil {
		steps = append(steps,
			opStep{"q_norm", func() error { return be.RMSNorm(e.q, e.q, lw.QNorm, e.eps) }},
			opStep{"k_norm", func() error { return be.RMSNorm(e.k, e.k, lw.KNorm, e.eps) }})
	}
	steps = append(steps,
		opStep{"rope q", func() error { return be.RoPE(e.q, cfg.NumHeads, hd, pos, cfg.RopeTheta) }},
		opStep{"rope k", func() error { return be.RoPE(e.k, cfg.NumKVHeads, hd, pos, cfg.RopeTheta) }},
		opStep{"kv append", func() error { return be.KVAppend(e.kCache[l], e.vCache[l], e.k, e.v, pos) }})
	return runSteps(steps)
}

// attnOut is attn-out: x = x + Wo·att.
func (e *Engine) attnOut(l int) error {
	if err := e.be.MatVec(e.ao, e.w.Layers[l].O, e.att, nil); err != nil {
		return fmt.Errorf("o_proj: %w", err)
	}
	if err := e.be.Add(e.x, e.x, e.ao); err != nil {
		return fmt.Errorf("attention residual: %w", err)
	}
	return nil
}

// route is route: xn = rmsnorm(x)·post_norm, the router and its top-k,
// which the op-by-op interpreter holds on the host (e.groupIDs,
// e.groupWeights: the plan's group buffer).
func (e *Engine) route(l int) error {
	lw := &e.w.Layers[l]
	if err := e.be.RMSNorm(e.xn, e.x, lw.PostNorm, e.eps); err != nil {
		return fmt.Errorf("post-attention norm: %w", err)
	}
	if err := e.be.MatVec(e.routerLogits, lw.Router, e.xn, nil); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	ids, weights, err := e.be.TopK(e.routerLogits, e.cfg.TopK, e.cfg.NormTopKProb)
	if err != nil {
		return fmt.Errorf("router top-%d: %w", e.cfg.TopK, err)
	}
	e.groupIDs, e.groupWeights = ids, weights
	return nil
}

// routedExperts is routed-experts: the cache leases and serves the routed
// group's rows (the plan's routed-rows point; the Lease scores a pending
// prediction of the layer and waits for its prefetch) and the executor
// strategy computes e.moe from e.xn.
func (e *Engine) routedExperts(l int) error {
	ids, weights := e.groupIDs, e.groupWeights
	rows, release, err := device.Acquire(e.experts, l, ids)
	if err != nil {
		return fmt.Errorf("acquire experts %v: %w", ids, err)
	}
	// Next-layer prefetch (prefetch.go): predict layer l+1's group from
	// e.xn and start loading its misses, so the copies overlap this
	// layer's experts. Issued after this layer's Serve, which therefore
	// never waits for it; it writes only its own scratch.
	if err := e.prefetchNext(l); err != nil {
		release()
		return err
	}
	err = e.exec.Forward(e.moe, e.xn, rows, weights)
	release()
	if err != nil {
		return fmt.Errorf("routed experts %v: %w", ids, err)
	}
	return nil
}

// sharedExpert is shared-expert (Qwen): e.moe += sigmoid(w_mix·xn) ·
// shared(xn).
func (e *Engine) sharedExpert(l int) error {
	be, lw := e.be, &e.w.Layers[l]
	return runSteps([]opStep{
		{"shared gate_proj", func() error { return be.MatVec(e.sg, lw.SharedGate, e.xn, nil) }},
		{"shared up_proj", func() error { return be.MatVec(e.su, lw.SharedUp, e.xn, nil) }},
		{"shared act", func() error { return be.SiLUMul(e.sa, e.sg, e.su) }},
		{"shared down_proj", func() error { return be.MatVec(e.sd, lw.SharedDown, e.sa, nil) }},
		{"shared_expert_gate", func() error { return be.MatVec(e.mix, lw.SharedMix, e.xn, nil) }},
		{"shared combine", func() error { return be.AddGated(e.moe, e.sd, e.mix) }},
	})
}
