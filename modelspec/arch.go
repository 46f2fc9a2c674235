package modelspec

import (
	"fmt"
	"sort"
)

// Preset is a named synthetic architecture: a Config with the exact shapes of
// a published model (or of a tiny test model).
type Preset struct {
	Name        string
	Description string
	Config      Config
}

// presets are the architectures `horizon-bench synth --arch` accepts.
var presets = map[string]Preset{
	"olmoe-1b-7b": {
		Name:        "olmoe-1b-7b",
		Description: "allenai/OLMoE-1B-7B-0924 shapes: 16 layers, hidden 2048, 16 heads, 64 experts, top-8, expert FFN 1024, vocab 50304",
		Config: Config{
			Arch: OLMoE, ModelType: "olmoe", Architectures: []string{"OlmoeForCausalLM"},
			HiddenSize: 2048, NumLayers: 16, NumHeads: 16, NumKVHeads: 16, VocabSize: 50304,
			NumExperts: 64, TopK: 8, ExpertFFN: 1024, NormTopKProb: false,
			RMSNormEps: 1e-5, RopeTheta: 10000, MaxPositions: 4096,
			TieWordEmbeddings: false, EOSTokenIDs: []int{50279}, TorchDType: "bfloat16",
		},
	},
	"qwen15-moe-a27b": {
		Name:        "qwen15-moe-a27b",
		Description: "Qwen/Qwen1.5-MoE-A2.7B shapes: 24 layers, hidden 2048, 16 heads, 60 experts, top-4, expert FFN 1408, shared FFN 5632, vocab 151936",
		Config: Config{
			Arch: Qwen2MoE, ModelType: "qwen2_moe", Architectures: []string{"Qwen2MoeForCausalLM"},
			HiddenSize: 2048, NumLayers: 24, NumHeads: 16, NumKVHeads: 16, VocabSize: 151936,
			NumExperts: 60, TopK: 4, ExpertFFN: 1408, SharedFFN: 5632, NormTopKProb: false,
			RMSNormEps: 1e-6, RopeTheta: 1000000, MaxPositions: 8192,
			TieWordEmbeddings: false, EOSTokenIDs: []int{151643}, TorchDType: "bfloat16",
		},
	},
	"olmoe-tiny": {
		Name:        "olmoe-tiny",
		Description: "tiny OLMoE for tests and the CPU default: 4 layers, hidden 256, 4 heads, 16 experts, top-4, expert FFN 256, vocab 512",
		Config: Config{
			Arch: OLMoE, ModelType: "olmoe", Architectures: []string{"OlmoeForCausalLM"},
			HiddenSize: 256, NumLayers: 4, NumHeads: 4, NumKVHeads: 4, VocabSize: 512,
			NumExperts: 16, TopK: 4, ExpertFFN: 256, NormTopKProb: false,
			RMSNormEps: 1e-5, RopeTheta: 10000, MaxPositions: 4096,
			TieWordEmbeddings: false, EOSTokenIDs: []int{511}, TorchDType: "bfloat16",
		},
	},
	"qwen2moe-tiny": {
		Name:        "qwen2moe-tiny",
		Description: "tiny Qwen2-MoE for tests: 4 layers, hidden 256, 4 heads, 16 experts, top-4, expert FFN 352 (exercises INT4 padding), shared FFN 704, vocab 512",
		Config: Config{
			Arch: Qwen2MoE, ModelType: "qwen2_moe", Architectures: []string{"Qwen2MoeForCausalLM"},
			HiddenSize: 256, NumLayers: 4, NumHeads: 4, NumKVHeads: 4, VocabSize: 512,
			NumExperts: 16, TopK: 4, ExpertFFN: 352, SharedFFN: 704, NormTopKProb: false,
			RMSNormEps: 1e-6, RopeTheta: 1000000, MaxPositions: 8192,
			TieWordEmbeddings: false, EOSTokenIDs: []int{511}, TorchDType: "bfloat16",
		},
	},
}

// LookupPreset returns the named synthetic architecture.
func LookupPreset(name string) (Preset, error) {
	p, ok := presets[name]
	if !ok {
		return Preset{}, fmt.Errorf("unknown architecture %q (known: %v)", name, PresetNames())
	}
	p.Config.Architectures = append([]string(nil), p.Config.Architectures...)
	p.Config.EOSTokenIDs = append([]int(nil), p.Config.EOSTokenIDs...)
	return p, nil
}

// PresetNames lists the synthetic architectures in sorted order.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// HFConfig renders c as the config.json transformers expects for the
// architecture (field names and the defaults that matter spelled out).
func (c Config) HFConfig() map[string]any {
	m := map[string]any{
		"model_type":              c.ModelType,
		"architectures":           c.Architectures,
		"hidden_size":             c.HiddenSize,
		"num_hidden_layers":       c.NumLayers,
		"num_attention_heads":     c.NumHeads,
		"num_key_value_heads":     c.NumKVHeads,
		"vocab_size":              c.VocabSize,
		"num_experts":             c.NumExperts,
		"num_experts_per_tok":     c.TopK,
		"norm_topk_prob":          c.NormTopKProb,
		"rms_norm_eps":            c.RMSNormEps,
		"rope_theta":              c.RopeTheta,
		"rope_scaling":            nil,
		"max_position_embeddings": c.MaxPositions,
		"tie_word_embeddings":     c.TieWordEmbeddings,
		"hidden_act":              "silu",
		"torch_dtype":             c.TorchDType,
		"initializer_range":       0.02,
		"use_cache":               true,
		"attention_dropout":       0.0,
		"output_router_logits":    false,
		"router_aux_loss_coef":    0.01,
	}
	if len(c.EOSTokenIDs) == 1 {
		m["eos_token_id"] = c.EOSTokenIDs[0]
	} else if len(c.EOSTokenIDs) > 1 {
		m["eos_token_id"] = c.EOSTokenIDs
	}
	switch c.Arch {
	case OLMoE:
		m["intermediate_size"] = c.ExpertFFN
		m["clip_qkv"] = nil
		m["attention_bias"] = false
		m["pad_token_id"] = 1
		m["bos_token_id"] = nil
	case Qwen2MoE:
		m["intermediate_size"] = c.SharedFFN
		m["moe_intermediate_size"] = c.ExpertFFN
		m["shared_expert_intermediate_size"] = c.SharedFFN
		m["decoder_sparse_step"] = 1
		m["mlp_only_layers"] = []int{}
		m["use_sliding_window"] = false
		m["sliding_window"] = nil
		m["max_window_layers"] = c.NumLayers
		m["bos_token_id"] = c.EOSTokenIDs[0]
		m["qkv_bias"] = true
	}
	return m
}

// TensorKind says how prepare stores a tensor.
type TensorKind int

const (
	// NonRouted tensors (attention, norms, router, embeddings, lm_head,
	// Qwen's shared expert) are stored FP16.
	NonRouted TensorKind = iota
	// Routed tensors are the gate/up/down matrices of routed experts, stored
	// qpack-int4-b256-v1 (or FP16 with --experts fp16).
	Routed
)

// TensorSpec names one checkpoint tensor and its HF shape.
type TensorSpec struct {
	Name  string
	Shape []int
	Kind  TensorKind
	// Init is the synthetic initialisation: "normal" (std 0.02), "embed"
	// (normal, std 1.0) or "ones".
	Init string
	// Layer and Expert locate routed tensors; -1 otherwise.
	Layer, Expert int
	// Proj is "gate_proj", "up_proj" or "down_proj" for routed tensors.
	Proj string
}

// ExpertProjs are the matrices of one expert, in record order.
var ExpertProjs = [3]string{"gate_proj", "up_proj", "down_proj"}

// ExpertTensorName is the HF name of a routed expert matrix.
func ExpertTensorName(layer, expert int, proj string) string {
	return fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s.weight", layer, expert, proj)
}

// LayerTensorName is the HF name of a per-layer tensor, e.g.
// LayerTensorName(3, "self_attn.q_proj.weight").
func LayerTensorName(layer int, suffix string) string {
	return fmt.Sprintf("model.layers.%d.%s", layer, suffix)
}

// TensorSpecs lists every tensor of a checkpoint of this configuration, in a
// fixed order (global tensors first, then layer by layer), with HF shapes
// [out_features, in_features] for linear weights.
func (c Config) TensorSpecs() []TensorSpec {
	D, V, F, S, E := c.HiddenSize, c.VocabSize, c.ExpertFFN, c.SharedFFN, c.NumExperts
	KV := c.KVDim()
	var out []TensorSpec
	add := func(name, init string, shape ...int) {
		out = append(out, TensorSpec{Name: name, Shape: shape, Kind: NonRouted, Init: init, Layer: -1, Expert: -1})
	}
	add("model.embed_tokens.weight", "embed", V, D) // [V, D]
	for l := 0; l < c.NumLayers; l++ {
		ln := func(s string) string { return LayerTensorName(l, s) }
		add(ln("input_layernorm.weight"), "ones", D)        // [D]
		add(ln("self_attn.q_proj.weight"), "normal", D, D)  // [Hq*hd, D]
		add(ln("self_attn.k_proj.weight"), "normal", KV, D) // [Hkv*hd, D]
		add(ln("self_attn.v_proj.weight"), "normal", KV, D) // [Hkv*hd, D]
		if c.HasQKVBias() {
			add(ln("self_attn.q_proj.bias"), "normal", D)  // [Hq*hd]
			add(ln("self_attn.k_proj.bias"), "normal", KV) // [Hkv*hd]
			add(ln("self_attn.v_proj.bias"), "normal", KV) // [Hkv*hd]
		}
		add(ln("self_attn.o_proj.weight"), "normal", D, D) // [D, Hq*hd]
		if c.HasQKNorm() {
			add(ln("self_attn.q_norm.weight"), "ones", D)  // [Hq*hd]
			add(ln("self_attn.k_norm.weight"), "ones", KV) // [Hkv*hd]
		}
		add(ln("post_attention_layernorm.weight"), "ones", D) // [D]
		add(ln("mlp.gate.weight"), "normal", E, D)            // router [E, D]
		if c.HasSharedExpert() {
			add(ln("mlp.shared_expert.gate_proj.weight"), "normal", S, D) // [S, D]
			add(ln("mlp.shared_expert.up_proj.weight"), "normal", S, D)   // [S, D]
			add(ln("mlp.shared_expert.down_proj.weight"), "normal", D, S) // [D, S]
			add(ln("mlp.shared_expert_gate.weight"), "normal", 1, D)      // [1, D]
		}
		for e := 0; e < E; e++ {
			for _, p := range ExpertProjs {
				shape := []int{F, D} // gate/up: [F, D]
				if p == "down_proj" {
					shape = []int{D, F} // down: [D, F]
				}
				out = append(out, TensorSpec{Name: ExpertTensorName(l, e, p), Shape: shape, Kind: Routed,
					Init: "normal", Layer: l, Expert: e, Proj: p})
			}
		}
	}
	add("model.norm.weight", "ones", D) // [D]
	if !c.TieWordEmbeddings {
		add("lm_head.weight", "normal", V, D) // [V, D]
	}
	return out
}
