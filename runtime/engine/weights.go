package engine

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// LayerWeights are one decoder layer's non-routed tensors on the backend.
type LayerWeights struct {
	InputNorm backend.Tensor // [D]
	Q         backend.Tensor // [Hq*hd, D]
	K         backend.Tensor // [Hkv*hd, D]
	V         backend.Tensor // [Hkv*hd, D]
	QBias     backend.Tensor // [Hq*hd]   Qwen only, else nil
	KBias     backend.Tensor // [Hkv*hd]  Qwen only, else nil
	VBias     backend.Tensor // [Hkv*hd]  Qwen only, else nil
	O         backend.Tensor // [D, Hq*hd]
	QNorm     backend.Tensor // [Hq*hd]   OLMoE only, else nil
	KNorm     backend.Tensor // [Hkv*hd]  OLMoE only, else nil
	PostNorm  backend.Tensor // [D]
	Router    backend.Tensor // [E, D]

	SharedGate backend.Tensor // [S, D]  Qwen only
	SharedUp   backend.Tensor // [S, D]  Qwen only
	SharedDown backend.Tensor // [D, S]  Qwen only
	SharedMix  backend.Tensor // [1, D]  Qwen's shared_expert_gate
}

// Weights are every non-routed tensor of a model on the backend.
type Weights struct {
	Embed  backend.Tensor // [V, D]
	Layers []LayerWeights
	Norm   backend.Tensor // [D]
	LMHead backend.Tensor // [V, D]; the embedding table when tied
}

// LoadWeights uploads the artifact's FP16 non-routed tensors to be.
func LoadWeights(be backend.Backend, cfg model.Config, art *qpack.Artifact) (*Weights, error) {
	set, err := art.NonRouted()
	if err != nil {
		return nil, fmt.Errorf("open non-routed tensors: %w", err)
	}
	defer set.Close()
	up := func(name string, want ...int) (backend.Tensor, error) {
		data, shape, err := set.F16(name)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		if !sameShape(shape, want) {
			return nil, fmt.Errorf("tensor %s: shape %v, want %v", name, shape, want)
		}
		t, err := be.UploadF16(data)
		if err != nil {
			return nil, fmt.Errorf("upload %s: %w", name, err)
		}
		return t, nil
	}
	D, V, E, S, KV := cfg.HiddenSize, cfg.VocabSize, cfg.NumExperts, cfg.SharedFFN, cfg.KVDim()
	w := &Weights{Layers: make([]LayerWeights, cfg.NumLayers)}
	if w.Embed, err = up("model.embed_tokens.weight", V, D); err != nil {
		return nil, err
	}
	for l := range w.Layers {
		lw := &w.Layers[l]
		ln := func(s string) string { return model.LayerTensorName(l, s) }
		steps := []struct {
			dst   *backend.Tensor
			name  string
			shape []int
			when  bool
		}{
			{&lw.InputNorm, "input_layernorm.weight", []int{D}, true},
			{&lw.Q, "self_attn.q_proj.weight", []int{D, D}, true},
			{&lw.K, "self_attn.k_proj.weight", []int{KV, D}, true},
			{&lw.V, "self_attn.v_proj.weight", []int{KV, D}, true},
			{&lw.QBias, "self_attn.q_proj.bias", []int{D}, cfg.HasQKVBias()},
			{&lw.KBias, "self_attn.k_proj.bias", []int{KV}, cfg.HasQKVBias()},
			{&lw.VBias, "self_attn.v_proj.bias", []int{KV}, cfg.HasQKVBias()},
			{&lw.O, "self_attn.o_proj.weight", []int{D, D}, true},
			{&lw.QNorm, "self_attn.q_norm.weight", []int{D}, cfg.HasQKNorm()},
			{&lw.KNorm, "self_attn.k_norm.weight", []int{KV}, cfg.HasQKNorm()},
			{&lw.PostNorm, "post_attention_layernorm.weight", []int{D}, true},
			{&lw.Router, "mlp.gate.weight", []int{E, D}, true},
			{&lw.SharedGate, "mlp.shared_expert.gate_proj.weight", []int{S, D}, cfg.HasSharedExpert()},
			{&lw.SharedUp, "mlp.shared_expert.up_proj.weight", []int{S, D}, cfg.HasSharedExpert()},
			{&lw.SharedDown, "mlp.shared_expert.down_proj.weight", []int{D, S}, cfg.HasSharedExpert()},
			{&lw.SharedMix, "mlp.shared_expert_gate.weight", []int{1, D}, cfg.HasSharedExpert()},
		}
		for _, s := range steps {
			if !s.when {
				continue
			}
			if *s.dst, err = up(ln(s.name), s.shape...); err != nil {
				return nil, err
			}
		}
	}
	if w.Norm, err = up("model.norm.weight", D); err != nil {
		return nil, err
	}
	if cfg.TieWordEmbeddings {
		w.LMHead = w.Embed
	} else if w.LMHead, err = up("lm_head.weight", V, D); err != nil {
		return nil, err
	}
	return w, nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
