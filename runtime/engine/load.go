package engine

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// LoadOptions select how an artifact is run.
type LoadOptions struct {
	Executor string // "" means scalar-v1
	MaxSeq   int
}

// Load builds an engine for a prepared artifact on be with every expert
// resident.
func Load(be backend.Backend, art *qpack.Artifact, o LoadOptions) (*Engine, error) {
	cfg, err := art.Config()
	if err != nil {
		return nil, fmt.Errorf("artifact config: %w", err)
	}
	w, err := LoadWeights(be, cfg, art)
	if err != nil {
		return nil, err
	}
	rows, err := NewResidentRows(be, art, cfg.NumLayers, cfg.NumExperts)
	if err != nil {
		return nil, err
	}
	name := o.Executor
	if name == "" {
		name = "scalar-v1"
	}
	ex, err := executor.New(name, be, art.Layout(), cfg.TopK)
	if err != nil {
		return nil, err
	}
	return New(Options{Backend: be, Config: cfg, Weights: w, Experts: rows, Executor: ex, MaxSeq: o.MaxSeq})
}
