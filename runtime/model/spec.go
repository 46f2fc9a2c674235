// Package model knows the two MoE architectures Horizon runs (OLMoE and
// Qwen2-MoE) as Hugging Face defines them: their config.json, the names and
// shapes of every tensor in a checkpoint, how to read those tensors from
// (sharded) safetensors, and how to write deterministic synthetic checkpoints
// with the exact published shapes.
//
// The configuration, the presets and the tensor specs are package
// modelspec's (a leaf, so that the verifier can have a model's shapes
// without the runtime); this file re-exports them under their old names.
// The package holds data and layout only. The forward pass lives in
// runtime/engine and is written against runtime/backend.
package model

import "github.com/horizon-runmap/horizon/modelspec"

type (
	// Arch names a supported architecture family (modelspec.Arch).
	Arch = modelspec.Arch
	// Config is the config.json subset that determines the math
	// (modelspec.Config).
	Config = modelspec.Config
	// Preset is a synthetic architecture (modelspec.Preset).
	Preset = modelspec.Preset
	// TensorKind says how prepare stores a tensor (modelspec.TensorKind).
	TensorKind = modelspec.TensorKind
	// TensorSpec names one checkpoint tensor and its HF shape
	// (modelspec.TensorSpec).
	TensorSpec = modelspec.TensorSpec
)

const (
	OLMoE     = modelspec.OLMoE
	Qwen2MoE  = modelspec.Qwen2MoE
	NonRouted = modelspec.NonRouted
	Routed    = modelspec.Routed
)

var (
	// ErrUnsupported marks a config.json that names something this runtime
	// does not implement.
	ErrUnsupported = modelspec.ErrUnsupported
	// ExpertProjs are the matrices of one expert, in record order.
	ExpertProjs = modelspec.ExpertProjs
)

// LoadConfig is modelspec.LoadConfig: dir/config.json, parsed and checked.
func LoadConfig(dir string) (Config, error) { return modelspec.LoadConfig(dir) }

// ParseConfig is modelspec.ParseConfig.
func ParseConfig(b []byte) (Config, error) { return modelspec.ParseConfig(b) }

// LookupPreset is modelspec.LookupPreset.
func LookupPreset(name string) (Preset, error) { return modelspec.LookupPreset(name) }

// PresetNames is modelspec.PresetNames.
func PresetNames() []string { return modelspec.PresetNames() }

// ExpertTensorName is modelspec.ExpertTensorName.
func ExpertTensorName(layer, expert int, proj string) string {
	return modelspec.ExpertTensorName(layer, expert, proj)
}

// LayerTensorName is modelspec.LayerTensorName.
func LayerTensorName(layer int, suffix string) string {
	return modelspec.LayerTensorName(layer, suffix)
}
