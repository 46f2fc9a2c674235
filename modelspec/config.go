// Package modelspec describes the two MoE architectures Horizon runs (OLMoE
// and Qwen2-MoE) as Hugging Face defines them: the config.json subset that
// determines the math, the synthetic presets with the published shapes, and
// the name, shape and storage kind of every tensor of a checkpoint.
//
// It is a leaf (the standard library only), so that what needs a model's
// shapes without its runtime can have them: package ceilings, which the
// runner's reports and the verifier both use to compute HBM, VRAM and
// prefill bounds. runtime/model re-exports it and adds checkpoints
// (safetensors) and synthesis; the forward pass lives in runtime/engine.
package modelspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Arch names a supported architecture family.
type Arch string

const (
	// OLMoE is allenai's OlmoeForCausalLM (model_type "olmoe").
	OLMoE Arch = "olmoe"
	// Qwen2MoE is Qwen2MoeForCausalLM (model_type "qwen2_moe").
	Qwen2MoE Arch = "qwen2_moe"
)

// ErrUnsupported marks a config.json that names something this runtime does
// not implement (an architecture, an activation, rope scaling, ...).
var ErrUnsupported = errors.New("unsupported model configuration")

// Config is the subset of a Hugging Face config.json that determines the
// math. Field names follow HF; derived values are methods.
type Config struct {
	Arch              Arch     `json:"-"`
	ModelType         string   `json:"model_type"`
	Architectures     []string `json:"architectures"`
	HiddenSize        int      `json:"hidden_size"`          // D
	NumLayers         int      `json:"num_hidden_layers"`    // L
	NumHeads          int      `json:"num_attention_heads"`  // Hq
	NumKVHeads        int      `json:"num_key_value_heads"`  // Hkv
	VocabSize         int      `json:"vocab_size"`           // V
	NumExperts        int      `json:"num_experts"`          // E
	TopK              int      `json:"num_experts_per_tok"`  // A (active experts per token)
	ExpertFFN         int      `json:"expert_ffn"`           // F: OLMoE intermediate_size, Qwen moe_intermediate_size
	SharedFFN         int      `json:"shared_ffn,omitempty"` // S: Qwen shared_expert_intermediate_size (0 for OLMoE)
	NormTopKProb      bool     `json:"norm_topk_prob"`
	RMSNormEps        float64  `json:"rms_norm_eps"`
	RopeTheta         float64  `json:"rope_theta"`
	MaxPositions      int      `json:"max_position_embeddings"`
	TieWordEmbeddings bool     `json:"tie_word_embeddings"`
	EOSTokenIDs       []int    `json:"eos_token_ids"`
	TorchDType        string   `json:"torch_dtype"`
}

// HeadDim is the per-head width (D / Hq).
func (c Config) HeadDim() int { return c.HiddenSize / c.NumHeads }

// KVDim is the width of the k and v projections (Hkv * HeadDim).
func (c Config) KVDim() int { return c.NumKVHeads * c.HeadDim() }

// HasSharedExpert reports whether each layer has Qwen's gated shared expert.
func (c Config) HasSharedExpert() bool { return c.Arch == Qwen2MoE }

// HasQKVBias reports whether q/k/v projections carry a bias (Qwen2-MoE).
func (c Config) HasQKVBias() bool { return c.Arch == Qwen2MoE }

// HasQKNorm reports whether q/k are RMS-normalised over the full projection
// before RoPE (OLMoE's q_norm/k_norm).
func (c Config) HasQKNorm() bool { return c.Arch == OLMoE }

// IsEOS reports whether id is one of the model's end-of-sequence ids.
func (c Config) IsEOS(id int) bool {
	for _, e := range c.EOSTokenIDs {
		if e == id {
			return true
		}
	}
	return false
}

// rawConfig mirrors config.json with pointers so that "missing" and "zero"
// can be told apart.
type rawConfig struct {
	ModelType          *string         `json:"model_type"`
	Architectures      []string        `json:"architectures"`
	HiddenSize         *int            `json:"hidden_size"`
	IntermediateSize   *int            `json:"intermediate_size"`
	MoEIntermediate    *int            `json:"moe_intermediate_size"`
	SharedIntermediate *int            `json:"shared_expert_intermediate_size"`
	NumLayers          *int            `json:"num_hidden_layers"`
	NumHeads           *int            `json:"num_attention_heads"`
	NumKVHeads         *int            `json:"num_key_value_heads"`
	VocabSize          *int            `json:"vocab_size"`
	NumExperts         *int            `json:"num_experts"`
	TopK               *int            `json:"num_experts_per_tok"`
	NormTopKProb       *bool           `json:"norm_topk_prob"`
	RMSNormEps         *float64        `json:"rms_norm_eps"`
	RopeTheta          *float64        `json:"rope_theta"`
	RopeParameters     json.RawMessage `json:"rope_parameters"`
	RopeScaling        json.RawMessage `json:"rope_scaling"`
	MaxPositions       *int            `json:"max_position_embeddings"`
	TieWordEmbeddings  *bool           `json:"tie_word_embeddings"`
	EOSTokenID         json.RawMessage `json:"eos_token_id"`
	HiddenAct          *string         `json:"hidden_act"`
	ClipQKV            *float64        `json:"clip_qkv"`
	AttentionBias      *bool           `json:"attention_bias"`
	DecoderSparseStep  *int            `json:"decoder_sparse_step"`
	MLPOnlyLayers      []int           `json:"mlp_only_layers"`
	UseSlidingWindow   *bool           `json:"use_sliding_window"`
	TorchDType         *string         `json:"torch_dtype"`
	DType              *string         `json:"dtype"`
}

// LoadConfig reads and validates dir/config.json.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read model config: %w", err)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses a Hugging Face config.json for OLMoE or Qwen2-MoE. It
// fails on a missing required field and on any value whose math this runtime
// does not implement, naming the field.
func ParseConfig(b []byte) (Config, error) {
	var r rawConfig
	if err := json.Unmarshal(b, &r); err != nil {
		return Config{}, fmt.Errorf("parse config.json: %w", err)
	}
	if r.ModelType == nil {
		return Config{}, fmt.Errorf("config.json: missing required field %q", "model_type")
	}
	c := Config{ModelType: *r.ModelType, Architectures: r.Architectures}
	switch *r.ModelType {
	case "olmoe":
		c.Arch = OLMoE
	case "qwen2_moe":
		c.Arch = Qwen2MoE
	default:
		return Config{}, fmt.Errorf("model_type %q: %w (supported: olmoe, qwen2_moe)", *r.ModelType, ErrUnsupported)
	}
	var missing []string
	needInt := func(name string, p *int, dst *int) {
		if p == nil {
			missing = append(missing, name)
			return
		}
		*dst = *p
	}
	needFloat := func(name string, p *float64, dst *float64) {
		if p == nil {
			missing = append(missing, name)
			return
		}
		*dst = *p
	}
	needInt("hidden_size", r.HiddenSize, &c.HiddenSize)
	needInt("num_hidden_layers", r.NumLayers, &c.NumLayers)
	needInt("num_attention_heads", r.NumHeads, &c.NumHeads)
	needInt("vocab_size", r.VocabSize, &c.VocabSize)
	needInt("num_experts", r.NumExperts, &c.NumExperts)
	needInt("num_experts_per_tok", r.TopK, &c.TopK)
	needFloat("rms_norm_eps", r.RMSNormEps, &c.RMSNormEps)
	switch c.Arch {
	case OLMoE:
		needInt("intermediate_size", r.IntermediateSize, &c.ExpertFFN)
	case Qwen2MoE:
		needInt("moe_intermediate_size", r.MoEIntermediate, &c.ExpertFFN)
		needInt("shared_expert_intermediate_size", r.SharedIntermediate, &c.SharedFFN)
	}
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("config.json (%s): missing required field(s) %q", c.ModelType, missing)
	}
	// Optional fields with the defaults transformers uses.
	c.NumKVHeads = c.NumHeads
	if r.NumKVHeads != nil {
		c.NumKVHeads = *r.NumKVHeads
	}
	c.RopeTheta = 10000
	if r.RopeTheta != nil {
		c.RopeTheta = *r.RopeTheta
	}
	if len(r.RopeParameters) > 0 && string(r.RopeParameters) != "null" {
		// transformers 5 moved rope_theta into rope_parameters.
		var rp struct {
			RopeType  *string  `json:"rope_type"`
			RopeTheta *float64 `json:"rope_theta"`
		}
		if err := json.Unmarshal(r.RopeParameters, &rp); err != nil {
			return Config{}, fmt.Errorf("config.json: rope_parameters: %w", err)
		}
		if rp.RopeType != nil && *rp.RopeType != "default" {
			return Config{}, fmt.Errorf("rope_parameters.rope_type %q: %w (only default RoPE)", *rp.RopeType, ErrUnsupported)
		}
		if rp.RopeTheta != nil {
			c.RopeTheta = *rp.RopeTheta
		}
	}
	if len(r.RopeScaling) > 0 && string(r.RopeScaling) != "null" {
		return Config{}, fmt.Errorf("rope_scaling %s: %w (only unscaled RoPE)", r.RopeScaling, ErrUnsupported)
	}
	c.MaxPositions = 4096
	if r.MaxPositions != nil {
		c.MaxPositions = *r.MaxPositions
	}
	c.TieWordEmbeddings = false
	if r.TieWordEmbeddings != nil {
		c.TieWordEmbeddings = *r.TieWordEmbeddings
	}
	c.NormTopKProb = false
	if r.NormTopKProb != nil {
		c.NormTopKProb = *r.NormTopKProb
	}
	switch {
	case r.TorchDType != nil:
		c.TorchDType = *r.TorchDType
	case r.DType != nil:
		c.TorchDType = *r.DType
	}
	if len(r.EOSTokenID) > 0 && string(r.EOSTokenID) != "null" {
		var one int
		if err := json.Unmarshal(r.EOSTokenID, &one); err == nil {
			c.EOSTokenIDs = []int{one}
		} else if err := json.Unmarshal(r.EOSTokenID, &c.EOSTokenIDs); err != nil {
			return Config{}, fmt.Errorf("config.json: eos_token_id must be an int or a list of ints: %w", err)
		}
	}
	if r.HiddenAct != nil && *r.HiddenAct != "silu" {
		return Config{}, fmt.Errorf("hidden_act %q: %w (only silu)", *r.HiddenAct, ErrUnsupported)
	}
	if r.ClipQKV != nil {
		return Config{}, fmt.Errorf("clip_qkv %g: %w (only null)", *r.ClipQKV, ErrUnsupported)
	}
	if c.Arch == OLMoE && r.AttentionBias != nil && *r.AttentionBias {
		return Config{}, fmt.Errorf("attention_bias true: %w for olmoe", ErrUnsupported)
	}
	if c.Arch == Qwen2MoE {
		if r.DecoderSparseStep != nil && *r.DecoderSparseStep != 1 {
			return Config{}, fmt.Errorf("decoder_sparse_step %d: %w (every layer must be MoE)", *r.DecoderSparseStep, ErrUnsupported)
		}
		if len(r.MLPOnlyLayers) > 0 {
			return Config{}, fmt.Errorf("mlp_only_layers %v: %w (every layer must be MoE)", r.MLPOnlyLayers, ErrUnsupported)
		}
		if r.UseSlidingWindow != nil && *r.UseSlidingWindow {
			return Config{}, fmt.Errorf("use_sliding_window true: %w", ErrUnsupported)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks the internal consistency of the dimensions.
func (c Config) Validate() error {
	switch {
	case c.HiddenSize <= 0 || c.NumLayers <= 0 || c.NumHeads <= 0 || c.VocabSize <= 0:
		return fmt.Errorf("config: hidden_size, num_hidden_layers, num_attention_heads and vocab_size must be positive")
	case c.HiddenSize%c.NumHeads != 0:
		return fmt.Errorf("config: hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumHeads)
	case c.HeadDim()%2 != 0:
		return fmt.Errorf("config: head dim %d must be even for RoPE", c.HeadDim())
	case c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0:
		return fmt.Errorf("config: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumHeads, c.NumKVHeads)
	case c.NumExperts <= 0 || c.TopK <= 0 || c.TopK > c.NumExperts:
		return fmt.Errorf("config: num_experts_per_tok %d must be in 1..num_experts (%d)", c.TopK, c.NumExperts)
	case c.ExpertFFN <= 0:
		return fmt.Errorf("config: expert intermediate size must be positive")
	case c.Arch == Qwen2MoE && c.SharedFFN <= 0:
		return fmt.Errorf("config: shared_expert_intermediate_size must be positive")
	case c.RMSNormEps <= 0:
		return fmt.Errorf("config: rms_norm_eps must be positive")
	}
	return nil
}
