package engine

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The weight types are defined in runtime/device, so that a device
// stepper reads them without importing the engine.
type (
	LayerWeights = device.LayerWeights
	Weights      = device.Weights
)

// LoadWeights uploads the artifact's FP16 non-routed tensors to be. The
// weights own what it uploaded (Weights.Owned; Weights.Free releases it);
// on an error it releases what it had uploaded.
func LoadWeights(be backend.Backend, cfg model.Config, art *qpack.Artifact) (_ *Weights, err error) {
	set, err := art.NonRouted()
	if err != nil {
		return nil, fmt.Errorf("open non-routed tensors: %w", err)
	}
	defer set.Close()
	w := &Weights{Layers: make([]LayerWeights, cfg.NumLayers)}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.Free(be))
		}
	}()
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
		w.Owned = append(w.Owned, t)
		return t, nil
	}
	D, V, E, S, KV := cfg.HiddenSize, cfg.VocabSize, cfg.NumExperts, cfg.SharedFFN, cfg.KVDim()
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
		if vw, ok := be.(backend.Viewer); ok {
			if err := loadFused(vw, be, set, l, lw, cfg, w); err != nil {
				return nil, err
			}
		}
		for _, s := range steps {
			if !s.when || *s.dst != nil {
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

// fusedPart is one tensor of a fused upload.
type fusedPart struct {
	dst   *backend.Tensor
	name  string
	shape []int
}

// loadFused uploads layer l's q|k|v projections (and biases) and Qwen's
// shared gate|up|mix as one tensor each and sets the per-projection fields
// to views of them; w owns the fused tensors.
func loadFused(vw backend.Viewer, be backend.Backend, set *qpack.NonRoutedSet, l int, lw *LayerWeights, cfg model.Config, w *Weights) error {
	D, S, KV := cfg.HiddenSize, cfg.SharedFFN, cfg.KVDim()
	groups := []struct {
		dst   *backend.Tensor
		parts []fusedPart
		when  bool
	}{
		{&lw.QKV, []fusedPart{{&lw.Q, "self_attn.q_proj.weight", []int{D, D}}, {&lw.K, "self_attn.k_proj.weight", []int{KV, D}},
			{&lw.V, "self_attn.v_proj.weight", []int{KV, D}}}, true},
		{&lw.QKVBias, []fusedPart{{&lw.QBias, "self_attn.q_proj.bias", []int{D}}, {&lw.KBias, "self_attn.k_proj.bias", []int{KV}},
			{&lw.VBias, "self_attn.v_proj.bias", []int{KV}}}, cfg.HasQKVBias()},
		{&lw.SharedGUM, []fusedPart{{&lw.SharedGate, "mlp.shared_expert.gate_proj.weight", []int{S, D}},
			{&lw.SharedUp, "mlp.shared_expert.up_proj.weight", []int{S, D}},
			{&lw.SharedMix, "mlp.shared_expert_gate.weight", []int{1, D}}}, cfg.HasSharedExpert()},
	}
	for _, g := range groups {
		if !g.when {
			continue
		}
		var all []uint16
		var sizes []int
		for _, p := range g.parts {
			name := model.LayerTensorName(l, p.name)
			data, shape, err := set.F16(name)
			if err != nil {
				return fmt.Errorf("tensor %s: %w", name, err)
			}
			if !sameShape(shape, p.shape) {
				return fmt.Errorf("tensor %s: shape %v, want %v", name, shape, p.shape)
			}
			all = append(all, data...)
			sizes = append(sizes, len(data))
		}
		t, err := be.UploadF16(all)
		if err != nil {
			return fmt.Errorf("upload layer %d fused %s: %w", l, g.parts[0].name, err)
		}
		w.Owned = append(w.Owned, t)
		*g.dst = t
		off := 0
		for i, p := range g.parts {
			if *p.dst, err = vw.View(t, off, sizes[i]); err != nil {
				return fmt.Errorf("view layer %d %s: %w", l, p.name, err)
			}
			off += sizes[i]
		}
	}
	return nil
}
