package engine

import (
	"fmt"
)

// step runs one token at position pos through the model and leaves the
// next-token logits [V] in e.logits. Op for op it follows transformers:
//
//	x = embed[tok]
//	per layer:
//	  h = rmsnorm(x)·input_layernorm
//	  q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv)      Qwen: biases
//	  q,k = rmsnorm(q)·q_norm, rmsnorm(k)·k_norm      OLMoE: over the full projection
//	  q,k = rope(q,k,pos); cache k,v
//	  x = x + Wo attention(q, K[0..pos], V[0..pos])
//	  h = rmsnorm(x)·post_attention_layernorm
//	  p = softmax(Wrouter h); top-A (renormalised if norm_topk_prob)
//	  m = Σ_k p_k expert_k(h)
//	  Qwen: m = m + sigmoid(w_mix·h) · shared(h)
//	  x = x + m
//	logits = W_lm rmsnorm(x)·norm
func (e *Engine) step(tok, pos int) error {
	cfg, be, w := e.cfg, e.be, e.w
	if pos >= e.maxSeq {
		return fmt.Errorf("position %d beyond the KV cache of %d positions", pos, e.maxSeq)
	}
	if err := be.Embed(e.x, w.Embed, tok); err != nil {
		return fmt.Errorf("embed token %d: %w", tok, err)
	}
	hd := cfg.HeadDim()
	for l := range w.Layers {
		lw := &w.Layers[l]
		fail := func(what string, err error) error { return fmt.Errorf("layer %d %s: %w", l, what, err) }
		if err := be.RMSNorm(e.xn, e.x, lw.InputNorm, e.eps); err != nil {
			return fail("input norm", err)
		}
		if err := be.MatVec(e.q, lw.Q, e.xn, lw.QBias); err != nil {
			return fail("q_proj", err)
		}
		if err := be.MatVec(e.k, lw.K, e.xn, lw.KBias); err != nil {
			return fail("k_proj", err)
		}
		if err := be.MatVec(e.v, lw.V, e.xn, lw.VBias); err != nil {
			return fail("v_proj", err)
		}
		if lw.QNorm != nil {
			if err := be.RMSNorm(e.q, e.q, lw.QNorm, e.eps); err != nil {
				return fail("q_norm", err)
			}
			if err := be.RMSNorm(e.k, e.k, lw.KNorm, e.eps); err != nil {
				return fail("k_norm", err)
			}
		}
		if err := be.RoPE(e.q, cfg.NumHeads, hd, pos, cfg.RopeTheta); err != nil {
			return fail("rope q", err)
		}
		if err := be.RoPE(e.k, cfg.NumKVHeads, hd, pos, cfg.RopeTheta); err != nil {
			return fail("rope k", err)
		}
		if err := be.KVAppend(e.kCache[l], e.vCache[l], e.k, e.v, pos); err != nil {
			return fail("kv append", err)
		}
		if err := be.Attention(e.att, e.q, e.kCache[l], e.vCache[l], pos+1, cfg.NumHeads, cfg.NumKVHeads, hd); err != nil {
			return fail("attention", err)
		}
		if err := be.MatVec(e.ao, lw.O, e.att, nil); err != nil {
			return fail("o_proj", err)
		}
		if err := be.Add(e.x, e.x, e.ao); err != nil {
			return fail("attention residual", err)
		}
		if err := be.RMSNorm(e.xn, e.x, lw.PostNorm, e.eps); err != nil {
			return fail("post-attention norm", err)
		}
		if err := e.moeBlock(l, lw); err != nil {
			return fail("moe", err)
		}
		if err := be.Add(e.x, e.x, e.moe); err != nil {
			return fail("moe residual", err)
		}
	}
	if err := be.RMSNorm(e.xn, e.x, w.Norm, e.eps); err != nil {
		return fmt.Errorf("final norm: %w", err)
	}
	if err := be.MatVec(e.logits, w.LMHead, e.xn, nil); err != nil {
		return fmt.Errorf("lm_head: %w", err)
	}
	return nil
}

// moeBlock sets e.moe from e.xn: routed experts, plus Qwen's gated shared
// expert.
func (e *Engine) moeBlock(l int, lw *LayerWeights) error {
	be := e.be
	if err := be.MatVec(e.routerLogits, lw.Router, e.xn, nil); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	ids, weights, err := be.TopK(e.routerLogits, e.cfg.TopK, e.cfg.NormTopKProb)
	if err != nil {
		return fmt.Errorf("router top-%d: %w", e.cfg.TopK, err)
	}
	if err := e.routed(l, ids); err != nil {
		return err
	}
	rows, release, err := e.experts.Acquire(l, ids)
	if err != nil {
		return fmt.Errorf("acquire experts %v: %w", ids, err)
	}
	// Next-layer prefetch (prefetch.go): predict layer l+1's group from
	// e.xn and start loading its misses, so the copies overlap this
	// layer's experts. Issued after this layer's Acquire, which therefore
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
	if lw.SharedGate == nil {
		return nil
	}
	steps := []struct {
		what string
		run  func() error
	}{
		{"shared gate_proj", func() error { return be.MatVec(e.sg, lw.SharedGate, e.xn, nil) }},
		{"shared up_proj", func() error { return be.MatVec(e.su, lw.SharedUp, e.xn, nil) }},
		{"shared act", func() error { return be.SiLUMul(e.sa, e.sg, e.su) }},
		{"shared down_proj", func() error { return be.MatVec(e.sd, lw.SharedDown, e.sa, nil) }},
		{"shared_expert_gate", func() error { return be.MatVec(e.mix, lw.SharedMix, e.xn, nil) }},
		{"shared combine", func() error { return be.AddGated(e.moe, e.sd, e.mix) }},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}
