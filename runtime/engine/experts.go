package engine

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// ExpertRows hands the engine the backend rows that hold a routed group.
// The residency cache implements it; ResidentRows is the trivial
// everything-uploaded implementation.
type ExpertRows interface {
	// Acquire returns, for each id, the row holding that expert of the layer,
	// and a release function the caller invokes once the compute that read
	// the rows has completed.
	Acquire(layer int, ids []int) (rows []backend.Tensor, release func(), err error)
}

// ResidentRows uploads every expert record of an artifact to its own backend
// row once and serves them forever: full residency with no cache logic.
type ResidentRows struct {
	rows [][]backend.Tensor // [layer][expert]
}

// NewResidentRows reads the artifact's expert records (verifying their hash)
// and uploads each to a backend row.
func NewResidentRows(be backend.Backend, art *qpack.Artifact, layers, experts int) (*ResidentRows, error) {
	buf := make([]byte, art.ExpertsBytes())
	if _, err := art.ReadExperts(buf); err != nil {
		return nil, fmt.Errorf("read expert records: %w", err)
	}
	size := art.Layout().Size
	r := &ResidentRows{rows: make([][]backend.Tensor, layers)}
	for l := 0; l < layers; l++ {
		r.rows[l] = make([]backend.Tensor, experts)
		for e := 0; e < experts; e++ {
			row, err := be.AllocBytes(size)
			if err != nil {
				return nil, fmt.Errorf("layer %d expert %d: allocate row: %w", l, e, err)
			}
			off := art.RecordOffset(l, e)
			if err := be.WriteBytes(row, 0, buf[off:off+int64(size)]); err != nil {
				return nil, fmt.Errorf("layer %d expert %d: upload: %w", l, e, err)
			}
			r.rows[l][e] = row
		}
	}
	return r, nil
}

// Acquire implements ExpertRows.
func (r *ResidentRows) Acquire(layer int, ids []int) ([]backend.Tensor, func(), error) {
	if layer < 0 || layer >= len(r.rows) {
		return nil, nil, fmt.Errorf("layer %d outside 0..%d", layer, len(r.rows)-1)
	}
	out := make([]backend.Tensor, len(ids))
	for i, id := range ids {
		if id < 0 || id >= len(r.rows[layer]) {
			return nil, nil, fmt.Errorf("layer %d: expert %d outside 0..%d", layer, id, len(r.rows[layer])-1)
		}
		out[i] = r.rows[layer][id]
	}
	return out, func() {}, nil
}
